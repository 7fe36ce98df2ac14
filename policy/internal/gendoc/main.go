// Command gendoc writes docs/reference/policy-input.md and docs/policy-input.schema.json from
// policy/input.go (package policy/internal/inputdoc). `go generate ./...` (make generate) runs it
// from policy; TestGeneratedCurrent in policy fails while a committed file differs.
package main

import (
	"log"
	"os"
	"path/filepath"

	"github.com/policy-ccm/hcloud-policy-ccm/policy/internal/inputdoc"
)

func main() {
	src, err := os.ReadFile("input.go")
	if err != nil {
		log.Fatalf("gendoc: %v", err)
	}
	md, schema, err := inputdoc.Generate(src)
	if err != nil {
		log.Fatalf("gendoc: %v", err)
	}
	for path, content := range map[string][]byte{inputdoc.MarkdownPath: md, inputdoc.SchemaPath: schema} {
		p := filepath.Join("..", path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			log.Fatalf("gendoc: %v", err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			log.Fatalf("gendoc: %v", err)
		}
	}
}
