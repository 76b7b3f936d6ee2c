// Package functions registers billrun's Cloud Functions with
// functions-framework-go. Handlers are built from the environment on the first
// request (internal/api.Lazy); everything else lives in internal/.
//
// The workflow calls Preflight, IssueVaultKeys, Charge and MarkCompleted.
// VaultProxy is deployed as its own function (FUNCTION_TARGET=VaultProxy), so
// it is served at the root of its URL, where Charge's stripe-go client sends
// /v1/… requests; it alone reads the Stripe secret.
package functions

import (
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"billrun.dev/billrun/internal/api"
)

func init() {
	lazy := api.NewLazy(os.Getenv, os.Stderr)
	for _, name := range append(api.Names(), api.NameVaultProxy) {
		functions.HTTP(name, lazy.Handler(name))
	}
}
