package plugins

import (
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// templates are the examples `plugin init` copies: each language's complete node_labels
// example, and the shared cases it passes (plugins/examples/cases).
//
//go:embed examples/labels-and-name/main.go
//go:embed examples/rust-labels/Cargo.toml examples/rust-labels/src/lib.rs examples/rust-labels/.cargo/config.toml examples/rust-labels/.gitignore examples/rust-labels/README.md
//go:embed examples/as-labels/package.json examples/as-labels/package-lock.json examples/as-labels/assembly/index.ts examples/as-labels/.gitignore examples/as-labels/README.md
//go:embed examples/cases
var templates embed.FS

// template is what `plugin init --lang` writes for one language.
type template struct {
	example string   // directory under examples/
	hooks   []string // the hooks its cases cover (subdirectories of examples/cases)
	extra   map[string]string
	next    string // the commands to run next, in the new directory
}

// goModTemplate is the go.mod of a new Go plugin: the SDK alone (docs/plugins.md, "The SDK module").
const goModTemplate = `module example.com/my-plugin

go 1.24

require github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk v0.1.0

// Until the SDK is published, vendor it (docs/plugins.md, "The SDK module"):
// replace github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk => ./third_party/ccm-sdk
`

var languages = map[string]template{
	"go": {
		example: "labels-and-name", hooks: []string{HookNodeLabels, HookLoadBalancerName},
		extra: map[string]string{"go.mod": goModTemplate},
		next: "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags=\"-s -w\" -gcflags=all=-l -o plugin.wasm .\n" +
			"hcloud-policy-ccm plugin test --module plugin.wasm testdata/cases",
	},
	"rust": {
		example: "rust-labels", hooks: []string{HookNodeLabels},
		next: "RUSTC=/usr/bin/rustc /usr/bin/cargo build --release --target wasm32-unknown-unknown\n" +
			"hcloud-policy-ccm plugin test --module target/wasm32-unknown-unknown/release/rust_labels.wasm testdata/cases",
	},
	"as": {
		example: "as-labels", hooks: []string{HookNodeLabels},
		next: "npm ci && npm run build\nhcloud-policy-ccm plugin test --module build/as-labels.wasm testdata/cases",
	},
}

// Languages returns the languages `plugin init` knows, sorted.
func Languages() []string {
	out := make([]string, 0, len(languages))
	for l := range languages {
		out = append(out, l)
	}
	slices.Sort(out)
	return out
}

// Init writes a new plugin project for lang ("go", "rust" or "as") into dir: the repository's
// complete node_labels example in that language (the Go one serves load_balancer_name too),
// and its cases under testdata/cases for `plugin test`. dir must not exist or be empty. It
// lists the files written and the commands to run next on w.
//
// # Errors
//
// An unknown language, a non-empty dir, or a write error.
func Init(lang, dir string, w io.Writer) error {
	t, ok := languages[lang]
	if !ok {
		return fmt.Errorf("plugin init: unknown language %q (known: %s)", lang, strings.Join(Languages(), ", "))
	}
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("plugin init: %s is not empty", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugin init: %w", err)
	}
	files, err := t.files()
	if err != nil {
		return fmt.Errorf("plugin init: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := writeFile(filepath.Join(dir, filepath.FromSlash(name)), files[name]); err != nil {
			return fmt.Errorf("plugin init: %w", err)
		}
		fmt.Fprintf(w, "wrote %s\n", filepath.Join(dir, filepath.FromSlash(name)))
	}
	fmt.Fprintf(w, "next, in %s:\n  %s\n", dir, strings.ReplaceAll(t.next, "\n", "\n  "))
	return nil
}

// files returns the project's files by slash path.
func (t template) files() (map[string][]byte, error) {
	files := map[string][]byte{}
	for name, content := range t.extra {
		files[name] = []byte(content)
	}
	add := func(root, under string) error {
		return fs.WalkDir(templates, root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := templates.ReadFile(p)
			if err != nil {
				return err
			}
			files[path.Join(under, strings.TrimPrefix(p, root+"/"))] = b
			return nil
		})
	}
	if err := add("examples/"+t.example, ""); err != nil {
		return nil, err
	}
	for _, h := range t.hooks {
		under := "testdata/cases"
		if len(t.hooks) > 1 {
			under += "/" + h
		}
		if err := add("examples/cases/"+h, under); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644) //nolint:gosec // source files of the author's own project
}
