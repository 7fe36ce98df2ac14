// Package constdoc reads documented string constants from Go source, for the generators of the
// reference pages (docs/reference/env.md, docs/reference/annotations.md). Each constant's doc
// comment is a description followed by trailer lines such as "Type: bool" and "Default: false";
// the generators (internal/gendoc of ccm/config and ccm/annotation) render them as Markdown
// tables, and their tests (TestGeneratedCurrent) regenerate and diff so the docs cannot drift
// from the code.
package constdoc

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
)

// Constant is one documented string constant.
type Constant struct {
	// Ident is the Go identifier, Value the string value.
	Ident, Value string
	// Text is the description without trailers, with the leading identifier (and "is")
	// dropped and the first letter capitalised: "LBType is the type" becomes "The type".
	Text string
	// Trailers holds the trailer lines by key ("Type" → "bool").
	Trailers map[string]string
}

// Parse returns the string constants of the Go file src (named file in errors), in source
// order, with their doc comments split at the trailer keys.
//
// # Errors
//
// A constant without one of the required trailers is an error naming it, so a new constant
// cannot be added undocumented; so is a file without any string constant.
func Parse(file string, src []byte, trailerKeys, required []string) ([]Constant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	var out []Constant
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.CONST {
			continue
		}
		for _, spec := range gen.Specs {
			vs := spec.(*ast.ValueSpec)
			doc := vs.Doc
			if doc == nil && !gen.Lparen.IsValid() {
				doc = gen.Doc // a lone "const X = ..." keeps its comment on the declaration
			}
			c, ok, err := constant(vs, doc, trailerKeys)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", fset.Position(spec.Pos()), err)
			}
			if !ok {
				continue
			}
			for _, k := range required {
				if c.Trailers[k] == "" {
					return nil, fmt.Errorf("%s: constant %s needs a %q trailer line", fset.Position(spec.Pos()), c.Ident, k+":")
				}
			}
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no documented string constants found", file)
	}
	return out, nil
}

// constant reads one value spec; ok is false for specs that are not a single string constant.
func constant(vs *ast.ValueSpec, doc *ast.CommentGroup, trailerKeys []string) (Constant, bool, error) {
	if len(vs.Names) != 1 || len(vs.Values) != 1 {
		return Constant{}, false, nil
	}
	lit, ok := vs.Values[0].(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return Constant{}, false, nil
	}
	value, err := strconv.Unquote(lit.Value)
	if err != nil {
		return Constant{}, false, err
	}
	c := Constant{Ident: vs.Names[0].Name, Value: value, Trailers: map[string]string{}}
	var text []string
	for _, line := range strings.Split(doc.Text(), "\n") {
		line = strings.TrimSpace(line)
		if key, val, ok := trailer(line, trailerKeys); ok {
			c.Trailers[key] = val
			continue
		}
		if line != "" {
			text = append(text, line)
		}
	}
	c.Text = description(c.Ident, strings.Join(text, " "))
	return c, true, nil
}

// trailer splits "Key: value" for one of keys.
func trailer(line string, keys []string) (key, value string, ok bool) {
	for _, k := range keys {
		if rest, found := strings.CutPrefix(line, k+":"); found {
			return k, strings.TrimSpace(rest), true
		}
	}
	return "", "", false
}

// description drops the identifier that starts a Go doc comment and capitalises the rest.
func description(ident, text string) string {
	text, found := strings.CutPrefix(text, ident+" ")
	if found {
		text = strings.TrimPrefix(text, "is ")
	}
	if text != "" {
		text = strings.ToUpper(text[:1]) + text[1:]
	}
	return text
}

// Cell escapes s for a Markdown table cell.
func Cell(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// Generate is the body of a page generator's main: it reads srcPath, renders it with render and
// writes the page to outPath. The error names the step and the file.
func Generate(srcPath, outPath string, render func(src []byte) ([]byte, error)) error {
	src, err := os.ReadFile(srcPath)
	if err != nil {
		return fmt.Errorf("read %s: %w", srcPath, err)
	}
	page, err := render(src)
	if err != nil {
		return fmt.Errorf("render %s: %w", srcPath, err)
	}
	if err := os.WriteFile(outPath, page, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", outPath, err)
	}
	return nil
}
