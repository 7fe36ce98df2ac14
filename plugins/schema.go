package plugins

import (
	"embed"
	"fmt"
)

// schemas holds the JSON Schema (draft 2020-12) of each hook's request and reply, for plugin
// authors in every language: schema/HOOK.request.schema.json and schema/HOOK.reply.schema.json.
// schema_test.go checks them against the Go types of hooks.go, field for field.
//
//go:embed schema/*.schema.json
var schemas embed.FS

// Schema returns the JSON Schema of the request (reply false) or the reply (reply true) of
// hook, as committed in plugins/schema/.
//
// # Errors
//
// An unknown hook.
func Schema(hook string, reply bool) ([]byte, error) {
	if _, ok := hookExports[hook]; !ok {
		return nil, fmt.Errorf("schema: unknown hook %q (known: %s, %s)", hook, HookNodeLabels, HookLoadBalancerName)
	}
	return schemas.ReadFile(schemaPath(hook, reply))
}

func schemaPath(hook string, reply bool) string {
	kind := "request"
	if reply {
		kind = "reply"
	}
	return "schema/" + hook + "." + kind + ".schema.json"
}
