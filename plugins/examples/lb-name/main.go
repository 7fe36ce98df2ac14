// Command lb-name is an example load_balancer_name plugin.
//
// It names a load balancer "<cluster>-<namespace>-<service>-<hash>": the parts lowercased,
// every run of characters outside a-z and 0-9 replaced by one '-', the prefix cut so the whole
// name fits 63 characters, and <hash> the first 8 hex digits of the SHA-256 of the Service UID,
// so two Services whose cut names collide still get different names. An empty cluster name is
// left out.
//
// Build it with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags="-s -w" -o lb-name.wasm .
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"

	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk"
	"github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk/lbname"
)

// MaxLen is the longest name the host accepts.
const MaxLen = 63

func init() { lbname.Handle(Name) }

// Name computes the load balancer name for in.
func Name(in sdk.LoadBalancerNameInput) (string, error) {
	if in.Service.UID == "" {
		return "", errors.New("service has no uid")
	}
	sum := sha256.Sum256([]byte(in.Service.UID))
	hash := hex.EncodeToString(sum[:4])
	base := sanitize(strings.Join(nonEmpty(in.ClusterName, in.Service.Namespace, in.Service.Name), "-"))
	if len(base) > MaxLen-1-len(hash) {
		base = strings.TrimRight(base[:MaxLen-1-len(hash)], "-")
	}
	if base == "" {
		return hash, nil
	}
	return base + "-" + hash, nil
}

func nonEmpty(parts ...string) []string {
	var out []string
	for _, p := range parts {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}

// sanitize lowercases s, turns each run of other characters into one '-' and trims '-'.
func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

func main() {}
