#!/usr/bin/env bash
# Release artefacts under one version, for a policy or plugin repository's CI to pin:
#
#   deploy/release.sh OUT_DIR VERSION ARCH...      (make release: bin/release/VERSION, amd64 arm64)
#
# OUT_DIR/ gets hcloud-policy-ccm-linux-ARCH for each ARCH (static: CGO_ENABLED=0, -trimpath, the
# build tag grpcnotrace, VERSION stamped into ccm.Version as deploy/Dockerfile does),
# capabilities.json (`policy capabilities`: the Rego built-ins the CCM's engine offers, for
# `opa check --capabilities`), policy-input.schema.json (docs/policy-input.schema.json, for
# `opa check --schema`), policy-samples.tar.gz (`policy samples --out policy-samples`: the sample
# inputs as policy-samples/inputs/NAME.json, for `opa test policies/ policy-samples/`; see
# docs/policy.md § With bare opa) and SHA256SUMS over all of them.
#
# Checks run here, so an inconsistent set is never written silently: the binary of the build
# machine's architecture (built for the purpose if ARCH does not include it) must print VERSION
# on its first `version` line (all of `version` is kept as VERSIONS.txt), and `sha256sum -c SHA256SUMS` must pass. `make test` does not
# run this script (two full cross builds); `bash -n deploy/release.sh` checks its syntax.
#
# With SDK_VERSION=vX.Y.Z set, it also tags the plugin SDK (deploy/release-sdk.sh: the tag
# plugins/sdk/vX.Y.Z that `go get .../plugins/sdk@vX.Y.Z` resolves). The SDK's version follows the
# ABI, not the CCM's: set it only when the SDK changed.
set -euo pipefail

if [ $# -lt 3 ]; then
	echo "usage: $0 OUT_DIR VERSION ARCH... (for example: $0 bin/release/v0.1.0 v0.1.0 amd64 arm64)" >&2
	exit 2
fi
out=$1 version=$2
shift 2
case $version in
*-dirty)
	if [ "${ALLOW_DIRTY:-}" != 1 ]; then
		echo "release: VERSION $version is built from uncommitted changes; commit (and tag) first, or set ALLOW_DIRTY=1 for a local try" >&2
		exit 1
	fi
	;;
esac

cd "$(dirname "$0")/.."
pkg=github.com/policy-ccm/hcloud-policy-ccm
build() { # build GOOS GOARCH OUTPUT
	echo "release: building $1/$2 $version"
	CGO_ENABLED=0 GOOS=$1 GOARCH=$2 GOTOOLCHAIN=local go build -trimpath -tags grpcnotrace \
		-ldflags "-s -w -X $pkg/ccm.Version=$version" -o "$3" ./cmd/hcloud-policy-ccm
}

rm -rf "$out"
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
hostarch=$(go env GOHOSTARCH)
native=
for arch in "$@"; do
	build linux "$arch" "$out/hcloud-policy-ccm-linux-$arch"
	if [ "$arch" = "$hostarch" ] && [ "$(go env GOHOSTOS)" = linux ]; then
		native=$out/hcloud-policy-ccm-linux-$arch
	fi
done
if [ -z "$native" ]; then
	build "$(go env GOHOSTOS)" "$hostarch" "$tmp/hcloud-policy-ccm"
	native=$tmp/hcloud-policy-ccm
fi

first=$("$native" version | head -n 1)
if [ "$first" != "hcloud-policy-ccm $version" ]; then
	echo "release: $native version prints \"$first\", want \"hcloud-policy-ccm $version\" (is -X $pkg/ccm.Version still the variable?)" >&2
	exit 1
fi
"$native" version > "$out/VERSIONS.txt"
"$native" policy capabilities > "$out/capabilities.json"
cp docs/policy-input.schema.json "$out/policy-input.schema.json"
# The same bytes for the same samples: sorted names, no owners or times, gzip without a name.
"$native" policy samples --out "$tmp/policy-samples" > /dev/null
tar -C "$tmp" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - policy-samples | gzip -n > "$out/policy-samples.tar.gz"

(cd "$out" && sha256sum -- * > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS && sha256sum --quiet -c SHA256SUMS)
echo "release: $out"
ls -l "$out"
if [ -n "${SDK_VERSION:-}" ]; then
	deploy/release-sdk.sh "$SDK_VERSION"
fi
