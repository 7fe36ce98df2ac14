#!/usr/bin/env bash
# sync.sh copies the example policies into this directory, from which the chart renders the
# ConfigMap of policies when policy.configMap.files is empty.
#
# Why a copy: helm reads only files inside the chart (.Files), so the chart cannot read
# ../../../examples/policies. The test TestChartPoliciesInSync (test/e2e, part of `go test ./...`)
# fails, naming this script, when the copies drift from examples/policies.
#
# Copied: every examples/policies/*.rego except *_test.rego, and data.json / data.yaml if present.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/../../../examples/policies"

find "$here" -maxdepth 1 -type f \( -name '*.rego' -o -name 'data.json' -o -name 'data.yaml' \) -delete
n=0
for f in "$src"/*.rego "$src"/data.json "$src"/data.yaml; do
	[[ -f "$f" ]] || continue
	case "$f" in *_test.rego) continue ;; esac
	cp "$f" "$here/"
	n=$((n + 1))
done
echo "sync.sh: ${n} file(s) in deploy/chart/policies"
