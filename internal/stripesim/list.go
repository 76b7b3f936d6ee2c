package stripesim

import (
	"net/http"
	"sort"
)

// Stripe's list paging limits.
const (
	defaultListLimit = 10
	maxListLimit     = 100
)

// listSchema adds Stripe's paging parameters to an endpoint's own.
func listSchema(own schema) schema {
	sc := schema{
		"limit":          {kind: kInt},
		"starting_after": {kind: kString},
		"ending_before":  {kind: kString},
		"created":        {kind: kIntOrRange},
		"expand":         {kind: kStringList},
	}
	for k, v := range own {
		sc[k] = v
	}
	return sc
}

// listItem is one object in a list, with its creation order.
type listItem struct {
	seq int64
	obj any
}

// listLimit reads and checks the limit parameter.
func listLimit(p params) (int, *apiError) {
	limit := int64(defaultListLimit)
	if v, ok := p.integer("limit"); ok {
		limit = v
	}
	if limit < 1 || limit > maxListLimit {
		return 0, invalidRequest("Invalid limit: must be between 1 and 100", "limit", "parameter_invalid_integer")
	}
	return int(limit), nil
}

// listPage pages items newest first, the way Stripe's lists do: starting_after
// gives the next older page, ending_before the page just newer than the cursor.
// cursor maps an object id to its creation order. Called with s.mu held.
func (s *Server) listPage(c *call, url, objName string, items []listItem, cursor func(id string) (int64, bool)) result {
	limit, e := listLimit(c.p)
	if e != nil {
		return failure(e)
	}
	after, before := c.p.str("starting_after"), c.p.str("ending_before")
	if after != "" && before != "" {
		return failure(invalidRequest("You may only specify one of these parameters: starting_after, ending_before.", "ending_before", "parameter_invalid_string"))
	}
	sort.Slice(items, func(i, j int) bool { return items[i].seq > items[j].seq })
	var page []listItem
	var hasMore bool
	switch {
	case after != "":
		at, found := cursor(after)
		if !found {
			return failure(resourceMissing(http.StatusBadRequest, objName, after, "starting_after"))
		}
		i := sort.Search(len(items), func(i int) bool { return items[i].seq < at })
		page, hasMore = items[i:], len(items)-i > limit
		page = page[:min(limit, len(page))]
	case before != "":
		at, found := cursor(before)
		if !found {
			return failure(resourceMissing(http.StatusBadRequest, objName, before, "ending_before"))
		}
		i := sort.Search(len(items), func(i int) bool { return items[i].seq <= at })
		start := max(0, i-limit)
		page, hasMore = items[start:i], start > 0
	default:
		page, hasMore = items[:min(limit, len(items))], len(items) > limit
	}
	data := make([]any, len(page))
	for i, it := range page {
		data[i] = it.obj
	}
	return success(map[string]any{"object": "list", "data": data, "has_more": hasMore, "url": url}, nil)
}
