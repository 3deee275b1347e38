#!/usr/bin/env bash
# Signed like Kubewarden's own policies, on the registry e2e/registry-test.sh started
# ($registry, $work, $policy): a cosign key pair from `keygen`, the artifact and its CycloneDX
# SBOM pushed and signed, then verification accepts exactly the signed digest with the key and
# annotations it was signed with, and refuses — one line each — another key, another digest,
# a missing signature, a missing annotation; bad keys and passwords stop the verb (exit 2).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${registry:?} ${locked:?} ${work:?} ${policy:?}"
repo="$registry/cozystack/signed"
passed=0
pass() { passed=$((passed + 1)); echo "ok: $1"; }
fail() { echo "FAILED: $1"; exit 1; }
# expect CODE PATTERN -- CMD...: the exit code and a line of stderr (or stdout) matching PATTERN.
expect() {
  local code=$1 pattern=$2; shift 3
  set +e; out=$("$@" 2>&1); got=$?; set -e
  [ "$got" = "$code" ] && grep -qF -- "$pattern" <<<"$out" ||
    fail "$* exited $got (expected $code) with: $out (expected a line with: $pattern)"
}

export PROJECT_PASSWORD=project-secret OTHER_PASSWORD=other-secret WRONG_PASSWORD=nope
$policy keygen --output-prefix "$work/project" --key-password-env PROJECT_PASSWORD 2>/dev/null
$policy keygen --output-prefix "$work/other" --key-password-env OTHER_PASSWORD 2>/dev/null
[ "$(stat -c %a "$work/project.key")" = 600 ] || fail "the private key is not 0600"
head -1 "$work/project.key" | grep -qx -- '-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----' ||
  fail "the private key is not in cosign's format"
expect 2 "$work/project.key exists: remove it or choose another --output-prefix" -- \
  $policy keygen --output-prefix "$work/project" --key-password-env PROJECT_PASSWORD
pass "keygen writes a cosign pair (0600 private key) and will not overwrite one"

pushed=$($policy push annotated-policy.wasm "$repo:v1" --insecure --sbom policy.cdx.json \
  --sign-key "$work/project.key" --key-password-env PROJECT_PASSWORD --annotation env=test)
signed=$(jq -r .manifestDigest <<<"$pushed")
sbom_ref=$(jq -r .sbom <<<"$pushed")
[ "$(jq -r '[.signatures[].manifestDigest] | join(" ")' <<<"$pushed")" = "$signed ${sbom_ref#*@}" ] ||
  fail "push --sign-key did not sign the artifact and its SBOM: $pushed"
[ "$(jq -r .signatures[0].signatureRef <<<"$pushed")" = "$repo:${signed/:/-}.sig" ] ||
  fail "the signature is not where cosign keeps it: $pushed"
pass "push --sbom --sign-key: artifact $signed and SBOM ${sbom_ref#*@} signed at cosign's .sig tags"

verified=$($policy verify "$repo:v1" --key "$work/project.pub" --annotation env=test --insecure)
[ "$(jq -r ".[0].manifestDigest" <<<"$verified")" = "$signed" ] && [ "$(jq -r ".[0].annotations.env" <<<"$verified")" = test ] ||
  fail "verify: $verified"
pass "verify with the signing key and its annotation: exit 0, digest $signed"

expect 1 "refused: $repo:v1 ($signed): signed by $work/project.pub, but without the annotations env=prod (the signature carries env=test): sign it again with --annotation" -- \
  $policy verify "$repo:v1" --key "$work/project.pub" --annotation env=prod --insecure
pass "a required annotation the signature lacks: refused, exit 1"

expect 1 "refused: $repo:v1 ($signed): 1 signature(s), none made by the key $work/other.pub:" -- \
  $policy verify "$repo:v1" --key "$work/other.pub" --insecure
pass "another key: refused, exit 1"

$policy sbom "$repo:v1" --verify-key "$work/project.pub" --insecure > "$work/sbom.json"
cmp -s policy.cdx.json "$work/sbom.json" || fail "the SBOM read back differs from policy.cdx.json"
python3 - "$work/sbom.json" <<'PY' || fail "the SBOM does not match Cargo.lock"
import json, sys, tomllib
bom = json.load(open(sys.argv[1]))
lock = {}
for package in tomllib.load(open("Cargo.lock", "rb"))["package"]:
    lock.setdefault(package["name"], set()).add(package["version"])
