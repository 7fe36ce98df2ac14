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
