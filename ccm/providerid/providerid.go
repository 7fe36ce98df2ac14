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

// ErrUnsupported is wrapped by [ToServerID] for the Robot (dedicated server) formats: they are
// valid provider IDs, but not of a cloud server. Use [ToRobotServerNumber] for them.
var ErrUnsupported = errors.New("a robot (dedicated server) provider ID, not a cloud server's")

// Error is returned by [ToServerID] for a provider ID it cannot convert.
type Error struct {
	ProviderID string
	// Reason says what is wrong and what was expected.
	Reason string
	// Err is [ErrUnsupported] for a Robot provider ID given to [ToServerID], nil otherwise.
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
// recognised and wrap [ErrUnsupported], so callers can tell "a Robot node" from "malformed"
// (and then call [ToRobotServerNumber]).
func ToServerID(providerID string) (int64, error) {
	var rest string
	switch {
	case strings.HasPrefix(providerID, prefixRobotLegacy), strings.HasPrefix(providerID, prefixRobot):
		return 0, &Error{ProviderID: providerID, Reason: "a robot (dedicated server) provider ID, not a cloud server's (expect hcloud://<server-id>)", Err: ErrUnsupported}
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

// FromRobotServerNumber returns the provider ID of the Robot server with the given number:
// hrobot://<n>. The legacy form hcloud://bm-<n> is never written.
func FromRobotServerNumber(n int) string {
	return prefixRobot + strconv.Itoa(n)
}

// IsRobot reports whether providerID has a Robot prefix (hrobot:// or hcloud://bm-), valid or
// not.
func IsRobot(providerID string) bool {
	return strings.HasPrefix(providerID, prefixRobot) || strings.HasPrefix(providerID, prefixRobotLegacy)
}

// ToRobotServerNumber returns the Robot server number in hrobot://<n> or the legacy
// hcloud://bm-<n>, where n is a positive decimal integer.
//
// # Errors
//
// Every failure is an [*Error]; a cloud provider ID is one too ("not a robot provider ID").
func ToRobotServerNumber(providerID string) (int, error) {
	var rest string
	switch {
	case strings.HasPrefix(providerID, prefixRobotLegacy):
		rest = strings.TrimPrefix(providerID, prefixRobotLegacy)
	case strings.HasPrefix(providerID, prefixRobot):
		rest = strings.TrimPrefix(providerID, prefixRobot)
	default:
		return 0, &Error{ProviderID: providerID, Reason: "not a robot provider ID (expect hrobot://<server-number>)"}
	}
	if rest == "" || strings.TrimLeft(rest, "0123456789") != "" {
		return 0, &Error{ProviderID: providerID, Reason: "server number is not a decimal number (expect hrobot://<server-number>)"}
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n <= 0 {
		return 0, &Error{ProviderID: providerID, Reason: "server number out of range (expect a positive 32-bit integer)"}
	}
	return int(n), nil
}
