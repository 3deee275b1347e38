#!/usr/bin/env bash
# End to end through a real OCI registry: Debian's docker-registry (the CNCF distribution
# registry) on 127.0.0.1, push the annotated policy, pull it back by digest, check the digest
# and media types, then run scenarios through the pulled module.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v docker-registry >/dev/null 2>&1; then
  echo "installing docker-registry (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends docker-registry >/dev/null
fi

work=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$work/config.yml" <<CONF
version: 0.1
log: {level: warn}
storage:
  filesystem: {rootdirectory: $work/data}
http:
  addr: 127.0.0.1:$port
CONF
docker-registry serve "$work/config.yml" > "$work/registry.log" 2>&1 &
registry=$!
trap 'kill $registry 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 50); do
  curl -fs "http://127.0.0.1:$port/v2/" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -fs "http://127.0.0.1:$port/v2/" >/dev/null || { cat "$work/registry.log"; exit 1; }

policy="cargo run --locked -q -p cozystack-policy --"
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

POLICY_WASM="$work/pulled.wasm" cargo run --locked -q -p cozystack-e2e -- run cardinality-

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
