package billing

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"billrun.dev/billrun/internal/vault"
)

var (
	periodRE = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}$`)
	// Customer ids become Firestore document ids: no '/', no "__…__", bounded.
	customerIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
	// Execution ids: Workflows execution UUIDs, or local ids such as "local:1".
	executionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$`)
	currencyRE    = regexp.MustCompile(`^[a-z]{3}$`)
)

// Periods before this year are refused as unknown (billrun did not exist).
const firstYear = 2000

// ValidatePeriod checks that p is a known billing period "YYYY-MM": a real month
// from the year 2000 up to the month after now (billing in advance is allowed;
// further ahead is a typo).
func ValidatePeriod(p string, now time.Time) error {
	if !periodRE.MatchString(p) {
		return fmt.Errorf("%w: period %q: want YYYY-MM", ErrInvalidInput, p)
	}
	year, _ := strconv.Atoi(p[:4])
	month, _ := strconv.Atoi(p[5:])
	if month < 1 || month > 12 {
		return fmt.Errorf("%w: period %q: month must be 01 to 12", ErrInvalidInput, p)
	}
	if year < firstYear {
		return fmt.Errorf("%w: period %q: unknown period (before %d)", ErrInvalidInput, p, firstYear)
	}
	start := time.Date(year, time.Month(month), 1, 0, 0, 0, 0, time.UTC)
	now = now.UTC()
	latest := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	if start.After(latest) {
		return fmt.Errorf("%w: period %q: unknown period (after %s)", ErrInvalidInput, p, latest.Format("2006-01"))
	}
	return nil
}

// ValidateCustomerID checks a customer id (also a document id).
func ValidateCustomerID(id string) error {
	if !customerIDRE.MatchString(id) {
		return fmt.Errorf("%w: customer_id %q: want 1-128 letters, digits, '_' or '-'", ErrInvalidInput, id)
	}
	return nil
}

// ValidateExecutionID checks a workflow execution id.
func ValidateExecutionID(id string) error {
	if !executionIDRE.MatchString(id) {
		return fmt.Errorf("%w: execution_id %q: want 1-128 letters, digits, '_', '.', ':' or '-'", ErrInvalidInput, id)
	}
	return nil
}

// validateKeyRef checks a vault key reference: every charge needs one (I3).
func validateKeyRef(ref string) error {
	switch {
	case ref == "":
		return fmt.Errorf("%w: key_ref: required (from IssueVaultKeys); no charge goes to Stripe without a vault key", ErrInvalidInput)
	case !vault.ValidRef(ref):
		return fmt.Errorf("%w: key_ref: malformed (want vk_ and 32 hex digits)", ErrInvalidInput)
	}
	return nil
}
