package hcloudemu

// RouteTable returns every /v1 endpoint an Emulator serves, as "METHOD /v1/path"
// with ServeMux placeholders ("GET /v1/servers/{id}"): the routes of
// routeTable, for the contract test in package hcloudemu_test.
func RouteTable() []string {
	rs := New().routeTable()
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.method+" "+r.path)
	}
	return out
}
