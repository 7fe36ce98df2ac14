package hcloudemu_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// descriptionFile is Hetzner's published OpenAPI description of the Cloud API
// (testdata/README.md says where and when it was taken).
const descriptionFile = "testdata/hetzner-openapi.yml"

// departure is a deliberate difference between today's API (and so the
// emulator) and the description: the description predates a change Hetzner
// announced. apply edits the loaded description so that the contract test
// holds the emulator to today's API. docs/emulator.md lists each one under
// its key (TestOpenAPI_DeparturesAreDocumented).
type departure struct {
	key, date, why string
	apply          func(doc *openapi3.T) error // nil: the description needs no edit
	// removed are operations ("GET /datacenters") today's API answers only
	// with 410 deprecated_api_endpoint: the scenario refuses them, never
	// succeeds.
	removed []string
}

// departures are the deliberate differences, each dated by Hetzner's changelog.
var departures = []departure{
	{
		key:  "servers have no `datacenter`",
		date: "2026-07-01",
		why: "Hetzner's changelog 2026-07-01 (removing-datacenters): the deprecated property was removed; " +
			"the description still lists it as required. hcloud-go v2.52.0 no longer reads it",
		apply: func(doc *openapi3.T) error { return dropDeprecatedProperty(doc, "/servers", "datacenter") },
	},
	{
		key:  "GET /datacenters answers 410 deprecated_api_endpoint",
		date: "2026-10-01",
		why: "Hetzner's changelog 2026-06-02 (datacenters-deprecated): GET /datacenters and /datacenters/{id} " +
			"answer 410 Gone after 1 October 2026; the description still describes them",
		removed: []string{"GET /datacenters", "GET /datacenters/{id}"},
	},
	{
		key:  "DELETE /load_balancers/{id} answers 201 with an action",
		date: "2026-10-05",
		why: "Hetzner's changelog 2026-10-05 (delete-load-balancer-returns-action): deleting a load balancer " +
			"is tracked with an action; hcloud-go v2.52.0 reads it (LoadBalancerClient.DeleteWithResult)",
		apply: func(doc *openapi3.T) error {
			del, err := operation(doc, "DELETE", "/load_balancers/{id}")
			if err != nil {
				return err
			}
			like, err := operation(doc, "POST", "/load_balancers/{id}/actions/change_algorithm")
			if err != nil {
				return err
			}
			del.Responses.Set("201", like.Responses.Value("201"))
			del.Responses.Delete("204")
			return nil
		},
	},
}

// dropDeprecatedProperty removes the deprecated property name from every
// schema of the responses of operations under pathPrefix, and from the
// schemas' required lists: today's API no longer sends it.
func dropDeprecatedProperty(doc *openapi3.T, pathPrefix, name string) error {
	dropped := 0
	walkSchemas(doc, pathPrefix, func(s *openapi3.Schema) {
		if p := s.Properties[name]; p != nil && p.Value != nil && p.Value.Deprecated {
			delete(s.Properties, name)
			s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
			dropped++
		}
	})
	if dropped == 0 {
		return fmt.Errorf("no deprecated %q under %s", name, pathPrefix)
	}
	return nil
}

// walkSchemas calls fn once for every schema of the request bodies and
// responses of the operations under pathPrefix, and for the schemas below
// them.
func walkSchemas(doc *openapi3.T, pathPrefix string, fn func(*openapi3.Schema)) {
	seen := map[*openapi3.Schema]bool{}
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, pathPrefix) {
			continue
		}
		for _, op := range item.Operations() {
			var contents []openapi3.Content
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				contents = append(contents, op.RequestBody.Value.Content)
			}
			for _, resp := range op.Responses.Map() {
				contents = append(contents, resp.Value.Content)
			}
			for _, c := range contents {
				for _, mt := range c {
					walkSchema(mt.Schema, fn, seen)
				}
			}
		}
	}
}

func walkSchema(ref *openapi3.SchemaRef, fn func(*openapi3.Schema), seen map[*openapi3.Schema]bool) {
	if ref == nil || ref.Value == nil || seen[ref.Value] {
		return
	}
	s := ref.Value
	seen[s] = true
	fn(s)
	for _, p := range s.Properties {
		walkSchema(p, fn, seen)
	}
	walkSchema(s.Items, fn, seen)
	if s.AdditionalProperties.Schema != nil {
		walkSchema(s.AdditionalProperties.Schema, fn, seen)
	}
	for _, list := range []openapi3.SchemaRefs{s.AllOf, s.AnyOf, s.OneOf} {
		for _, sub := range list {
			walkSchema(sub, fn, seen)
		}
	}
}

// dropDiscriminators removes the discriminators of oneOf schemas. The
// description is fully inlined, so a discriminator's mapping names
// components (#/components/schemas/ServiceTCP) that no oneOf branch refers
// to, and kin-openapi then matches no branch at all. Each branch pins the
// discriminating property with an enum (protocol "tcp", type "server"), so
// oneOf alone still picks exactly one.
func dropDiscriminators(doc *openapi3.T) {
	walkSchemas(doc, "/", func(s *openapi3.Schema) {
		if len(s.OneOf) > 0 {
			s.Discriminator = nil
		}
	})
}

// removedOperation reports whether a departure removed op.
func removedOperation(op string) bool {
	for _, d := range departures {
		if slices.Contains(d.removed, op) {
			return true
		}
	}
	return false
}

// operation returns the operation for method and path (as the description
// writes it) or an error naming it.
func operation(doc *openapi3.T, method, path string) (*openapi3.Operation, error) {
	item := doc.Paths.Value(path)
	if item == nil || item.GetOperation(method) == nil {
		return nil, fmt.Errorf("description: no operation %s %s", method, path)
	}
	return item.GetOperation(method), nil
}

// description is the loaded description with its router; loaded once per
// test binary (the file is 2.7 MB).
var description = sync.OnceValues(func() (*described, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile(descriptionFile)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", descriptionFile, err)
	}
	normalizeRangeCodes(doc)
	dropDiscriminators(doc)
	for _, d := range departures {
		if d.apply == nil {
			continue
		}
		if err := d.apply(doc); err != nil {
			return nil, fmt.Errorf("departure %q: %w", d.key, err)
		}
	}
	// The description's own examples do not all match its schemas (the load
	// balancer example of POST /load_balancers, for one); they are
	// documentation, so only the schemas are checked.
	router, err := legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
	if err != nil {
		return nil, fmt.Errorf("route %s: %w", descriptionFile, err)
	}
	return &described{doc: doc, router: router}, nil
})

// described is the description and a router finding its operations.
type described struct {
	doc    *openapi3.T
	router routers.Router
}

// loadDescription returns the description or fails the test.
func loadDescription(t *testing.T) *described {
	t.Helper()
	d, err := description()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// normalizeRangeCodes renames the description's "4xx" and "5xx" response
// keys to "4XX" and "5XX". OpenAPI 3.0.3 (§4.7.16.2) spells ranges with an
// upper-case X, and kin-openapi looks them up so; the responses themselves
// are unchanged.
func normalizeRangeCodes(doc *openapi3.T) {
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for code, resp := range op.Responses.Map() {
				if up := strings.ToUpper(code); up != code && strings.HasSuffix(up, "XX") {
					op.Responses.Delete(code)
					op.Responses.Set(up, resp)
				}
			}
		}
	}
}

func TestOpenAPI_DescriptionLoads(t *testing.T) {
	d := loadDescription(t)
	if n := d.doc.Paths.Len(); n < 100 {
		t.Errorf("description has %d paths, want Hetzner's full Cloud API (> 100)", n)
	}
}
