#!/usr/bin/env bash
# Tag a release of the plugin SDK, the nested module github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk:
#
#   deploy/release-sdk.sh VERSION        (VERSION is vX.Y.Z; deploy/release.sh runs it when SDK_VERSION is set)
#
# Go resolves `go get github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk@vX.Y.Z` through the git tag
# plugins/sdk/vX.Y.Z (a module in a subdirectory is tagged with its directory as prefix), so this
# creates that annotated tag at HEAD, after the SDK's own checks: vet and tests on the host, and a
# wasip1 build (the //go:wasmexport files). An existing tag at HEAD is kept; one at another commit is
# an error (tags of published modules must never move: the checksum database remembers them).
# It does not push: it prints the command.
set -euo pipefail

if [ $# -ne 1 ] || ! [[ $1 =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	echo "usage: $0 vX.Y.Z (for example: $0 v0.1.0)" >&2
	exit 2
fi
version=$1 tag=plugins/sdk/$1
cd "$(dirname "$0")/.."
if [ -n "$(git status --porcelain -- plugins/sdk)" ]; then
	echo "release-sdk: plugins/sdk has uncommitted changes; commit first" >&2
	exit 1
fi
(cd plugins/sdk && GOTOOLCHAIN=local go vet ./... && GOTOOLCHAIN=local go test -count=1 ./... &&
	GOOS=wasip1 GOARCH=wasm GOTOOLCHAIN=local go build ./...)
head=$(git rev-parse HEAD)
if at=$(git rev-parse -q --verify "refs/tags/$tag^{commit}"); then
	if [ "$at" != "$head" ]; then
		echo "release-sdk: tag $tag exists at $at, not HEAD $head; published versions never move: choose a new version" >&2
		exit 1
	fi
	echo "release-sdk: tag $tag already at HEAD"
else
	git tag -a "$tag" -m "plugin SDK $version"
	echo "release-sdk: tagged $tag at $head"
fi
echo "release-sdk: publish with: git push origin $tag   (then: go get github.com/policy-ccm/hcloud-policy-ccm/plugins/sdk@$version)"
