// Package billrun is the module root that Google's Go functions buildpack
// builds: it finds Go files only at the root of the uploaded source, and the
// blank import of the framework's functions package selects its declarative
// template. The functions themselves register in billrun.dev/billrun/functions.
package billrun

import (
	_ "billrun.dev/billrun/functions"
	_ "github.com/GoogleCloudPlatform/functions-framework-go/functions"
)
