#!/usr/bin/env bash
# End to end through a real OCI registry: Debian's docker-registry (the CNCF distribution
# registry) on 127.0.0.1, push the annotated policy, pull it back by digest, check the digest
# and media types, then run scenarios through the pulled module. Then the supply chain: sign
# with a cosign key, attach the SBOM (policy.cdx.json), and check that verification refuses
# what it must (e2e/signing-test.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

# The registry on loopback, and jq (e2e/registry-lib.sh).
source e2e/registry-lib.sh
serve data
port=$served

# The build `make e2e` made (Makefile: TOOLS); a no-op after it.
cargo test --locked --no-run -q -p cozystack-e2e -p cozystack-policy
policy="$PWD/target/debug/cozystack-policy"
version=$(sed -n 's/^ *io.kubewarden.policy.version: *//p' policy-metadata.yml)
pushed=$($policy push annotated-policy.wasm "127.0.0.1:$port/cozystack/capabilities:v$version" --insecure)
digest=$(jq -r .manifestDigest <<<"$pushed")
echo "pushed 127.0.0.1:$port/cozystack/capabilities:v$version as $digest"

pulled=$($policy pull "127.0.0.1:$port/cozystack/capabilities@$digest" -o "$work/pulled.wasm" --insecure)
check() { [ "$(jq -r "$1" <<<"$pulled")" = "$2" ] || { echo "pull: $1 is $(jq -r "$1" <<<"$pulled"), expected $2"; exit 1; }; }
check .manifestDigest "$digest"
check .configMediaType application/vnd.wasm.config.v1+json
check '.layerMediaTypes | join(",")' application/vnd.wasm.content.layer.v1+wasm
check '.annotations["io.kubewarden.policy.version"]' "$version"
check '.annotations["org.opencontainers.image.source"]' "$(jq -r '.annotations["io.kubewarden.policy.source"]' <<<"$pulled")"
check '.annotations | has("io.kubewarden.policy.usage")' false
cmp annotated-policy.wasm "$work/pulled.wasm" || { echo "the pulled module differs from the pushed one"; exit 1; }
echo "pulled by digest: media types, annotations and bytes match"

POLICY_WASM="$work/pulled.wasm" target/debug/cozystack-e2e run cardinality-

# The operator's tool runs the module straight from the registry, by digest.
cat > "$work/request.yaml" <<'REQ'
apiVersion: admission.k8s.io/v1
kind: AdmissionReview
request:
  uid: registry-run
  kind: {group: apps.cozystack.io, version: v1alpha1, kind: Monitoring}
  resource: {group: apps.cozystack.io, version: v1alpha1, resource: monitorings}
  name: second
  namespace: tenant-root
  operation: CREATE
  userInfo: {username: rita, groups: [tenant-root-admin, "system:authenticated"]}
  object:
    apiVersion: apps.cozystack.io/v1alpha1
    kind: Monitoring
    metadata: {name: second, namespace: tenant-root}
REQ
set +e
verdict=$($policy run "$work/request.yaml" --policy "registry://127.0.0.1:$port/cozystack/capabilities@$digest" \
  --insecure --settings e2e/cluster/settings.yaml --dump e2e/cluster 2>"$work/run.err")
code=$?
set -e
grep -q "^policy: 127.0.0.1:$port/cozystack/capabilities@$digest ($digest)$" "$work/run.err" ||
  { echo "run: the module did not come from the registry:"; cat "$work/run.err"; exit 1; }
[ "$code" = 1 ] && grep -q '^verdict   DENIED (403)$' <<<"$verdict" &&
  grep -q '^message   Monitoring: at most 1 per tenant tenant-root' <<<"$verdict" ||
  { echo "run through the registry module (exit $code):"; echo "$verdict"; cat "$work/run.err"; exit 1; }
echo "cozystack-policy run --policy registry://…@$digest: DENIED (403), exit 1"
echo "registry: 2 passed, 0 failed"

# A registry that wants credentials (htpasswd, bcrypt): those `docker login` stored are used.
python3 -W ignore -c 'import crypt; print("alice:" + crypt.crypt("wonderland", crypt.mksalt(crypt.METHOD_BLOWFISH)))' > "$work/htpasswd"
serve locked "auth: {htpasswd: {realm: cozystack-test, path: $work/htpasswd}}"
locked=$served

registry="127.0.0.1:$port" locked="127.0.0.1:$locked" work="$work" policy="$policy" bash e2e/signing-test.sh
