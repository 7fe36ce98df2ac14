package hcloudemu

import (
	"net/http"
	"slices"
)

// listResourceActions serves GET /v1/{servers|networks|load_balancers}/{id}/actions:
// the actions whose resources include the resource, filtered by status
// (repeatable), sorted and paginated like every list. An unknown resource is
// 404 not_found.
func (e *Emulator) listResourceActions(kind string, exists func(id int64) bool) apiFunc {
	return func(r *http.Request) (int, any, error) {
		id, err := pathID(r, kind)
		if err != nil {
			return 0, nil, err
		}
		if !exists(id) {
			return 0, nil, errNotFound(kind, id)
		}
		now := e.now()
		var items []listItem
		for _, aid := range sortedIDs(e.st.actions) {
			a := e.st.actions[aid]
			if !slices.Contains(a.resources, ref(kind, id)) {
				continue
			}
			rendered := a.render(now)
			items = append(items, listItem{id: aid, name: rendered.Command, created: a.started, status: rendered.Status,
				render: func() any { return rendered }})
		}
		statuses := r.URL.Query()["status"]
		return e.list(r, "actions", items, func(it listItem) bool {
			return len(statuses) == 0 || slices.Contains(statuses, it.status)
		})
	}
}

func (e *Emulator) serverExists(id int64) bool { _, ok := e.st.servers[id]; return ok }

func (e *Emulator) networkExists(id int64) bool { _, ok := e.st.networks[id]; return ok }

func (e *Emulator) loadBalancerExists(id int64) bool { _, ok := e.st.lbs[id]; return ok }
