#!/usr/bin/env bash
# build.sh OUTDIR [K8S_VERSION]
#
# Builds kube-apiserver, etcd and kubectl from the Go module proxy into OUTDIR, for the
# end-to-end tests (test/e2e). K8S_VERSION defaults to the k8s.io/kubernetes version pinned in
# this directory's go.mod (v1.37.2).
#
# The build runs only when a binary is missing or OUTDIR/.stamp does not match: the stamp holds
# the version and a hash of the sources that decide the build (this script, go.mod, go.sum and
# the three mains), so editing any of them rebuilds, and a second call is a no-op that takes
# well under a second. A cold build takes about 8-10 minutes on 2 cores; the Go build cache makes
# a rebuild after a small change much faster.
#
# Versions:
#   - the version pinned in go.mod builds right here, with the committed go.mod and go.sum;
#   - any other version (v1.35.x, v1.36.x, ...) builds in a temporary copy of this module whose
#     go.mod is generated from that version's own k8s.io/kubernetes go.mod: every staging module
#     of its replace block is replaced by the published v0.X.Y, and etcd's server module is
#     required at the version kubernetes itself uses. `go mod tidy` then resolves the rest.
#     kubectl's main is that version's own cmd/kubectl/kubectl.go (cmd/kubectl/main.go follows
#     the pinned version: v1.35 added cmd.GetLogVerbosity, which v1.33 and v1.34 lack).
#
# Version ldflags are set for both k8s.io/component-base/version and k8s.io/client-go/pkg/version
# (clients parse the server's gitVersion). The module proxy does not say which git commit a
# version was cut from, so gitCommit is 40 zeros; buildDate is the version's publication time
# from the proxy, which keeps the build reproducible.
#
# Environment: GOFLAGS is kept as it is (it may hold -buildvcs=false); GOTOOLCHAIN defaults to
# local. Concurrent calls for the same OUTDIR wait for each other (flock).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
	echo "usage: $0 OUTDIR [K8S_VERSION]" >&2
	exit 2
fi

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
outdir="$1"
pinned="$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")"
version="${2:-$pinned}"
binaries=(kube-apiserver etcd kubectl)

if [[ ! "$version" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]]; then
	echo "build.sh: K8S_VERSION must look like v1.37.2, got ${version}" >&2
	exit 2
fi
minor="${BASH_REMATCH[1]}"
staging="v0.${minor}.${BASH_REMATCH[2]}"

mkdir -p "$outdir"
outdir="$(cd "$outdir" && pwd)"

# The stamp: version plus a hash of everything that decides the build.
srchash="$(cd "$here" && cat build.sh go.mod go.sum cmd/*/main.go | sha256sum | cut -c1-16)"
stamp="version=${version} sources=${srchash} go=$(go env GOVERSION)"

up_to_date() {
	local b
	for b in "${binaries[@]}"; do
		[[ -x "$outdir/$b" ]] || return 1
	done
	[[ -f "$outdir/.stamp" && "$(cat "$outdir/.stamp")" == "$stamp" ]]
}

if up_to_date; then
	echo "build.sh: ${outdir} is up to date (${version})"
	exit 0
fi

exec 9>"$outdir/.lock"
flock 9
if up_to_date; then # another caller built it while we waited
	echo "build.sh: ${outdir} is up to date (${version})"
	exit 0
fi

start=$(date +%s)
echo "build.sh: building kube-apiserver, etcd and kubectl ${version} into ${outdir}"

# Where to build: here for the pinned version, a generated module otherwise.
cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT
moddir="$here"
if [[ "$version" != "$pinned" ]]; then
	moddir="$(mktemp -d)"
	cleanup+=("$moddir")
	cp -r "$here/cmd" "$moddir/"
	k8smod="$(cd "$moddir" && go mod download -json "k8s.io/kubernetes@${version}" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
	if [[ -z "$k8smod" || ! -f "$k8smod" ]]; then
		echo "build.sh: cannot download k8s.io/kubernetes@${version} from the module proxy" >&2
		exit 1
	fi
	etcdver="$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$k8smod")"
	if [[ -z "$etcdver" ]]; then
		etcdver="$(awk '$1 == "go.etcd.io/etcd/client/v3" { print $2; exit }' "$k8smod")"
	fi
	{
		echo "module github.com/policy-ccm/hcloud-policy-ccm/test/tools"
		echo
		echo "go $(go env GOVERSION | sed 's/^go//; s/^\([0-9]*\.[0-9]*\).*/\1.0/')"
		echo
		echo "require ("
		echo "	go.etcd.io/etcd/server/v3 ${etcdver}"
		echo "	k8s.io/kubernetes ${version}"
		echo ")"
		echo
		echo "replace ("
		# Every "k8s.io/x => ./staging/src/k8s.io/x" line of kubernetes' replace block.
		sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\) => \./staging/.*$|	\1 => \1 '"${staging}"'|p' "$k8smod"
		echo ")"
	} >"$moddir/go.mod"
	k8sdir="$(cd "$moddir" && go mod download -json "k8s.io/kubernetes@${version}" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
	if [[ ! -f "$k8sdir/cmd/kubectl/kubectl.go" ]]; then
		echo "build.sh: k8s.io/kubernetes@${version} has no cmd/kubectl/kubectl.go" >&2
		exit 1
	fi
	install -m 0644 "$k8sdir/cmd/kubectl/kubectl.go" "$moddir/cmd/kubectl/main.go"
	(cd "$moddir" && go mod tidy)
fi

# Version ldflags, for the server and for the clients built into it and into kubectl.
buildinfo="$(cd "$moddir" && go mod download -json "k8s.io/kubernetes@${version}" |
	sed -n 's/^[[:space:]]*"Info": "\(.*\)",*$/\1/p')"
builddate="$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$buildinfo")"
builddate="${builddate:-1970-01-01T00:00:00Z}"
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags+=" -X ${pkg}.gitVersion=${version}"
	ldflags+=" -X ${pkg}.gitMajor=1"
	ldflags+=" -X ${pkg}.gitMinor=${minor}"
	ldflags+=" -X ${pkg}.gitCommit=0000000000000000000000000000000000000000"
	ldflags+=" -X ${pkg}.gitTreeState=clean"
	ldflags+=" -X ${pkg}.buildDate=${builddate}"
done

# Build into a fresh directory, then move into place: a failed or interrupted build never
# leaves a half-written binary that the stamp would bless.
tmpout="$(mktemp -d "$outdir/.build.XXXXXX")"
cleanup+=("$tmpout")
(cd "$moddir" && go build -trimpath -ldflags "$ldflags" -o "$tmpout/" ./cmd/...)
for b in "${binaries[@]}"; do
	mv -f "$tmpout/$b" "$outdir/$b"
done
echo "$stamp" >"$outdir/.stamp"

echo "build.sh: built ${version} in $(($(date +%s) - start))s"
"$outdir/kube-apiserver" --version
"$outdir/kubectl" version --client
"$outdir/etcd" --version | sed -n 1p # not head: under pipefail its early exit can fail the build with SIGPIPE
