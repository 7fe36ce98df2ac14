package ciplan

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Source names where a manifest document came from: its file ("-" for standard input), its
// index in that file (0-based) and the line its document starts on (1-based).
type Source struct {
	File  string `json:"file"`
	Index int    `json:"document"`
	Line  int    `json:"line"`
}

// String is "file:line (document N)", the form every input error uses.
func (s Source) String() string { return fmt.Sprintf("%s:%d (document %d)", s.File, s.Line, s.Index) }

// Manifest is one Service read from the input, with where it came from.
type Manifest struct {
	Source  Source
	Service *corev1.Service
}

// Manifests are the Services and the namespace labels of one input.
type Manifests struct {
	Services []Manifest
	// Namespaces maps a Namespace manifest's name to its labels (nil labels are stored as an
	// empty map, so presence means "declared").
	Namespaces map[string]map[string]string
	// Problems are the documents that could not be read, each naming its Source.
	Problems []error
}

// ReadManifests reads every path: a file, a directory (its .yaml, .yml and .json files,
// recursively, in lexical order) or "-" for stdin. Documents of other kinds than Service and
// Namespace are skipped. A document that is not YAML, or a Service or Namespace that does not
// decode strictly, is a Problem naming its file and line; the other documents are still read.
// The error is for paths that cannot be read at all.
func ReadManifests(paths []string, stdin io.Reader) (Manifests, error) {
	m := Manifests{Namespaces: map[string]map[string]string{}}
	for _, p := range paths {
		if p == "-" {
			data, err := io.ReadAll(stdin)
			if err != nil {
				return m, fmt.Errorf("read manifests from stdin: %w", err)
			}
			m.add("-", data)
			continue
		}
		files, err := manifestFiles(p)
		if err != nil {
			return m, err
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return m, fmt.Errorf("read manifests: %w", err)
			}
			m.add(f, data)
		}
	}
	return m, nil
}

// manifestFiles is p itself when p is a file, else the manifest files under p.
func manifestFiles(p string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read manifests: %w", err)
	}
	if !st.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				out = append(out, path)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read manifests in %s: %w", p, err)
	}
	slices.Sort(out)
	return out, nil
}

// document is one YAML document of a file and the line it starts on.
type document struct {
	line int
	data []byte
}

// splitDocuments splits a multi-document YAML stream on "---" lines.
func splitDocuments(data []byte) []document {
	var docs []document
	cur := document{line: 1}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.HasPrefix(line, "---") && strings.TrimSpace(strings.TrimPrefix(line, "---")) == "" {
			docs = append(docs, cur)
			cur = document{line: n + 1}
			continue
		}
		cur.data = append(append(cur.data, line...), '\n')
	}
	return append(docs, cur)
}

// typeMeta is what identifies a document's kind.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

func (m *Manifests) add(file string, data []byte) {
	index := 0
	for _, doc := range splitDocuments(data) {
		if len(bytes.TrimSpace(stripComments(doc.data))) == 0 {
			continue // an empty document (a leading ---) is no document
		}
		src := Source{File: file, Index: index, Line: doc.line}
		index++
		var tm typeMeta
		if err := yaml.Unmarshal(doc.data, &tm); err != nil {
			m.Problems = append(m.Problems, fmt.Errorf("%s: not a Kubernetes manifest: %w", src, err))
			continue
		}
		if tm.APIVersion != "v1" {
			continue
		}
		switch tm.Kind {
		case "Service":
			var svc corev1.Service
			if err := yaml.UnmarshalStrict(doc.data, &svc); err != nil {
				m.Problems = append(m.Problems, fmt.Errorf("%s: Service: %w", src, err))
				continue
			}
			if svc.Namespace == "" {
				svc.Namespace = "default"
			}
			if svc.Name == "" {
				m.Problems = append(m.Problems, fmt.Errorf("%s: Service has no metadata.name", src))
				continue
			}
			m.Services = append(m.Services, Manifest{Source: src, Service: &svc})
		case "Namespace":
			var ns corev1.Namespace
			if err := yaml.UnmarshalStrict(doc.data, &ns); err != nil {
				m.Problems = append(m.Problems, fmt.Errorf("%s: Namespace: %w", src, err))
				continue
			}
			labels := ns.Labels
			if labels == nil {
				labels = map[string]string{}
			}
			m.Namespaces[ns.Name] = labels
		}
	}
}

// stripComments drops the comment lines of a document (to tell an empty document).
func stripComments(data []byte) []byte {
	var out []byte
	for _, l := range bytes.Split(data, []byte("\n")) {
		if t := bytes.TrimSpace(l); len(t) > 0 && t[0] != '#' {
			out = append(append(out, l...), '\n')
		}
	}
	return out
}

// ReadEnvFile reads KEY=VALUE lines (blank lines and # comments skipped; an optional "export "
// prefix and one pair of surrounding quotes are removed). A line without "=" is an error
// naming the file and line.
func ReadEnvFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read env file: %w", err)
	}
	env := map[string]string{}
	var errs []error
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || strings.TrimSpace(k) == "" {
			errs = append(errs, fmt.Errorf("%s:%d: want KEY=VALUE, got %q", path, i+1, line))
			continue
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[strings.TrimSpace(k)] = v
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("read env file: %w", errors.Join(errs...))
	}
	return env, nil
}
