package plugins

import (
	"context"
	"errors"
	"strings"
)

// Sentinel errors of plugin calls. Every error from NodeLabels and LoadBalancerName names the
// plugin, the hook and the reason, and wraps exactly one of these (context.Canceled when the
// caller's context was canceled), so callers can branch with errors.Is and count with Reason.
var (
	// ErrNotExported: the module does not export the hook.
	ErrNotExported = errors.New("hook not exported by the module")
	// ErrTimeout: the call did not finish within Options.CallTimeout or the caller's deadline.
	ErrTimeout = errors.New("deadline exceeded")
	// ErrTrap: the guest trapped (unreachable, out of memory, out-of-bounds access, exit...).
	ErrTrap = errors.New("guest trapped")
	// ErrABI: the guest broke ABI v1 (e.g. a pointer outside its memory).
	ErrABI = errors.New("abi violation")
	// ErrInvalidReply: the reply is too large, not the expected JSON, or fails validation.
	ErrInvalidReply = errors.New("invalid reply")
	// ErrPluginError: the plugin replied {"error": "..."}.
	ErrPluginError = errors.New("plugin returned an error")
	// ErrClosed: the plugin was closed.
	ErrClosed = errors.New("plugin closed")
)

// Reason returns a short stable name for the cause of a plugin call error, for metric labels
// and event reasons: "not_exported", "timeout", "trap", "abi", "invalid_reply", "plugin_error",
// "closed", "canceled", or "error" for anything else. It returns "" for a nil error.
//
// Here's an example:
//
//	labels, err := p.NodeLabels(ctx, in)
//	if err != nil { // already counted in hcloud_ccm_plugin_failures_total{hook}
//		klog.InfoS("plugin failed", "hook", plugins.HookNodeLabels, "reason", plugins.Reason(err))
//	}
func Reason(err error) string {
	reasons := []struct {
		err    error
		reason string
	}{
		{ErrNotExported, "not_exported"},
		{ErrTimeout, "timeout"},
		{ErrTrap, "trap"},
		{ErrABI, "abi"},
		{ErrInvalidReply, "invalid_reply"},
		{ErrPluginError, "plugin_error"},
		{ErrClosed, "closed"},
		{context.Canceled, "canceled"},
	}
	if err == nil {
		return ""
	}
	for _, r := range reasons {
		if errors.Is(err, r.err) {
			return r.reason
		}
	}
	return "error"
}

// joinErrors joins errs into one single-line error ("a; b"), or nil: errors here end up in log
// lines and events, where errors.Join's newlines split the message.
func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}
