package main

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeLayoutListsEveryPackage: every Go package of the module appears in README.md's
// § Layout table. A package at path P (slash-separated, from the module root) is listed when a
// row of the table
//   - has P as its folder (the first cell, `P` or `P/`), or
//   - names P in backticks anywhere in the row, or
//   - has a folder F that P is under and names the rest of P (P without "F/") in backticks,
//     as the `ccm/` row does with `config` for ccm/config.
//
// Packages are the directories with a non-test .go file; testdata and other modules (a folder
// with its own go.mod, such as plugins/sdk) are left out.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutRows(t, string(readme))
	pkgs := modulePackages(t, root)
	if len(pkgs) < 20 {
		t.Fatalf("found %d packages, want at least 20: is the walk broken?", len(pkgs))
	}
	for _, p := range pkgs {
		if !layoutLists(rows, p) {
			t.Errorf("README.md § Layout does not list the package %s", p)
		}
	}
}

// TestLayoutLists checks the rule of TestReadmeLayoutListsEveryPackage on a table without the
// real README, so a dropped row is known to fail.
func TestLayoutLists(t *testing.T) {
	rows := []layoutRow{
		{folder: "cmd/tool", text: "| `cmd/tool` | the tool |"},
		{folder: "ccm", text: "| `ccm/` | the provider: `config`, `lbplan` |"},
		{folder: "internal/x", text: "| `internal/x` | x, and `internal/y/z` |"},
	}
	tests := []struct {
		pkg  string
		want bool
	}{
		{"cmd/tool", true},
		{"ccm", true},
		{"ccm/config", true},
		{"ccm/lbplan", true},
		{"ccm/routes", false},   // under a folder row, but not named in it
		{"cmd/other", false},    // no row
		{"internal/y/z", true},  // named by full path in another row
		{"internal/x/y", false}, // under a row, rest not named
		{"cmd", false},          // a prefix of a folder is not listed
	}
	for _, tt := range tests {
		if got := layoutLists(rows, tt.pkg); got != tt.want {
			t.Errorf("layoutLists(%q) = %v, want %v", tt.pkg, got, tt.want)
		}
	}
}

// layoutRow is one row of README.md's layout table: its folder without the trailing slash, and
// the whole line.
type layoutRow struct {
	folder string
	text   string
}

// layoutRows returns the table rows of the README's "## Layout" section, failing the test if
// the section or its rows are missing.
func layoutRows(t *testing.T, readme string) []layoutRow {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal("README.md has no ## Layout section")
	}
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var rows []layoutRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a row, or the header or separator
		}
		folder := strings.Trim(strings.TrimSpace(cells[1]), "`")
		rows = append(rows, layoutRow{folder: strings.TrimSuffix(folder, "/"), text: line})
	}
	if len(rows) == 0 {
		t.Fatal("README.md § Layout has no table rows")
	}
	return rows
}

// layoutLists reports whether rows list the package at pkg, by the rule of
// TestReadmeLayoutListsEveryPackage.
func layoutLists(rows []layoutRow, pkg string) bool {
	for _, r := range rows {
		if r.folder == pkg || strings.Contains(r.text, "`"+pkg+"`") {
			return true
		}
		if rest, ok := strings.CutPrefix(pkg, r.folder+"/"); ok && strings.Contains(r.text, "`"+rest+"`") {
			return true
		}
	}
	return false
}

// modulePackages returns the slash-separated paths, from root, of the directories under root
// holding a non-test .go file, skipping testdata, hidden directories and nested modules.
func modulePackages(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	var pkgs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); rel != "." && !seen[rel] {
			seen[rel] = true
			pkgs = append(pkgs, path.Clean(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}
