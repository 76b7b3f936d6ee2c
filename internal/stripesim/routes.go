package stripesim

import "net/http"

// routes lists the endpoints, most specific first (search before :id).
func (s *Server) routes() []route {
	seg := func(path ...string) []string { return append([]string{"v1"}, path...) }
	return []route{
		{http.MethodPost, seg("customers"), customerSchema(), s.createCustomer},
		{http.MethodGet, seg("customers", "*"), expandOnly(), s.retrieveCustomer},
		{http.MethodPost, seg("customers", "*"), customerUpdateSchema(), s.updateCustomer},
		{http.MethodGet, seg("payment_methods", "*"), expandOnly(), s.retrievePaymentMethod},
		{http.MethodPost, seg("payment_methods", "*", "attach"), attachSchema(), s.attachPaymentMethod},
		{http.MethodPost, seg("payment_intents"), paymentIntentCreateSchema(), s.createPaymentIntent},
		{http.MethodGet, seg("payment_intents"), paymentIntentListSchema(), s.listPaymentIntents},
		{http.MethodGet, seg("payment_intents", "search"), paymentIntentSearchSchema(), s.searchPaymentIntents},
		{http.MethodGet, seg("payment_intents", "*"), expandOnly(), s.retrievePaymentIntent},
		{http.MethodGet, seg("events"), eventListSchema(), s.listEvents},
		{http.MethodGet, seg("events", "*"), expandOnly(), s.retrieveEvent},
	}
}