assert bom["metadata"]["component"]["name"] == "cozystack-capabilities-policy", bom["metadata"]
components = {c["name"]: c["version"] for c in bom["components"]}
stray = {n: v for n, v in components.items() if v not in lock.get(n, ())}
assert not stray, f"components not in Cargo.lock: {stray}"
direct = tomllib.load(open("Cargo.toml", "rb"))["dependencies"]
missing = [n for n in direct if n not in components]
assert not missing, f"direct dependencies missing: {missing}"
for name in ("kubewarden-policy-sdk", "k8s-openapi", "serde_json", "cozystack-resolver"):
    print(f"  {name} {components[name]} (Cargo.lock: {', '.join(sorted(lock[name]))})")
print(f"  {len(components)} components, every one at its Cargo.lock version")
PY
pass "sbom --verify-key: the attached SBOM round-trips, signed, and names the policy's dependencies at their Cargo.lock versions"

# Other bytes pushed under the signed tag: the tag now names an unsigned digest.
echo "another build" > "$work/usage.md"
$policy annotate --metadata policy-metadata.yml --usage "$work/usage.md" -o "$work/other.wasm" policy.wasm
other=$($policy push "$work/other.wasm" "$repo:v1" --insecure | jq -r .manifestDigest)
[ "$other" != "$signed" ] || fail "the re-push did not change the digest"
expect 1 "refused: $repo:v1 ($other): not signed (no cosign signature at $repo:${other/:/-}.sig)" -- \
  $policy verify "$repo:v1" --key "$work/project.pub" --insecure
expect 2 "error: $repo:v1 ($other): not signed" -- \
  $policy pull "$repo:v1" -o "$work/unsigned.wasm" --verify-key "$work/project.pub" --insecure
[ ! -e "$work/unsigned.wasm" ] || fail "pull --verify-key wrote an unsigned module"
pass "other bytes under the signed tag: verify refuses the new digest, pull --verify-key writes nothing"

# The signature moved onto the other digest's tag (a registry writer copying it) is not its own.
curl -fs -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
  "http://$registry/v2/cozystack/signed/manifests/${signed/:/-}.sig" -o "$work/sig.json"
curl -fs -X PUT -H 'Content-Type: application/vnd.oci.image.manifest.v1+json' --data-binary "@$work/sig.json" \
  "http://$registry/v2/cozystack/signed/manifests/${other/:/-}.sig" -o /dev/null
expect 1 "the signature at $repo:${other/:/-}.sig was made for $signed, not for this artifact" -- \
  $policy verify "$repo@$other" --key "$work/project.pub" --insecure
pass "a signature copied from another digest: refused, naming the digest it was made for"

replaced=$($policy sign "$repo@$other" --key "$work/other.key" --key-password-env OTHER_PASSWORD --insecure 2>&1 >/dev/null)
grep -qx "warning: $repo:${other/:/-}.sig: replaced 1 earlier signature(s) there; sign again with each key whose signature must stay" <<<"$replaced" ||
  fail "sign did not say it replaced the signature at the tag: $replaced"
expect 1 "none made by the key $work/project.pub" -- \
  $policy verify "$repo@$other" --key "$work/project.pub" --insecure
$policy verify "$repo@$other" --key "$work/other.pub" --insecure >/dev/null || fail "sign REF then verify"
pass "sign REF with another key: that key verifies it, the project's key refuses it, and the signature it replaced is named"

# run --policy registry://… --verify-key runs only the verified module.
expect 1 "verdict   DENIED (403)" -- $policy run "$work/request.yaml" --policy "registry://$repo@$signed" \
  --insecure --verify-key "$work/project.pub" --annotation env=test --settings e2e/cluster/settings.yaml --dump e2e/cluster
grep -qx "policy: $repo@$signed ($signed), signature verified with $work/project.pub" <<<"$out" ||
  fail "run did not say the module verified: $out"
expect 2 "error: $repo:v1 ($other): 1 signature(s), none made by the key $work/project.pub" -- \
  $policy run "$work/request.yaml" --policy "registry://$repo:v1" --insecure --verify-key "$work/project.pub" \
  --dump e2e/cluster
pass "run --policy registry://… --verify-key: the signed module runs (DENIED, exit 1), others are not run (exit 2)"

# Kubewarden's verification config: written for a key, it verifies as the key does; the
# project's own (keyless) config is refused here as what needs Fulcio and Rekor.
$policy verification-config --key "$work/project.pub" --annotation env=test > "$work/verification.yaml"
[ "$($policy verify "$repo@$signed" --verification-config "$work/verification.yaml" --insecure | jq -r '.[0].manifestDigest')" = "$signed" ] ||
  fail "verify --verification-config for the signing key"
