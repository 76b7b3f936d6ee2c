package stripesim

import (
	"net/url"
	"reflect"
	"testing"
)

func TestParamsTyping(t *testing.T) {
	raw := "amount=1999&currency=usd&confirm=true&off_session=one_off&metadata[period]=2026-10&metadata[customer]=c1" +
		"&payment_method_types[]=card&payment_method_types[]=link&expand[0]=customer&automatic_payment_methods[enabled]=false"
	vals, err := url.ParseQuery(raw)
	if err != nil {
		t.Fatal(err)
	}
	tree, e := parseForm(vals, formKeys(raw))
	if e != nil {
		t.Fatal(e.Message)
	}
	p, e := paymentIntentCreateSchema().validate(tree)
	if e != nil {
		t.Fatal(e.Message)
	}
	want := params{
		"amount": int64(1999), "currency": "usd", "confirm": true, "off_session": true,
		"metadata":                  map[string]string{"period": "2026-10", "customer": "c1"},
		"payment_method_types":      []string{"card", "link"},
		"expand":                    []string{"customer"},
		"automatic_payment_methods": params{"enabled": false},
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %#v\nwant %#v", p, want)
	}

	created := "created[gte]=10&created[lt]=20"
	vals, _ = url.ParseQuery(created)
	tree, _ = parseForm(vals, formKeys(created))
	lp, e := paymentIntentListSchema().validate(tree)
	if e != nil {
		t.Fatal(e.Message)
	}
	r, _ := lp.rangeOf("created")
	if !r.contains(10) || !r.contains(19) || r.contains(20) || r.contains(9) {
		t.Fatalf("range %+v", r)
	}
}

// FuzzParams feeds arbitrary form bodies through parsing and validation: any
// input gives typed params or a Stripe error, never a panic.
func FuzzParams(f *testing.F) {
	for _, s := range []string{"amount=1&currency=usd", "metadata[a]=b&metadata=c", "types[]=a&types[x]=b", "a[b][c]=d", "created[gte]=x", "%zz", "expand[", "=1"} {
		f.Add(s)
	}
	schemas := []schema{paymentIntentCreateSchema(), eventListSchema(), customerSchema()}
	f.Fuzz(func(t *testing.T, raw string) {
		vals, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		tree, e := parseForm(vals, formKeys(raw))
		if e != nil {
			if e.status != 400 {
				t.Fatalf("status %d", e.status)
			}
			return
		}
		for _, sc := range schemas {
			if _, e := sc.validate(tree); e != nil && e.status != 400 {
				t.Fatalf("status %d for %q", e.status, raw)
			}
		}
	})
}
