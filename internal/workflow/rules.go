package workflow

import "time"

// Documented limits of Cloud Workflows (quotas page and syntax reference). Each
// is enforced at deploy time (Load) or at run time (Engine).
const (
	MaxSourceBytes        = 128 * 1024         // workflow source size [D] quotas
	MaxAssignsPerStep     = 50                 // assignments in one assign step [D]
	MaxSwitchConditions   = 50                 // conditions in one switch [D]
	MaxBranches           = 10                 // branches in one parallel step [D] quotas
	MaxParallelDepth      = 2                  // nested parallel steps [D] quotas
	MaxConcurrency        = 20                 // concurrent branches+iterations per parallel step [D] quotas
	MaxSteps              = 100_000            // steps per execution [D] quotas
	MaxMemoryBytes        = 512 * 1024         // variables of an execution [D] quotas
	MaxArgumentBytes      = 32 * 1024          // execution argument [D] quotas
	MaxHTTPResponseBytes  = 2 * 1024 * 1024    // HTTP response body [D] quotas
	MaxCallDepth          = 20                 // nested subworkflow calls [D] quotas
	MaxUnhandledBranchErr = 100                // unhandled branch errors reported [D] quotas
	MaxResultBytes        = 2 * 1024 * 1024    // execution result (connector child results) [D] quotas
	DefaultHTTPTimeout    = 300 * time.Second  // http.* default timeout [D] http
	MaxHTTPTimeout        = 1800 * time.Second // http.* maximum timeout [D] http
)

// Undocumented behaviour: billrun's choices, kept here so each is easy to find
// and change. Every [?] in ../shared/reference/workflows.md that the engine meets
// is decided by one of these.
const (
	// DefaultConcurrencyLimit is used when a parallel step sets no
	// concurrency_limit: the documented per-step maximum.
	DefaultConcurrencyLimit = MaxConcurrency

	// allowReturnInParallel: `return`, `next: end` and `next: break` inside a
	// parallel branch or iteration are rejected at deploy time (Google documents
	// no meaning for them there); `next: continue` ends the iteration.
	allowReturnInParallel = false

	// Jumps: `next: X` may target a step of the same block or of an enclosing
	// block (nested steps, switch and try bodies, except blocks), but never
	// enter a nested block, nor leave a for body, a parallel branch or
	// iteration, or a routine. Leaving an except block is allowed: Google's
	// error-catch sample jumps from one to a later step of main. See
	// validator.next in validate.go.

	// unhandledBranchMessage is the message of the UnhandledBranchError raised by
	// a parallel step; the error map also carries "branches": a list of
	// {"id": branch name or iteration index as a string, "error": error map}.
	unhandledBranchMessage = "UnhandledBranchError: One or more branches or iterations encountered an unhandled runtime error"

	// childFailedMessage is the OperationError message the execution connector
	// raises when a child execution fails or is cancelled; the map also carries
	// "operation": the child execution (name, state, error).
	childFailedMessage = "Execution failed or cancelled."
)

// FakeOIDCToken is the bearer token the local engine sends for `auth: {type:
// OIDC|OAuth2}`: recognisably fake, never a real credential. Local function
// servers may accept exactly this token.
const FakeOIDCToken = "billrun-local-fake-oidc-token"