$policy verification-config --key "$work/project.pub" --key "$work/other.pub" > "$work/both.yaml"
expect 1 "refused: $repo@$signed ($signed): 1 signature(s), none made by the key $work/both.yaml: pubKey #2" -- \
  $policy verify "$repo@$signed" --verification-config "$work/both.yaml" --insecure
expect 2 "error: deploy/verification-config.yaml: the githubAction requirement (cozystack/capabilities-policy) is keyless" -- \
  $policy verify "$repo@$signed" --verification-config deploy/verification-config.yaml --insecure
pass "verification-config --key: verify --verification-config accepts its key's signature, refuses a missing allOf key, and names keyless requirements it cannot check"

# A registry that wants credentials ($locked, htpasswd): without them the verb stops with the
# registry's refusal; with what `docker login` stored ($DOCKER_CONFIG/config.json) every verb
# works, signatures and the SBOM included.
expect 2 "authentication required or refused: log in with \`docker login\` (or \`podman login\`) to the registry" -- \
  $policy push annotated-policy.wasm "$locked/cozystack/private:v1" --insecure
mkdir -p "$work/docker"
printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$locked" "$(printf alice:wonderland | base64)" > "$work/docker/config.json"
export DOCKER_CONFIG="$work/docker"
private=$($policy push annotated-policy.wasm "$locked/cozystack/private:v1" --insecure --sbom policy.cdx.json \
  --sign-key "$work/project.key" --key-password-env PROJECT_PASSWORD | jq -r .manifestDigest)
$policy verify "$locked/cozystack/private:v1" --key "$work/project.pub" --insecure >/dev/null ||
  fail "verify with stored credentials"
$policy sbom "$locked/cozystack/private:v1" --verify-key "$work/project.pub" --insecure | cmp -s - policy.cdx.json ||
  fail "sbom with stored credentials"
$policy pull "$locked/cozystack/private@$private" -o "$work/private.wasm" --verify-key "$work/project.pub" --insecure >/dev/null
cmp -s annotated-policy.wasm "$work/private.wasm" || fail "pull --verify-key with stored credentials"
unset DOCKER_CONFIG
pass "a registry that wants credentials: refused without them; push, sign, verify, sbom and pull with those docker login stored"

# Bad input: one line, exit 2.
expect 2 "error: $work/project.key: cannot decrypt the private key: wrong password" -- \
  $policy sign "$repo@$signed" --key "$work/project.key" --key-password-env WRONG_PASSWORD --insecure
expect 2 "no password: there is no terminal to ask on; name an environment variable that holds it with --key-password-env" -- \
  $policy sign "$repo@$signed" --key "$work/project.key" --insecure </dev/null
expect 2 "error: $work/project.pub: a PEM PUBLIC KEY, not a cosign private key" -- \
  $policy sign "$repo@$signed" --key "$work/project.pub" --key-password-env PROJECT_PASSWORD --insecure
expect 2 "error: $work/usage.md: not a PEM file" -- \
  $policy verify "$repo@$signed" --key "$work/usage.md" --insecure
expect 2 "error: 127.0.0.1:1/cozystack/signed:v1: " -- \
  $policy verify "127.0.0.1:1/cozystack/signed:v1" --key "$work/project.pub" --insecure
pass "a wrong password, no terminal, a wrong key file, a registry that does not answer: one line, exit 2"

# A registry that takes every connection and never answers: the verbs give up within their
# timeout (here 2 s) instead of hanging the job.
python3 -c '
import socket, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
held = []
while True: held.append(s.accept()[0])
' > "$work/silent.port" &
silent=$!
trap 'kill $silent 2>/dev/null || true' EXIT
for _ in $(seq 50); do [ -s "$work/silent.port" ] && break; sleep 0.1; done
port=$(cat "$work/silent.port")
started=$(date +%s)
export COZYSTACK_POLICY_REGISTRY_TIMEOUT=2
for verb in verify pull; do
  args=(--insecure)
  [ $verb = verify ] && args+=(--key "$work/project.pub")
  [ $verb = pull ] && args+=(-o "$work/silent.wasm")
  expect 2 "registry: no complete answer within 2 s" -- \
    $policy $verb "127.0.0.1:$port/cozystack/silent:v1" "${args[@]}"
done
unset COZYSTACK_POLICY_REGISTRY_TIMEOUT
[ $(( $(date +%s) - started )) -lt 30 ] || fail "the timeout did not bound the verbs"
kill $silent
pass "a registry that accepts and never answers: verify and pull give up after the timeout, exit 2"

echo "signing: $passed passed, 0 failed"
