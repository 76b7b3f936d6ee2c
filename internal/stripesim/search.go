package stripesim

import (
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

func paymentIntentSearchSchema() schema {
	return schema{
		"query":  {kind: kString, required: true},
		"limit":  {kind: kInt},
		"page":   {kind: kString},
		"expand": {kind: kStringList},
	}
}

// clause is one term of a search query: [-]field op value.
type clause struct {
	negate bool
	field  string // amount, created, currency, customer, status, metadata
	key    string // metadata key
	op     string // ":", ">", "<", ">=", "<="
	value  string
	isNull bool
}

// searchQuery is clauses joined by all-AND or all-OR (Stripe forbids mixing).
type searchQuery struct {
	clauses []clause
	or      bool
}

// parseSearchQuery parses the subset of Stripe's search query language that
// applies to PaymentIntents: amount, created, currency, customer, status and
// metadata['key'], with :, >, <, >=, <=, negation and null.
func parseSearchQuery(q string) (searchQuery, error) {
	var sq searchQuery
	rest := strings.TrimSpace(q)
	if rest == "" {
		return sq, fmt.Errorf("the query is empty")
	}
	sawAnd, sawOr := false, false
	for {
		c, tail, err := parseClause(rest)
		if err != nil {
			return sq, err
		}
		sq.clauses = append(sq.clauses, c)
		tail = strings.TrimLeft(tail, " ")
		if tail == "" {
			break
		}
		switch {
		case strings.HasPrefix(tail, "AND "):
			sawAnd, rest = true, strings.TrimLeft(tail[4:], " ")
		case strings.HasPrefix(tail, "OR "):
			sawOr, rest = true, strings.TrimLeft(tail[3:], " ")
		default:
			// Stripe reads juxtaposed clauses as AND.
			sawAnd, rest = true, tail
		}
		if sawAnd && sawOr {
			return sq, fmt.Errorf("AND and OR cannot be combined in one query")
		}
	}
	sq.or = sawOr
	return sq, nil
}

func parseClause(s string) (clause, string, error) {
	var c clause
	if strings.HasPrefix(s, "-") {
		c.negate, s = true, s[1:]
	}
	i := 0
	for i < len(s) && (s[i] == '_' || s[i] >= 'a' && s[i] <= 'z') {
		i++
	}
	c.field, s = s[:i], s[i:]
	switch c.field {
	case "amount", "created", "currency", "customer", "status":
	case "metadata":
		if !strings.HasPrefix(s, "[") {
			return c, "", fmt.Errorf("metadata must be followed by ['key']")
		}
		key, tail, err := quoted(s[1:])
		if err != nil || !strings.HasPrefix(tail, "]") {
			return c, "", fmt.Errorf("metadata must be followed by ['key']")
		}
		c.key, s = key, tail[1:]
	case "":
		return c, "", fmt.Errorf("expected a field name at %q", truncate(s, 20))
	default:
		return c, "", fmt.Errorf("field %q is not supported for payment_intents", c.field)
	}
	for _, op := range []string{">=", "<=", ":", ">", "<"} {
		if strings.HasPrefix(s, op) {
			c.op, s = op, s[len(op):]
			break
		}
	}
	if c.op == "" {
		return c, "", fmt.Errorf("expected :, >, <, >= or <= after %s", c.field)
	}
	if c.op != ":" && c.field != "amount" && c.field != "created" {
		return c, "", fmt.Errorf("%s supports only the : operator", c.field)
	}
	switch {
	case strings.HasPrefix(s, "'") || strings.HasPrefix(s, `"`):
		v, tail, err := quoted(s)
		if err != nil {
			return c, "", err
		}
		c.value, s = v, tail
	case strings.HasPrefix(s, "null"):
		c.isNull, s = true, s[len("null"):]
	default:
		end := strings.IndexByte(s, ' ')
		if end < 0 {
			end = len(s)
		}
		c.value, s = s[:end], s[end:]
		if _, err := strconv.ParseInt(c.value, 10, 64); err != nil {
			return c, "", fmt.Errorf("value %q must be quoted", c.value)
		}
	}
	if (c.field == "amount" || c.field == "created") && !c.isNull {
		if _, err := strconv.ParseInt(c.value, 10, 64); err != nil {
			return c, "", fmt.Errorf("%s must be compared with an integer", c.field)
		}
	}
	return c, s, nil
}

// quoted reads a '…' or "…" string with backslash escapes.
func quoted(s string) (string, string, error) {
	if s == "" || s[0] != '\'' && s[0] != '"' {
		return "", "", fmt.Errorf("expected a quoted string")
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s):
			i++
			b.WriteByte(s[i])
		case s[i] == q:
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", fmt.Errorf("unterminated string")
}

func (q searchQuery) matches(pi *paymentIntent) bool {
	for _, c := range q.clauses {
		m := c.matches(pi) != c.negate
		if q.or && m {
			return true
		}
		if !q.or && !m {
			return false
		}
	}
	return !q.or
}

func (c clause) matches(pi *paymentIntent) bool {
	var field string
	var present bool
	switch c.field {
	case "amount":
		field, present = strconv.FormatInt(pi.Amount, 10), true
	case "created":
		field, present = strconv.FormatInt(pi.Created, 10), true
	case "currency":
		field, present = pi.Currency, true
	case "status":
		field, present = pi.Status, true
	case "customer":
		if pi.Customer != nil {
			field, present = *pi.Customer, true
		}
	case "metadata":
		field, present = pi.Metadata[c.key]
	}
	if c.isNull {
		return !present
	}
	if !present {
		return false
	}
	if c.op == ":" {
		if c.field == "currency" {
			return strings.EqualFold(field, c.value)
		}
		return field == c.value
	}
	a, _ := strconv.ParseInt(field, 10, 64)
	b, _ := strconv.ParseInt(c.value, 10, 64)
	switch c.op {
	case ">":
		return a > b
	case "<":
		return a < b
	case ">=":
		return a >= b
	default:
		return a <= b
	}
}

// searchPage is a page token: results older than seq.
func encodePage(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte("seq:" + strconv.FormatInt(seq, 10)))
}

