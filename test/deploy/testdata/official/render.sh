#!/usr/bin/env bash
# render.sh OFFICIAL_REPO [HELM]
#
# Writes rendered/<set>.yaml: `helm template` of the official chart (chart/ of a checkout of
# github.com/hetznercloud/hcloud-cloud-controller-manager at OFFICIAL_REPO) with values/<set>.yaml,
# release hccm, namespace kube-system and the PodMonitor API available; and rendered/manifest-ccm.yaml
# and rendered/manifest-ccm-networks.yaml, the official deploy/ccm.yaml and deploy/ccm-networks.yaml
# as committed (rendered by its chart Makefile). TestRenderParity (../../parity_test.go) renders
# deploy/chart with the same values and compares. Run it again, and update README.md's commit,
# when moving to a newer official release.
set -euo pipefail
repo="$1"
helm="${2:-${HELM_BIN:-helm}}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
chart="$(mktemp -d)"
trap 'rm -rf "$chart"' EXIT
git -C "$repo" archive HEAD chart | tar -x -C "$chart"
for values in "$here"/values/*.yaml; do
	set_name="$(basename "$values" .yaml)"
	"$helm" template hccm "$chart/chart" --namespace kube-system --api-versions monitoring.coreos.com/v1/PodMonitor \
		--values "$values" >"$here/rendered/$set_name.yaml"
done
git -C "$repo" show HEAD:deploy/ccm.yaml >"$here/rendered/manifest-ccm.yaml"
git -C "$repo" show HEAD:deploy/ccm-networks.yaml >"$here/rendered/manifest-ccm-networks.yaml"
echo "official commit: $(git -C "$repo" rev-parse HEAD)"
