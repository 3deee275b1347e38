//! The answer: allow (with warnings) or deny with an HTTP code and a one-line message.

use serde::Serialize;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub allowed: bool,
    /// Set when denied: 400 malformed input, 403 a rule, 500 a failed lookup.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The row of the rule table (`rules::RULES`) that refused, by its stable name: what a tool
    /// matches on, where the message is for people; `describe` for a refusal made before the
    /// table runs (`rules::DESCRIBE`). None when allowed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// The row each warning came from, in the order of `warnings`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warned_by: Vec<&'static str>,
    /// The rows whose refusal was waived for a platform writer (`platformWriters: warn`), the
    /// request admitted with their warning: data, so that no tool reads a waiver from wording.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub waived_by: Vec<&'static str>,
}

pub const BAD_REQUEST: u16 = 400;
pub const FORBIDDEN: u16 = 403;
pub const LOOKUP_FAILED: u16 = 500;

impl Verdict {
    pub fn allow() -> Self {
        Verdict {
            allowed: true,
            code: None,
            message: None,
            warnings: Vec::new(),
            rule: None,
            warned_by: Vec::new(),
            waived_by: Vec::new(),
        }
    }

    pub fn deny(code: u16, message: impl Into<String>) -> Self {
        Verdict {
            allowed: false,
            code: Some(code),
            message: Some(message.into()),
            ..Verdict::allow()
        }
    }
}

/// A rule a request breaks: the message and whether platform writers may be let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub code: u16,
    pub message: String,
    /// Cardinality and protection violations obey `platformWriters`; authorship ones do not.
    pub waivable: bool,
}

impl Violation {
    pub fn rule(message: impl Into<String>) -> Self {
        Violation {
            code: FORBIDDEN,
            message: message.into(),
            waivable: false,
        }
    }

    pub fn waivable(message: impl Into<String>) -> Self {
        Violation {
            waivable: true,
            ..Violation::rule(message)
        }
    }

    pub fn failure(code: u16, message: impl Into<String>) -> Self {
        Violation {
            code,
            message: message.into(),
            waivable: false,
        }
    }
}

/// Lists names as `a, b, c and N more`, so a message stays one readable line.
pub fn list_some(items: &[String], shown: usize) -> String {
    list_head(&items[..shown.min(items.len())], items.len())
}

/// `list_some` for a caller that formatted only the `head` of `total` items.
pub fn list_head(head: &[String], total: usize) -> String {
    match total.saturating_sub(head.len()) {
        0 => head.join(", "),
        more => format!("{} and {more} more", head.join(", ")),
    }
}