func decodePage(tok string) (int64, bool) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimPrefix(string(b), "seq:"), 10, 64)
	return n, err == nil && strings.HasPrefix(string(b), "seq:")
}

// searchPaymentIntents searches, newest first, among PaymentIntents whose index
// entry exists: those created at least SearchDelay ago on the simulator's clock.
func (s *Server) searchPaymentIntents(c *call) result {
	q, err := parseSearchQuery(c.p.str("query"))
	if err != nil {
		return failure(invalidRequest("Invalid query: "+err.Error()+".", "query", "parameter_invalid_string"))
	}
	limit, e := listLimit(c.p)
	if e != nil {
		return failure(e)
	}
	before := int64(-1)
	if tok := c.p.str("page"); tok != "" {
		var valid bool
		if before, valid = decodePage(tok); !valid {
			return failure(invalidRequest("Invalid page: the page token is not one this search returned.", "page", "parameter_invalid_string"))
		}
	}
	indexed := c.now.Add(-s.cfg.SearchDelay)
	s.mu.Lock()
	var hits []*piRecord
	for _, rec := range s.st.pis {
		if rec.CreatedAt.After(indexed) || before >= 0 && rec.Seq >= before || !q.matches(&rec.PI) {
			continue
		}
		hits = append(hits, rec)
	}
	sort.Slice(hits, func(i, j int) bool { return hits[i].Seq > hits[j].Seq })
	hasMore := len(hits) > limit
	hits = hits[:min(limit, len(hits))]
	data := make([]any, len(hits))
	for i, h := range hits {
		data[i] = h.PI
	}
	s.mu.Unlock()
	var next *string
	if hasMore {
		tok := encodePage(hits[len(hits)-1].Seq)
		next = &tok
	}
	return success(map[string]any{
		"object": "search_result", "data": data, "has_more": hasMore, "next_page": next,
		"url": "/v1/payment_intents/search",
	}, nil)
}
