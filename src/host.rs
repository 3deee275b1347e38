//! The one place that talks to the Kubewarden host: waPC `kubewarden/kubernetes/*` calls.
//! Everything above it sees the [`Host`] trait, so tests can answer the calls themselves.

/// A Kubernetes host capability call: operation (`get_resource`, `list_resources_all`, …)
/// and its JSON request, answered with the JSON response or the host's error text.
pub trait Host {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String>;
}

/// The real host, through waPC.
pub struct WapcHost;

impl Host for WapcHost {
    fn kubernetes(&self, operation: &str, request: &[u8]) -> Result<Vec<u8>, String> {
        kubewarden_policy_sdk::wapc_guest::host_call("kubewarden", "kubernetes", operation, request)
            .map_err(|err| host_error(&err.to_string()))
    }
}

/// The longest host error a denial quotes.
const MAX_HOST_ERROR: usize = 300;

/// One line of the host's error, for a denial a person reads. wapc-guest wraps the host's
/// text as `Host error: …`, Kubewarden's evaluator as `Callback evaluation failure: …` followed
/// by anyhow's causes and, where it was built with them, a backtrace on further lines.
pub fn host_error(text: &str) -> String {
    let mut line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default();
    for prefix in ["Host error: ", "Callback evaluation failure: "] {
        line = line.strip_prefix(prefix).unwrap_or(line);
    }
    match line.char_indices().nth(MAX_HOST_ERROR) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::host_error;

    #[test]
    fn host_errors_become_one_bounded_line() {
        assert_eq!(
            host_error(
                "Host error: Callback evaluation failure: watch timed out\n\nCaused by:\n    0: deadline\n\nStack backtrace:\n   0: clone3\n             at ./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S:78:0"
            ),
            "watch timed out"
        );
        assert_eq!(host_error("connection refused"), "connection refused");
        assert_eq!(host_error("\n\n  Callback evaluation failure: x  \n"), "x");
        let long = "é".repeat(400);
        let cut = host_error(&long);
        assert_eq!(cut.chars().count(), 301);
        assert!(cut.ends_with('…'));
        assert_eq!(host_error(""), "");
    }
}
