package hcloudemu

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hetznercloud/hcloud-go/v2/hcloud/schema"
)

// MetadataPath is the path prefix of the emulated metadata service; the real
// one is http://169.254.169.254/hetzner/v1/metadata.
const MetadataPath = "/hetzner/v1/metadata"

// MetadataEndpoint returns the metadata service URL of the emulator whose API
// endpoint (as returned by NewTestServer) is apiEndpoint: the same server,
// path MetadataPath.
func MetadataEndpoint(apiEndpoint string) string {
	return strings.TrimSuffix(strings.TrimSuffix(apiEndpoint, "/"), "/v1") + MetadataPath
}

// WithMetadataServer makes the metadata service answer for the server with
// this name or ID ("the server the client runs on"). It is applied on every
// Reset, before the seeds (whose metadata_server wins).
func WithMetadataServer(nameOrID string) Option {
	return func(e *Emulator) { e.metadataServer = nameOrID }
}

// SetMetadataServer makes the metadata service answer for the server with
// this name or ID; "" turns the answers off (404). The server need not exist
// yet: it is looked up on every metadata request. Reset restores the value
// of WithMetadataServer and the seeds.
func (e *Emulator) SetMetadataServer(nameOrID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.st.metadataServer = nameOrID
}

// MetadataRequests returns how many metadata requests were served since the
// last Reset or ResetRequests, whatever their answer.
func (e *Emulator) MetadataRequests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.metadataReqs
}

// serveMetadata answers GET /hetzner/v1/metadata/{hostname|instance-id|
// public-ipv4|region|availability-zone|private-networks} in plain text, as
// hcloud-go's metadata client reads them. Like the real service it needs no
// token; it is not rate limited and not in the API request log, but faults
// apply (a Delay trips client timeouts).
func (e *Emulator) serveMetadata(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.metadataReqs++
	e.mu.Unlock()
	if _, answered := e.applyFault(w, r); answered {
		return
	}
	if r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	e.mu.Lock()
	body, status := e.metadataAnswer(strings.TrimPrefix(r.URL.Path, MetadataPath))
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = fmt.Fprint(w, body)
}

// metadataAnswer computes one metadata reply; the caller holds e.mu.
func (e *Emulator) metadataAnswer(path string) (string, int) {
	srv := e.metadataSelf()
	if srv == nil {
		return fmt.Sprintf("hcloudemu: no metadata server: %q is not a server (set one with -metadata-server, "+
			"WithMetadataServer, SetMetadataServer, the seed's metadata_server or PUT /_emu/metadata)\n", e.st.metadataServer), http.StatusNotFound
	}
	switch path {
	case "/hostname":
		return srv.Name, http.StatusOK
	case "/instance-id":
		return strconv.FormatInt(srv.ID, 10), http.StatusOK
	case "/public-ipv4":
		return srv.PublicNet.IPv4.IP, http.StatusOK
	case "/region":
		return srv.Location.NetworkZone, http.StatusOK
	case "/availability-zone":
		return datacenterName(srv.Location.Name), http.StatusOK
	case "/private-networks":
		return e.privateNetworksYAML(srv), http.StatusOK
	}
	return "not found\n", http.StatusNotFound
}

// metadataSelf resolves the configured metadata server by name or ID.
func (e *Emulator) metadataSelf() *schema.Server {
	want := e.st.metadataServer
	if want == "" {
		return nil
	}
	for _, srv := range e.st.servers {
		if srv.Name == want || strconv.FormatInt(srv.ID, 10) == want {
			return srv
		}
	}
	return nil
}

// privateNetworksYAML renders the server's networks as the real service's
// YAML list ("[]" when it has none).
func (e *Emulator) privateNetworksYAML(srv *schema.Server) string {
	if len(srv.PrivateNet) == 0 {
		return "[]\n"
	}
	var b strings.Builder
	for i, pn := range srv.PrivateNet {
		name, rng, subnet, gateway := "", "", "", ""
		if nw, ok := e.st.networks[pn.Network]; ok {
			name, rng = nw.Name, nw.IPRange
			if p, err := netip.ParsePrefix(nw.IPRange); err == nil {
				gateway = p.Masked().Addr().Next().String()
			}
			ip, _ := netip.ParseAddr(pn.IP)
			if j := slices.IndexFunc(nw.Subnets, func(s schema.NetworkSubnet) bool {
				p, err := netip.ParsePrefix(s.IPRange)
				return err == nil && p.Contains(ip)
			}); j >= 0 {
				subnet = nw.Subnets[j].IPRange
			}
		}
		fmt.Fprintf(&b, "- ip: %s\n", pn.IP)
		fmt.Fprintf(&b, "  alias_ips: [%s]\n", strings.Join(pn.AliasIPs, ", "))
		fmt.Fprintf(&b, "  interface_num: %d\n", i+1)
		fmt.Fprintf(&b, "  mac_address: %s\n", pn.MACAddress)
		fmt.Fprintf(&b, "  network_id: %d\n", pn.Network)
		fmt.Fprintf(&b, "  network_name: %s\n", name)
		fmt.Fprintf(&b, "  network: %s\n", rng)
		fmt.Fprintf(&b, "  subnet: %s\n", subnet)
		fmt.Fprintf(&b, "  gateway: %s\n", gateway)
	}
	return b.String()
}

// datacenterName is the legacy datacenter name of a location, as the
// metadata service's availability-zone (fsn1 → fsn1-dc14).
func datacenterName(location string) string {
	switch location {
	case "fsn1":
		return "fsn1-dc14"
	case "nbg1":
		return "nbg1-dc3"
	case "hel1":
		return "hel1-dc2"
	}
	return location + "-dc1"
}
