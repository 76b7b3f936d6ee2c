// Package functions registers billrun's Cloud Functions with
// functions-framework-go. Handlers are built from the environment on the first
// request (internal/api.Lazy); everything else lives in internal/.
package functions

import (
	"os"

	"github.com/GoogleCloudPlatform/functions-framework-go/functions"

	"billrun.dev/billrun/internal/api"
)

func init() {
	lazy := api.NewLazy(os.Getenv, os.Stderr)
	for _, name := range api.Names() {
		functions.HTTP(name, lazy.Handler(name))
	}
}
