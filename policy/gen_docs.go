//go:build ignore

// gen_docs writes docs/reference/policy-input.md and docs/policy-input.schema.json from
// input.go. Run it with `go generate ./policy` from the module root.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/policy-ccm/hcloud-policy-ccm/policy/internal/gendoc"
)

func main() {
	src, err := os.ReadFile("input.go")
	if err != nil {
		log.Fatal(err)
	}
	md, schema, err := gendoc.Generate(src)
	if err != nil {
		log.Fatal(err)
	}
	for path, content := range map[string][]byte{gendoc.MarkdownPath: md, gendoc.SchemaPath: schema} {
		p := filepath.Join("..", path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
