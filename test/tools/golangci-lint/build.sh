#!/usr/bin/env bash
# build.sh OUTDIR
#
# Builds the golangci-lint CLI (github.com/golangci/golangci-lint/v2, the version pinned in this
# directory's go.mod) from the Go module proxy into OUTDIR/golangci-lint, for `make lint`
# (.golangci.yml at the repository root).
#
# Like ../helm/build.sh, the build runs only when OUTDIR/golangci-lint is missing or OUTDIR/.stamp
# does not match (version, a hash of this script, go.mod and go.sum, and the Go version); a second
# call takes well under a second. A cold build takes a few minutes on 2 idle cores.
#
# Version ldflags are the ones golangci-lint's release build sets (main.version, main.commit,
# main.date), so that `golangci-lint version` names the pinned version instead of "(devel)".
#
# Environment: GOFLAGS is kept as it is; GOTOOLCHAIN defaults to local. Concurrent calls for the
# same OUTDIR wait for each other (flock).
set -euo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: $0 OUTDIR" >&2
	exit 2
fi

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module=github.com/golangci/golangci-lint/v2
version="$(awk -v m="$module" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")"
if [[ -z "$version" ]]; then
	echo "build.sh: cannot read the ${module} version from $here/go.mod" >&2
	exit 1
fi

mkdir -p "$1"
outdir="$(cd "$1" && pwd)"
srchash="$(cd "$here" && cat build.sh go.mod go.sum | sha256sum | cut -c1-16)"
stamp="version=${version} sources=${srchash} go=$(go env GOVERSION)"

up_to_date() {
	[[ -x "$outdir/golangci-lint" && -f "$outdir/.stamp" && "$(cat "$outdir/.stamp")" == "$stamp" ]]
}

if up_to_date; then
	echo "build.sh: ${outdir}/golangci-lint is up to date (${version})"
	exit 0
fi

exec 9>"$outdir/.lock"
flock 9
if up_to_date; then # another caller built it while we waited
	echo "build.sh: ${outdir}/golangci-lint is up to date (${version})"
	exit 0
fi

start=$(date +%s)
echo "build.sh: building golangci-lint ${version} into ${outdir}"
ldflags="-s -w"
ldflags+=" -X main.version=${version#v}"
ldflags+=" -X main.commit=${version}"
ldflags+=" -X main.date=module-proxy"

# Build into a temporary file, then move into place: an interrupted build never leaves a
# half-written binary that the stamp would bless.
tmpout="$(mktemp -d "$outdir/.build.XXXXXX")"
trap 'rm -rf "$tmpout"' EXIT
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$tmpout/golangci-lint" "${module}/cmd/golangci-lint")
mv -f "$tmpout/golangci-lint" "$outdir/golangci-lint"
echo "$stamp" >"$outdir/.stamp"

echo "build.sh: built golangci-lint ${version} in $(($(date +%s) - start))s"
"$outdir/golangci-lint" version
