package stripesim

import "sort"

// Duplicates groups payments by key and returns every group holding more than
// one payment, each in ledger order. With key returning a payment's period and
// customer (from its metadata), an empty result is the proof of "at most one
// successful payment per (period, customer)". Payments for which key returns
// "" are not grouped.
func Duplicates(payments []Payment, key func(Payment) string) map[string][]Payment {
	groups := map[string][]Payment{}
	for _, p := range payments {
		if k := key(p); k != "" {
			groups[k] = append(groups[k], p)
		}
	}
	for k, g := range groups {
		if len(g) < 2 {
			delete(groups, k)
		} else {
			sort.SliceStable(g, func(i, j int) bool { return g[i].Created.Before(g[j].Created) })
		}
	}
	return groups
}
