//! Embeds the released policy module: `annotated-policy.wasm` at the workspace root (what `make
//! cli` builds first), or `$COZYSTACK_POLICY_WASM`. Without either the binary embeds none and
//! its verbs that run the policy ask for `--policy`.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(embedded_policy)");
    println!("cargo::rerun-if-env-changed=COZYSTACK_POLICY_WASM");
    let path = std::env::var_os("COZYSTACK_POLICY_WASM")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default())
                .join("../annotated-policy.wasm")
        });
    println!("cargo::rerun-if-changed={}", path.display());
    if path.is_file() {
        println!("cargo::rustc-cfg=embedded_policy");
        println!("cargo::rustc-env=EMBEDDED_POLICY_WASM={}", path.display());
    }
}
