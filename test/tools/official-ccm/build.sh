#!/usr/bin/env bash
# build.sh OUTDIR_BASE [GIT_SOURCE]
#
# Builds the official hetznercloud/hcloud-cloud-controller-manager at a pinned release into
# OUTDIR_BASE/official-<commit>/hcloud-cloud-controller-manager and prints that path on the last
# line of its output, for the side-by-side CPU benchmark (`make bench-official`, test/bench,
# docs/performance.md § Side by side with the official CCM).
#
# Pinned release: v1.35.0 (commit cfbbbd9d6f249e835f4499f4a2aa10ee59b2eb07), the newest release
# tag; its go.mod says `go 1.26.0` (toolchain go1.26.5, ignored with GOTOOLCHAIN=local), so it
# builds with the local go1.26.x. The commit is checked, so a moved tag cannot change what is
# measured. Override with OFFICIAL_CCM_REF and OFFICIAL_CCM_COMMIT together.
#
# GIT_SOURCE is a git directory (a bare mirror or a clone) or a URL (default
# https://github.com/hetznercloud/hcloud-cloud-controller-manager.git). A local git directory is
# read with `git archive`; a URL is fetched at depth 1 into a temporary repository.
#
# The build is as this repository's Makefile builds its own binary (CGO_ENABLED=0, -trimpath,
# debug information kept), with the version ldflags of the official's .goreleaser.yml, so the two
# binaries differ only in their source. The official releases also strip (-s -w); that changes
# the file's size, not what runs. The dependencies come from the Go module proxy (or the module
# cache). A second call is a no-op (the binary and a stamp exist); concurrent calls wait (flock).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
	echo "usage: $0 OUTDIR_BASE [GIT_SOURCE]" >&2
	exit 2
fi

export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"
export CGO_ENABLED=0

ref="${OFFICIAL_CCM_REF:-v1.35.0}"
commit="${OFFICIAL_CCM_COMMIT:-cfbbbd9d6f249e835f4499f4a2aa10ee59b2eb07}"
source="${2:-https://github.com/hetznercloud/hcloud-cloud-controller-manager.git}"
mkdir -p "$1"
outdir="$(cd "$1" && pwd)/official-${commit:0:12}"
bin="$outdir/hcloud-cloud-controller-manager"
stamp="ref=${ref} commit=${commit} go=$(go env GOVERSION)"

up_to_date() { [[ -x "$bin" && -f "$outdir/.stamp" && "$(cat "$outdir/.stamp")" == "$stamp" ]]; }

mkdir -p "$outdir"
if ! up_to_date; then
	exec 9>"$outdir/.lock"
	flock 9
fi
if up_to_date; then
	echo "official-ccm/build.sh: ${bin} is up to date (${ref})" >&2
	echo "$bin"
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src"
if [[ -d "$source" ]] && git --git-dir="$source" rev-parse --git-dir >/dev/null 2>&1; then
	gitdir="$(git --git-dir="$source" rev-parse --absolute-git-dir)"
elif [[ -d "$source/.git" ]]; then
	gitdir="$source/.git"
else
	gitdir="$work/repo.git"
	git init -q --bare "$gitdir"
	git --git-dir="$gitdir" fetch -q --depth 1 "$source" "refs/tags/${ref}:refs/tags/${ref}"
fi
got="$(git --git-dir="$gitdir" rev-parse "${ref}^{commit}")"
if [[ "$got" != "$commit" ]]; then
	echo "official-ccm/build.sh: ${ref} is ${got} in ${source}, want ${commit}" >&2
	exit 1
fi
git --git-dir="$gitdir" archive "$commit" | tar -x -C "$work/src"

echo "official-ccm/build.sh: building hcloud-cloud-controller-manager ${ref} (${commit:0:12}) with $(go env GOVERSION)" >&2
start=$(date +%s)
(
	cd "$work/src"
	# GOFLAGS of the caller (the Makefile's -tags=grpcnotrace) are this repository's, not the
	# official's: build with none, as its release does.
	GOFLAGS= go build -trimpath -o "$work/hcloud-cloud-controller-manager" \
		-ldflags "-X github.com/hetznercloud/hcloud-cloud-controller-manager/hcloud.providerVersion=${ref} -X k8s.io/component-base/version.gitVersion=v0.0.0-master+${ref}" .
)
mv "$work/hcloud-cloud-controller-manager" "$bin"
echo "$stamp" >"$outdir/.stamp"
echo "official-ccm/build.sh: built in $(($(date +%s) - start)) s" >&2
echo "$bin"
