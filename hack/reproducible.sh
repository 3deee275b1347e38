#!/usr/bin/env bash
# Two builds of the policy module, each from nothing in a target directory of its own, must give
# the same bytes, and the same as `make policy.wasm`: the release workflow's module is what
# anyone rebuilds from its tag. What that takes is pinned in the repository: the toolchain
# (rust-toolchain.toml), every crate (Cargo.lock, --locked), the profile (Cargo.toml
# [profile.wasm]: one codegen unit, LTO, stripped), and wasm-opt's flags (WASM_OPT, from the
# Makefile); binaryen is Debian's package, so its version is the distribution's (docs/release.md).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${WASM_OPT:?run through make reproducible}"
work=target/reproducible
rm -rf "$work"
digests=()
for build in a b; do
  dir="$work/$build"
  CARGO_TARGET_DIR="$dir" cargo build --locked --quiet --profile wasm --target wasm32-wasip1 \
    -p cozystack-capabilities-policy
  $WASM_OPT "$dir/wasm32-wasip1/wasm/cozystack_capabilities_policy.wasm" -o "$dir/policy.wasm"
  digests+=("$(sha256sum "$dir/policy.wasm" | cut -d' ' -f1)")
  echo "build $build: sha256:${digests[-1]}"
done
[ "${digests[0]}" = "${digests[1]}" ] ||
  { echo "reproducible: two builds from nothing differ: sha256:${digests[0]} and sha256:${digests[1]}"; exit 1; }
if [ -f policy.wasm ]; then
  built=$(sha256sum policy.wasm | cut -d' ' -f1)
  [ "$built" = "${digests[0]}" ] ||
    { echo "reproducible: make policy.wasm (sha256:$built) differs from a build from nothing (sha256:${digests[0]}): rebuild it (make policy.wasm) and compare again"; exit 1; }
fi
echo "reproducible: both builds and policy.wasm are sha256:${digests[0]}"
rm -rf "$work"
