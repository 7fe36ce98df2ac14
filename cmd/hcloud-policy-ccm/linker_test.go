//go:build dce

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkerDeadCodeElimination links this binary with the linker's dependency dump (-dumpdep) and
// fails if a function flagged <ReflectMethod> is reachable. Such a function (one that calls
// reflect.Value.Method or MethodByName with a name known only at run time, as text/template
// does) makes the linker keep every exported method of every type that can reach an interface:
// a third of the binary's text and of its resident memory here (docs/performance.md § Memory).
//
// The build uses the environment's GOFLAGS, so it checks the binary `make build` makes (the
// Makefile exports GOFLAGS=-tags=grpcnotrace). Run it with `make dce-check`; it takes a full link
// of the CCM (about a minute) and is behind the dce build tag to stay out of `make unit`.
func TestLinkerDeadCodeElimination(t *testing.T) {
	out := filepath.Join(t.TempDir(), "hcloud-policy-ccm")
	cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", out, ".")
	var stdout, dump bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &dump
	if err := cmd.Run(); err != nil {
		t.Fatalf("go build -ldflags=-dumpdep (GOFLAGS=%q): %v\n%s%s", os.Getenv("GOFLAGS"), err, stdout.String(), tail(dump.String(), 4000))
	}
	parents, reflectMethods := parseDumpdep(&dump)
	if len(parents) == 0 {
		t.Fatalf("go build -ldflags=-dumpdep printed no dependency edges; the dump format may have changed:\n%s", tail(dump.String(), 2000))
	}
	if len(reflectMethods) == 0 {
		return
	}
	// The first one marked is a cause; most of the others are reached only because it kept every
	// exported method, so fixing it and running again is the way through several.
	sym := reflectMethods[0]
	t.Fatalf("%s is reachable and calls reflect's Method/MethodByName, which turns off the linker's "+
		"dead-code elimination of methods (the binary and its RSS grow by about a third); "+
		"%d more such functions are reached, most of them only because of this one.\n"+
		"Call path from the root:\n  %s\n"+
		"Fix: cut that import (for golang.org/x/net/trace from google.golang.org/grpc, build with "+
		"-tags grpcnotrace as the Makefile's GOFLAGS does; GOFLAGS here is %q).",
		sym, len(reflectMethods)-1, strings.Join(pathFromRoot(parents, sym), "\n  -> "), os.Getenv("GOFLAGS"))
}

// parseDumpdep reads the linker's -dumpdep output ("from -> to" per marked symbol, flags such as
// <ReflectMethod> after the name) and returns, for each symbol, the symbol that marked it first,
// and the symbols flagged <ReflectMethod>, in the order they were marked.
func parseDumpdep(dump *bytes.Buffer) (parents map[string]string, reflectMethods []string) {
	parents = map[string]string{}
	seen := map[string]bool{}
	sc := bufio.NewScanner(dump)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		toName, toFlags := splitFlags(to)
		fromName, _ := splitFlags(from)
		if _, marked := parents[toName]; !marked {
			parents[toName] = fromName
		}
		if strings.Contains(toFlags, "<ReflectMethod>") && !seen[toName] {
			seen[toName] = true
			reflectMethods = append(reflectMethods, toName)
		}
	}
	return parents, reflectMethods
}

// splitFlags splits "name <Flag><Flag>" into the name and its flags.
func splitFlags(s string) (name, flags string) {
	if i := strings.Index(s, " <"); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// pathFromRoot follows parents from sym back to a symbol nothing marked (a root such as
// main.main or runtime.main) and returns the path root first.
func pathFromRoot(parents map[string]string, sym string) []string {
	path := []string{sym}
	seen := map[string]bool{sym: true}
	for p, ok := parents[sym]; ok && !seen[p]; p, ok = parents[p] {
		seen[p] = true
		path = append(path, p)
	}
	for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
		path[i], path[j] = path[j], path[i]
	}
	return path
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
