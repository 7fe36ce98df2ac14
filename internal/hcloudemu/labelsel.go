package hcloudemu

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Selector is a parsed Hetzner label selector: a conjunction of requirements.
//
// The grammar is the one documented for the Hetzner Cloud API (and shared with
// Kubernetes): requirements separated by commas, each one of
//
//	k=v  k==v  k!=v  k  !k  k in (v1,v2)  k notin (v1,v2)
//
// The empty selector matches everything.
type Selector []Requirement

// Requirement is one term of a Selector.
type Requirement struct {
	Key    string
	Op     string // one of "=", "!=", "exists", "!", "in", "notin"
	Values []string
}

var (
	labelKeyRe   = regexp.MustCompile(`^([a-z0-9A-Z]((?:[\-_.]|[a-z0-9A-Z]){0,251}[a-z0-9A-Z])?/)?[a-z0-9A-Z]((?:[\-_.]|[a-z0-9A-Z]){0,61}[a-z0-9A-Z])?$`)
	labelValueRe = regexp.MustCompile(`^(([a-z0-9A-Z](?:[\-_.]|[a-z0-9A-Z]){0,61})?[a-z0-9A-Z])?$`)
)

// ParseSelector parses a label selector.
//
// # Errors
//
// A selector that does not follow the grammar, or that names an invalid label
// key or value, returns an error describing the first problem.
func ParseSelector(s string) (Selector, error) {
	toks, err := lexSelector(s)
	if err != nil {
		return nil, err
	}
	p := &selParser{toks: toks}
	sel := Selector{}
	if p.peek() == "" {
		return sel, nil
	}
	for {
		req, err := p.requirement()
		if err != nil {
			return nil, err
		}
		sel = append(sel, req)
		switch p.next() {
		case "":
			return sel, nil
		case ",":
			continue
		default:
			return nil, fmt.Errorf("parse label selector %q: expected ',' after requirement on %q", s, req.Key)
		}
	}
}

// Matches reports whether labels satisfy every requirement.
func (s Selector) Matches(labels map[string]string) bool {
	for _, r := range s {
		v, ok := labels[r.Key]
		switch r.Op {
		case "=":
			if !ok || v != r.Values[0] {
				return false
			}
		case "!=":
			if ok && v == r.Values[0] {
				return false
			}
		case "exists":
			if !ok {
				return false
			}
		case "!":
			if ok {
				return false
			}
		case "in":
			if !ok || !slices.Contains(r.Values, v) {
				return false
			}
		case "notin":
			if ok && slices.Contains(r.Values, v) {
				return false
			}
		}
	}
	return true
}

// String renders the selector in canonical form; ParseSelector(s.String())
// yields an equal selector.
func (s Selector) String() string {
	parts := make([]string, 0, len(s))
	for _, r := range s {
		switch r.Op {
		case "exists":
			parts = append(parts, r.Key)
		case "!":
			parts = append(parts, "!"+r.Key)
		case "in", "notin":
			parts = append(parts, r.Key+" "+r.Op+" ("+strings.Join(r.Values, ",")+")")
		default:
			parts = append(parts, r.Key+r.Op+r.Values[0])
		}
	}
	return strings.Join(parts, ",")
}

// lexSelector splits a selector into tokens: words and the operators
// "=", "==", "!=", "!", "(", ")", ",".
func lexSelector(s string) ([]string, error) {
	var toks []string
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '=' && i+1 < len(s) && s[i+1] == '=':
			toks = append(toks, "==")
			i += 2
		case c == '!' && i+1 < len(s) && s[i+1] == '=':
			toks = append(toks, "!=")
			i += 2
		case strings.IndexByte("=!(),", c) >= 0:
			toks = append(toks, string(c))
			i++
		default:
			j := i
			for j < len(s) && strings.IndexByte(" \t=!(),", s[j]) < 0 {
				j++
			}
			toks = append(toks, s[i:j])
			i = j
		}
	}
	return toks, nil
}

type selParser struct {
	toks []string
	pos  int
}

func (p *selParser) peek() string {
	if p.pos >= len(p.toks) {
		return ""
	}
	return p.toks[p.pos]
}

func (p *selParser) next() string {
	t := p.peek()
	p.pos++
	return t
}

func isWord(t string) bool {
	return t != "" && strings.IndexByte("=!(),", t[0]) < 0
}

func (p *selParser) key() (string, error) {
	k := p.next()
	if !isWord(k) {
		return "", fmt.Errorf("parse label selector: expected a label key, found %q", k)
	}
	if !labelKeyRe.MatchString(k) {
		return "", fmt.Errorf("parse label selector: invalid label key %q", k)
	}
	return k, nil
}

func (p *selParser) value() (string, error) {
	if !isWord(p.peek()) {
		// An empty value ("k=" or "k in ()" members) is allowed.
		return "", nil
	}
	v := p.next()
	if !labelValueRe.MatchString(v) {
		return "", fmt.Errorf("parse label selector: invalid label value %q", v)
	}
	return v, nil
}

func (p *selParser) requirement() (Requirement, error) {
	if p.peek() == "!" {
		p.next()
		k, err := p.key()
		if err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: k, Op: "!"}, nil
	}
	k, err := p.key()
	if err != nil {
		return Requirement{}, err
	}
	switch op := p.peek(); op {
	case "", ",":
		return Requirement{Key: k, Op: "exists"}, nil
	case "=", "==", "!=":
		p.next()
		v, err := p.value()
		if err != nil {
			return Requirement{}, err
		}
		if op == "==" {
			op = "="
		}
		return Requirement{Key: k, Op: op, Values: []string{v}}, nil
	case "in", "notin":
		p.next()
		vals, err := p.valueSet()
		if err != nil {
			return Requirement{}, err
		}
		return Requirement{Key: k, Op: op, Values: vals}, nil
	default:
		return Requirement{}, fmt.Errorf("parse label selector: unexpected %q after key %q", op, k)
	}
}

var errValueSet = errors.New("parse label selector: expected '(' value {',' value} ')'")

func (p *selParser) valueSet() ([]string, error) {
	if p.next() != "(" {
		return nil, errValueSet
	}
	var vals []string
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		vals = append(vals, v)
		switch p.next() {
		case ",":
			continue
		case ")":
			return vals, nil
		default:
			return nil, errValueSet
		}
	}
}
