package stripesim

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/stripe/stripe-go/v82"
)

// BenchmarkCharge measures off-session charges through stripe-go over
// loopback HTTP, in memory and with the synced journal of a data directory.
func BenchmarkCharge(b *testing.B) {
	for _, mode := range []string{"memory", "data-dir"} {
		b.Run(mode, func(b *testing.B) {
			cfg := Config{}
			if mode == "data-dir" {
				cfg.DataDir = b.TempDir()
			}
			srv, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(srv)
			defer func() {
				ts.Close()
				srv.Close()
			}()
			client := stripe.NewClient(testKey, stripe.WithBackends(stripe.NewBackendsWithConfig(&stripe.BackendConfig{
				URL: stripe.String(ts.URL), MaxNetworkRetries: stripe.Int64(0), LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
			})))
			ctx := context.Background()
			cust, err := client.V1Customers.Create(ctx, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if _, err := client.V1PaymentIntents.Create(ctx, chargeParams(cust.ID, "pm_card_visa", fmt.Sprintf("bench-%d", i), 1000)); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "charges/s")
			if len(srv.Ledger()) != b.N {
				b.Fatalf("ledger %d, want %d", len(srv.Ledger()), b.N)
			}
		})
	}
}
