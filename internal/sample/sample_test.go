package sample

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestGenerate(t *testing.T) {
	a, b := Generate(500, 7), Generate(500, 7)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("the same seed gave different customers")
	}
	if reflect.DeepEqual(a, Generate(500, 8)) {
		t.Fatal("another seed gave the same customers")
	}
	kinds := map[string]int{}
	for i, c := range a {
		if want := fmt.Sprintf("cus_%05d", i+1); c.ID != want {
			t.Fatalf("customer %d: id %s, want %s", i, c.ID, want)
		}
		c.StripeCustomerID = "cus_stripe" // set by Store
		if d := c.Decide("2026-10"); d.Amount <= 0 {
			t.Fatalf("%s: decision %+v, want an amount to charge", c.ID, d)
		}
		switch {
		case c.PlanAmount > c.Ceiling:
			kinds["above_ceiling"]++
		case c.PaymentMethod == "pm_card_authenticationRequired":
			kinds["needs_auth"]++
		case strings.Contains(c.PaymentMethod, "Declined"):
			kinds["declines"]++
		default:
			kinds["pays"]++
		}
	}
	for _, k := range []string{"pays", "declines", "needs_auth", "above_ceiling"} {
		if kinds[k] == 0 {
			t.Errorf("no %s customer in %v", k, kinds)
		}
	}
	if kinds["pays"] < 400 {
		t.Errorf("most customers should pay: %v", kinds)
	}
}

func TestReadCSV(t *testing.T) {
	header := strings.Join(Header, ",") + "\n"
	tests := []struct {
		name, text string
		wantN      int
		wantErr    string
	}{
		{name: "two customers", text: header + "a,,pm_card_visa,USD,100,200,true\nb,cus_x,pm_card_visa,eur,5,0,false\n", wantN: 2},
		{name: "header only", text: header, wantN: 0},
		{name: "wrong header", text: "id,amount\n", wantErr: "wrong number of fields"},
		{name: "other columns", text: strings.Replace(header, "ceiling", "cap", 1), wantErr: "the first line must be"},
		{name: "bad numbers on two lines", text: header + "a,,pm,usd,x,1,true\nb,,pm,usd,1,1,maybe\n", wantErr: "line 3"},
		{name: "empty", text: "", wantErr: "the first line must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadCSV(strings.NewReader(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(got) != tt.wantN {
				t.Fatalf("%d customers, %v; want %d", len(got), err, tt.wantN)
			}
			if tt.wantN > 0 && got[0].Currency != "usd" {
				t.Errorf("currency %q, want it lowercased", got[0].Currency)
			}
		})
	}
}
