#!/usr/bin/env bash
# build.sh OUTDIR
#
# Builds the helm CLI (helm.sh/helm/v3, the version pinned in this directory's go.mod) from the Go
# module proxy into OUTDIR/helm, for the chart checks of deploy/chart (`make chart-test`) and the
# e2e test that installs the rendered chart.
#
# Like ../build.sh, the build runs only when OUTDIR/helm is missing or OUTDIR/.stamp does not
# match (version, a hash of this script, go.mod and go.sum, and the Go version); a second call
# takes well under a second. A cold build took 24 minutes on a 2-core machine shared with other
# builds (load average about 20); expect a few minutes on idle cores.
#
# Version ldflags are the ones helm's own Makefile sets: the helm version (`helm version`), and
# the Kubernetes version that `helm template` and `helm lint` assume (.Capabilities.KubeVersion),
# taken from the k8s.io/client-go version helm is built with.
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
version="$(awk '$1 == "helm.sh/helm/v3" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")"
clientgo="$(awk '$1 == "k8s.io/client-go" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")"
if [[ -z "$version" || ! "$clientgo" =~ ^v0\.([0-9]+)\.[0-9]+$ ]]; then
	echo "build.sh: cannot read the helm.sh/helm/v3 and k8s.io/client-go versions from $here/go.mod" >&2
	exit 1
fi
kubeminor="${BASH_REMATCH[1]}"

mkdir -p "$1"
outdir="$(cd "$1" && pwd)"
srchash="$(cd "$here" && cat build.sh go.mod go.sum | sha256sum | cut -c1-16)"
stamp="version=${version} sources=${srchash} go=$(go env GOVERSION)"

up_to_date() {
	[[ -x "$outdir/helm" && -f "$outdir/.stamp" && "$(cat "$outdir/.stamp")" == "$stamp" ]]
}

if up_to_date; then
	echo "build.sh: ${outdir}/helm is up to date (${version})"
	exit 0
fi

exec 9>"$outdir/.lock"
flock 9
if up_to_date; then # another caller built it while we waited
	echo "build.sh: ${outdir}/helm is up to date (${version})"
	exit 0
fi

start=$(date +%s)
echo "build.sh: building helm ${version} into ${outdir}"
ldflags="-s -w"
ldflags+=" -X helm.sh/helm/v3/internal/version.version=${version}"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
	ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${kubeminor}"
done

# Build into a temporary file, then move into place: an interrupted build never leaves a
# half-written binary that the stamp would bless.
tmpout="$(mktemp -d "$outdir/.build.XXXXXX")"
trap 'rm -rf "$tmpout"' EXIT
(cd "$here" && go build -trimpath -ldflags "$ldflags" -o "$tmpout/helm" helm.sh/helm/v3/cmd/helm)
mv -f "$tmpout/helm" "$outdir/helm"
echo "$stamp" >"$outdir/.stamp"

echo "build.sh: built helm ${version} in $(($(date +%s) - start))s"
"$outdir/helm" version --short
