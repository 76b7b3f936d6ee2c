// Package workflows embeds billrun's production workflows, so that the billrun
// binary runs, from any directory, the very YAML that deployment ships.
package workflows

import _ "embed"

//go:embed billing.yaml
var billing string

// BillingFile is the billing workflow's file name; without its extension it is
// the workflow id.
const BillingFile = "billing.yaml"

// Billing returns the source of the production billing workflow.
func Billing() []byte { return []byte(billing) }
