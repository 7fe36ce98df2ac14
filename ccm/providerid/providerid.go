// Package providerid converts between Hetzner Cloud server IDs and Kubernetes provider IDs
// (node.spec.providerID).
package providerid

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Provider ID prefixes. They MUST not be changed, otherwise existing nodes will not be
// recognised anymore: the official CCM writes the same prefixes, and this CCM is a drop-in
// replacement for it.
const (
	// prefixCloud is the prefix of Hetzner Cloud servers: hcloud://<server-id>.
	prefixCloud = "hcloud://"
	// prefixRobot is the prefix of Robot dedicated servers: hrobot://<server-number>.
	prefixRobot = "hrobot://"
	// prefixRobotLegacy is the legacy Robot format of the Syself fork: hcloud://bm-<server-number>.
	prefixRobotLegacy = "hcloud://bm-"
)

// ErrUnsupported is wrapped by [ToServerID] for the Robot (dedicated server) formats, which
// this CCM recognises but does not support.
var ErrUnsupported = errors.New("robot (dedicated server) provider IDs are not supported by this CCM")

// Error is returned by [ToServerID] for a provider ID it cannot convert.
type Error struct {
	ProviderID string
	// Reason says what is wrong and what was expected.
	Reason string
	// Err is [ErrUnsupported] for a Robot provider ID, nil otherwise.
	Err error
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid provider ID %q: %s", e.ProviderID, e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// FromServerID returns the provider ID of the cloud server with the given ID: hcloud://<id>.
func FromServerID(id int64) string {
	return prefixCloud + strconv.FormatInt(id, 10)
}

// ToServerID returns the cloud server ID in a provider ID of the form hcloud://<id>, where id
// is a positive decimal integer.
//
// # Errors
//
// Every failure is an [*Error]. The Robot formats hrobot://<n> and hcloud://bm-<n> are
// recognised and wrap [ErrUnsupported], so callers can tell "not ours" from "malformed".
func ToServerID(providerID string) (int64, error) {
	var rest string
	switch {
	case strings.HasPrefix(providerID, prefixRobotLegacy), strings.HasPrefix(providerID, prefixRobot):
		return 0, &Error{ProviderID: providerID, Reason: "robot (dedicated server) nodes are not supported by this CCM", Err: ErrUnsupported}
	case strings.HasPrefix(providerID, prefixCloud):
		rest = strings.TrimPrefix(providerID, prefixCloud)
	default:
		return 0, &Error{ProviderID: providerID, Reason: "unknown prefix (expect hcloud://<server-id>)"}
	}
	if rest == "" {
		return 0, &Error{ProviderID: providerID, Reason: "missing server ID (expect hcloud://<server-id>)"}
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, &Error{ProviderID: providerID, Reason: "server ID is not a decimal number (expect hcloud://<server-id>)"}
		}
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || id <= 0 {
		return 0, &Error{ProviderID: providerID, Reason: "server ID out of range (expect a positive 64-bit integer)"}
	}
	return id, nil
}
