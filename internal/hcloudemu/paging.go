package hcloudemu

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// listItem is one resource of a list, with what filters and sorts need; the
// JSON form is rendered only for the items of the requested page.
type listItem struct {
	id      int64
	name    string
	labels  map[string]string
	created time.Time
	status  string // server or action status (filter and sort)
	typ     string // certificate type (filter)
	render  func() any
}

// pagination is meta.pagination with the nulls the real API sends.
type pagination struct {
	Page         int  `json:"page"`
	PerPage      int  `json:"per_page"`
	PreviousPage *int `json:"previous_page"`
	NextPage     *int `json:"next_page"`
	LastPage     *int `json:"last_page"`
	TotalEntries *int `json:"total_entries"`
}

const (
	defaultPerPage = 25
	maxPerPage     = 50
)

// list filters items by the name and label_selector query parameters (and
// by keep, when given), sorts them (ID order unless sort says otherwise),
// and answers the requested page under key with meta.pagination and a Link
// header.
func (e *Emulator) list(r *http.Request, key string, items []listItem, keep func(listItem) bool) (int, any, error) {
	q := r.URL.Query()
	page, perPage, err := pageParams(q.Get("page"), q.Get("per_page"))
	if err != nil {
		return 0, nil, err
	}
	var sel Selector
	if s := q.Get("label_selector"); s != "" {
		parsed, perr := ParseSelector(s)
		if perr != nil {
			return 0, nil, errInvalid("label_selector", "%v", perr)
		}
		sel = parsed
	}
	_, nameSet := q["name"]
	name := q.Get("name")
	filtered := items[:0:0]
	for _, it := range items {
		if nameSet && it.name != name {
			continue
		}
		if sel != nil && !sel.Matches(it.labels) {
			continue
		}
		if keep != nil && !keep(it) {
			continue
		}
		filtered = append(filtered, it)
	}
	if err := sortItems(filtered, q["sort"]); err != nil {
		return 0, nil, err
	}

	total := len(filtered)
	last := max(1, (total+perPage-1)/perPage)
	start := min((page-1)*perPage, total)
	end := min(start+perPage, total)
	out := make([]any, 0, end-start)
	for _, it := range filtered[start:end] {
		out = append(out, it.render())
	}
	p := pagination{Page: page, PerPage: perPage, LastPage: &last, TotalEntries: &total}
	if page > 1 {
		prev := min(page-1, last)
		p.PreviousPage = &prev
	}
	if page < last {
		next := page + 1
		p.NextPage = &next
	}
	setLinkHeader(r, p)
	return http.StatusOK, map[string]any{key: out, "meta": map[string]any{"pagination": p}}, nil
}

// setLinkHeader sets the Link header (rel prev, next, last) on the response
// writer the middleware put into the request context.
func setLinkHeader(r *http.Request, p pagination) {
	rw, ok := r.Context().Value(responseWriterKey{}).(http.ResponseWriter)
	if !ok {
		return
	}
	link := func(page int, rel string) string {
		u := *r.URL
		q := u.Query()
		q.Set("page", strconv.Itoa(page))
		q.Set("per_page", strconv.Itoa(p.PerPage))
		u.RawQuery = q.Encode()
		return fmt.Sprintf("<%s>; rel=%q", u.RequestURI(), rel)
	}
	var links []string
	if p.PreviousPage != nil {
		links = append(links, link(*p.PreviousPage, "prev"))
	}
	if p.NextPage != nil {
		links = append(links, link(*p.NextPage, "next"))
	}
	links = append(links, link(*p.LastPage, "last"))
	rw.Header().Set("Link", strings.Join(links, ", "))
}

type responseWriterKey struct{}

func pageParams(pageS, perPageS string) (int, int, *apiError) {
	page, perPage := 1, defaultPerPage
	if pageS != "" {
		n, err := strconv.Atoi(pageS)
		if err != nil || n < 1 {
			return 0, 0, errInvalid("page", "page must be an integer of at least 1, got %q", pageS)
		}
		page = n
	}
	if perPageS != "" {
		n, err := strconv.Atoi(perPageS)
		if err != nil || n < 1 {
			return 0, 0, errInvalid("per_page", "per_page must be an integer of at least 1, got %q", perPageS)
		}
		perPage = min(n, maxPerPage)
	}
	return page, perPage, nil
}

// sortItems sorts by the given sort parameters (field[:asc|:desc]); the ID
// breaks ties and is the default order.
func sortItems(items []listItem, sorts []string) *apiError {
	type key struct {
		field string
		desc  bool
	}
	var keys []key
	for _, s := range sorts {
		field, dir, _ := strings.Cut(s, ":")
		if dir != "" && dir != "asc" && dir != "desc" {
			return errInvalid("sort", "invalid sort direction %q", dir)
		}
		switch field {
		case "id", "name", "created", "status", "command", "started":
		default:
			return errInvalid("sort", "invalid sort field %q", field)
		}
		keys = append(keys, key{field, dir == "desc"})
	}
	if len(keys) == 0 && slices.IsSortedFunc(items, func(a, b listItem) int { return cmp.Compare(a.id, b.id) }) {
		return nil
	}
	slices.SortStableFunc(items, func(a, b listItem) int {
		for _, k := range keys {
			var c int
			switch k.field {
			case "id":
				c = cmp.Compare(a.id, b.id)
			case "name":
				c = cmp.Compare(a.name, b.name)
			case "created", "started":
				c = a.created.Compare(b.created)
			case "status":
				c = cmp.Compare(a.status, b.status)
			case "command":
				c = cmp.Compare(a.name, b.name)
			}
			if k.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return cmp.Compare(a.id, b.id)
	})
	return nil
}
