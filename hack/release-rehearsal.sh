#!/usr/bin/env bash
# The release workflow's steps (.github/workflows/release.yml) against a registry on loopback:
# `make push` of the release files with their SBOM, signed with a key made here (the workflow
# signs keyless, which needs Fulcio and Rekor), then the artifact pulled by digest and checked
# byte for byte against target/release-files and its SHA256SUMS, and the signature verified.
set -euo pipefail
cd "$(dirname "$0")/.."
tag=${1:?usage: hack/release-rehearsal.sh vX.Y.Z}
source e2e/registry-lib.sh
serve rehearsal
registry="127.0.0.1:$served/cozystack/policies/cozystack-capabilities"
files=target/release-files
(cd "$files" && sha256sum --check --quiet SHA256SUMS)
cmp annotated-policy.wasm "$files/annotated-policy.wasm"
cmp policy.cdx.json "$files/policy.cdx.json"

cargo test --locked --no-run -q -p cozystack-e2e -p cozystack-policy
policy="$PWD/target/debug/cozystack-policy"
export COSIGN_PASSWORD=rehearsal
$policy keygen --output-prefix "$work/release" --key-password-env COSIGN_PASSWORD 2>/dev/null
make -s push REGISTRY="$registry" TAG="$tag" INSECURE=--insecure \
  SIGN_KEY="$work/release.key" > "$work/pushed.json"
digest=$(jq -r .manifestDigest "$work/pushed.json")
sbom=$(jq -r .sbom "$work/pushed.json")
[ "$(jq -r '.signatures | length' "$work/pushed.json")" = 2 ] ||
  { echo "rehearsal: the artifact and its SBOM were not both signed: $(cat "$work/pushed.json")"; exit 1; }
echo "pushed $registry:$tag as $digest, SBOM $sbom, both signed"

$policy pull "$registry@$digest" -o "$work/pulled.wasm" --insecure --verify-key "$work/release.pub" >/dev/null
cmp "$files/annotated-policy.wasm" "$work/pulled.wasm" ||
  { echo "rehearsal: the module pulled by digest differs from the release file"; exit 1; }
$policy sbom "$registry@$digest" --verify-key "$work/release.pub" --insecure > "$work/sbom.json"
cmp "$files/policy.cdx.json" "$work/sbom.json" ||
  { echo "rehearsal: the SBOM read back differs from the release file"; exit 1; }
echo "pulled $registry@$digest by digest, signature verified: the module and the SBOM are the release files"
echo "release rehearsal of $tag: 1 passed, 0 failed"
