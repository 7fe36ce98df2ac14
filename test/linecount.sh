#!/usr/bin/env bash
# linecount.sh [REV]
#
# Prints a Markdown table of the lines of production and test code per top-level directory, of
# the tracked files in the work tree, or at the commit REV (read from git, nothing checked out).
#
# Code is Go, Rego, shell, and the Helm chart's templates (deploy/chart/templates). Test code is
# *_test.go, *_test.rego, and every code file under test/ or a testdata/ directory. Lines are
# physical lines (comments and blank lines included, as wc -l counts them). Data (JSON, YAML
# fixtures and golden files, .wat/.wasm), docs and generated manifests are not counted.
set -euo pipefail

cd "$(git rev-parse --show-toplevel)"
rev=()
if [[ $# -gt 0 ]]; then
	git rev-parse --verify --quiet "$1^{commit}" >/dev/null || {
		echo "linecount.sh: $1 is not a commit (usage: test/linecount.sh [REV])" >&2
		exit 2
	}
	rev=("$1")
fi

# git grep -c '' prints one "[REV:]path:lines" per non-empty file.
git grep -c '' "${rev[@]}" -- '*.go' '*.rego' '*.sh' 'deploy/chart/templates/*' |
	awk -v rev="${rev[0]:-}" '
	BEGIN {
		n = split("cmd ccm policy plugins internal test deploy examples", order, " ")
	}
	{
		line = $0
		if (rev != "") line = substr(line, length(rev) + 2)
		i = match(line, /:[0-9]+$/)
		path = substr(line, 1, i - 1)
		lines = substr(line, i + 1) + 0
		top = path
		sub(/\/.*/, "", top)
		if (path !~ /\//) top = "."
		kind = "prod"
		if (path ~ /_test\.(go|rego)$/ || top == "test" || path ~ /(^|\/)testdata\//) kind = "test"
		count[top, kind] += lines
		total[kind] += lines
		seen[top] = 1
	}
	END {
		print "| directory | production | test |"
		print "|---|---:|---:|"
		for (k = 1; k <= n; k++) {
			d = order[k]
			printf "| `%s` | %d | %d |\n", d, count[d, "prod"], count[d, "test"]
			delete seen[d]
		}
		for (d in seen) printf "| `%s` | %d | %d |\n", d, count[d, "prod"], count[d, "test"]
		printf "| **total** | **%d** | **%d** |\n", total["prod"], total["test"]
	}'
