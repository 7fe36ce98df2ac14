package hcloudemu

import (
	"net/http"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

func (e *Emulator) listLocations(r *http.Request) (int, any, error) {
	items := make([]listItem, 0, len(e.st.locations))
	for _, l := range e.st.locations {
		items = append(items, listItem{id: l.ID, name: l.Name, render: func() any { return l }})
	}
	return e.list(r, "locations", items, nil)
}

func (e *Emulator) getLocation(r *http.Request) (int, any, error) {
	id, err := pathID(r, "location")
	if err != nil {
		return 0, nil, err
	}
	for _, l := range e.st.locations {
		if l.ID == id {
			return http.StatusOK, schema.LocationGetResponse{Location: l}, nil
		}
	}
	return 0, nil, errNotFound("location", id)
}

func (e *Emulator) listServerTypes(r *http.Request) (int, any, error) {
	items := make([]listItem, 0, len(e.st.serverTypes))
	for _, t := range e.st.serverTypes {
		items = append(items, listItem{id: t.ID, name: t.Name, render: func() any { return t }})
	}
	return e.list(r, "server_types", items, nil)
}

func (e *Emulator) getServerType(r *http.Request) (int, any, error) {
	id, err := pathID(r, "server_type")
	if err != nil {
		return 0, nil, err
	}
	for _, t := range e.st.serverTypes {
		if t.ID == id {
			return http.StatusOK, schema.ServerTypeGetResponse{ServerType: t}, nil
		}
	}
	return 0, nil, errNotFound("server_type", id)
}

func (e *Emulator) listLoadBalancerTypes(r *http.Request) (int, any, error) {
	items := make([]listItem, 0, len(e.st.lbTypes))
	for _, t := range e.st.lbTypes {
		items = append(items, listItem{id: t.ID, name: t.Name, render: func() any { return t }})
	}
	return e.list(r, "load_balancer_types", items, nil)
}

func (e *Emulator) getLoadBalancerType(r *http.Request) (int, any, error) {
	id, err := pathID(r, "load_balancer_type")
	if err != nil {
		return 0, nil, err
	}
	for _, t := range e.st.lbTypes {
		if t.ID == id {
			return http.StatusOK, schema.LoadBalancerTypeGetResponse{LoadBalancerType: t}, nil
		}
	}
	return 0, nil, errNotFound("load_balancer_type", id)
}

// datacentersRemoved is the announcement of the datacenters' removal.
const datacentersRemoved = "https://docs.hetzner.cloud/changelog#2026-06-02-datacenters-deprecated"

// datacentersGone serves GET /v1/datacenters and /v1/datacenters/{id} as the
// API does since 1 October 2026: 410 deprecated_api_endpoint, the
// description's error for removed functionality, naming the announcement.
// Locations (and server types' locations) replace datacenters.
func (e *Emulator) datacentersGone(*http.Request) (int, any, error) {
	return 0, nil, &apiError{
		status: http.StatusGone, code: "deprecated_api_endpoint", message: "API functionality was removed",
		details: map[string]any{"announcement": datacentersRemoved},
	}
}
