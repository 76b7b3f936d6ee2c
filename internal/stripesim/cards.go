package stripesim

// testCard is one of Stripe's documented test payment methods
// (docs.stripe.com/testing) and what happens when it is used.
type testCard struct {
	brand, last4, funding string
	// attachDecline: attaching it to a customer fails with this decline (the
	// "chargeDeclined" family cannot be saved).
	attachDecline *decline
	// chargeDecline: every charge fails with this decline.
	chargeDecline *decline
	// authRequired: every transaction needs 3D Secure; off-session it fails
	// with this decline (authentication_required), on-session it needs action.
	authRequired *decline
}

// decline is a card_error's code, decline code and message.
type decline struct {
	code, declineCode, message string
}

// testCards returns the table of test payment method ids. It is a function,
// not a package variable, so nothing global is mutable.
func testCards() map[string]testCard {
	declineGeneric := &decline{"card_declined", "generic_decline", "Your card was declined."}
	declineInsufficient := &decline{"card_declined", "insufficient_funds", "Your card has insufficient funds."}
	declineLost := &decline{"card_declined", "lost_card", "Your card was declined."}
	declineStolen := &decline{"card_declined", "stolen_card", "Your card was declined."}
	declineExpired := &decline{"expired_card", "expired_card", "Your card has expired."}
	declineCVC := &decline{"incorrect_cvc", "incorrect_cvc", "Your card's security code is incorrect."}
	declineProcessing := &decline{"processing_error", "processing_error", "An error occurred while processing your card. Try again in a little bit."}
	declineFraud := &decline{"card_declined", "fraudulent", "Your card was declined."}
	declineVelocity := &decline{"card_declined", "card_velocity_exceeded", "Your card was declined for making repeated attempts too frequently or exceeding its amount limit."}
	declineAuthRequired := &decline{"authentication_required", "authentication_required", "Your card was declined. This transaction requires authentication."}
	visa := func(last4 string) testCard { return testCard{brand: "visa", last4: last4, funding: "credit"} }
	declined := func(last4 string, d *decline) testCard {
		c := visa(last4)
		c.attachDecline, c.chargeDecline = d, d
		return c
	}
	customerFail := visa("0341")
	customerFail.chargeDecline = declineGeneric
	auth := visa("3184")
	auth.authRequired = declineAuthRequired
	return map[string]testCard{
		"pm_card_visa":                                     visa("4242"),
		"pm_card_visa_debit":                               {brand: "visa", last4: "5556", funding: "debit"},
		"pm_card_mastercard":                               {brand: "mastercard", last4: "4444", funding: "credit"},
		"pm_card_amex":                                     {brand: "amex", last4: "8431", funding: "credit"},
		"pm_card_visa_chargeDeclined":                      declined("0002", declineGeneric),
		"pm_card_visa_chargeDeclinedInsufficientFunds":     declined("9995", declineInsufficient),
		"pm_card_visa_chargeDeclinedLostCard":              declined("9987", declineLost),
		"pm_card_visa_chargeDeclinedStolenCard":            declined("9979", declineStolen),
		"pm_card_chargeDeclinedExpiredCard":                declined("0069", declineExpired),
		"pm_card_chargeDeclinedIncorrectCvc":               declined("0127", declineCVC),
		"pm_card_chargeDeclinedProcessingError":            declined("0119", declineProcessing),
		"pm_card_visa_chargeDeclinedVelocityLimitExceeded": declined("6975", declineVelocity),
		"pm_card_chargeDeclinedFraudulent":                 declined("0019", declineFraud),
		"pm_card_chargeCustomerFail":                       customerFail,
		"pm_card_authenticationRequired":                   auth,
	}
}
