// Command genmanifests writes the manifests of deploy/ rendered from the Helm chart
// (deploy.Manifests). It runs through `go generate ./...` (make generate), from test/deploy.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/policy-ccm/hcloud-policy-ccm/test/deploy"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "genmanifests:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	root, err := deploy.Root(".")
	if err != nil {
		return err
	}
	helm, err := deploy.HelmBin(root)
	if err != nil {
		return err
	}
	files, err := deploy.Render(ctx, helm, root)
	if err != nil {
		return err
	}
	for _, m := range deploy.Manifests {
		path := filepath.Join(root, m.Path)
		if err := os.WriteFile(path, files[m.Path], 0o644); err != nil {
			return fmt.Errorf("write %s: %w", m.Path, err)
		}
	}
	return nil
}
