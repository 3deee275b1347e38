//! Kubernetes label selectors with the full syntax the API server accepts:
//! `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` (exists), `!k` (does not exist).

use std::collections::BTreeMap;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selector(Vec<Requirement>);

#[derive(Debug, Error, PartialEq, Eq)]
#[error("unable to parse requirement: {0}")]
pub struct SelectorError(String);

/// Splits on commas that are not inside parentheses.
fn terms(selector: &str) -> Result<Vec<&str>, SelectorError> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(SelectorError(format!(
                "unbalanced parenthesis in {selector:?}"
            )));
        }
    }
    if depth != 0 {
        return Err(SelectorError(format!(
            "unbalanced parenthesis in {selector:?}"
        )));
    }
    out.push(&selector[start..]);
    Ok(out)
}

fn set(values: &str, term: &str) -> Result<Vec<String>, SelectorError> {
    let inner = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| SelectorError(format!("expected a parenthesised set in {term:?}")))?;
    Ok(inner.split(',').map(|v| v.trim().to_owned()).collect())
}

fn key(raw: &str, term: &str) -> Result<String, SelectorError> {
    let key = raw.trim();
    let valid = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'/'));
    if valid {
        Ok(key.to_owned())
    } else {
        Err(SelectorError(format!("invalid label key in {term:?}")))
    }
}

impl Selector {
    pub fn parse(selector: &str) -> Result<Selector, SelectorError> {
        if selector.trim().is_empty() {
            return Ok(Selector::default());
        }
        let mut requirements = Vec::new();
        for term in terms(selector)? {
            let t = term.trim();
            let requirement = if let Some(rest) = t.strip_prefix('!') {
                Requirement::NotExists(key(rest, t)?)
            } else if let Some((k, v)) = t.split_once("!=") {
                Requirement::NotEquals(key(k, t)?, v.trim().to_owned())
            } else if let Some((k, v)) = t.split_once("==") {
                Requirement::Equals(key(k, t)?, v.trim().to_owned())
            } else if let Some((k, v)) = t.split_once('=') {
                Requirement::Equals(key(k, t)?, v.trim().to_owned())
            } else if let Some((k, v)) = t.split_once(" notin ") {
                Requirement::NotIn(key(k, t)?, set(v, t)?)
            } else if let Some((k, v)) = t.split_once(" in ") {
                Requirement::In(key(k, t)?, set(v, t)?)
            } else {
                Requirement::Exists(key(t, t)?)
            };
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.matches_by(|key| labels.get(key).map(String::as_str))
    }

    /// [`Selector::matches`] against labels read by key, so a list need not copy every
    /// object's labels to select among them.
    pub fn matches_by<'l>(&self, label: impl Fn(&str) -> Option<&'l str>) -> bool {
        let is_one_of = |vs: &[String], l: &str| vs.iter().any(|v| v == l);
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => label(k) == Some(v.as_str()),
            // As in Kubernetes, `!=` and `notin` also match objects without the key.
            Requirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            Requirement::In(k, vs) => label(k).is_some_and(|l| is_one_of(vs, l)),
            Requirement::NotIn(k, vs) => label(k).is_none_or(|l| !is_one_of(vs, l)),
            Requirement::Exists(k) => label(k).is_some(),
            Requirement::NotExists(k) => label(k).is_none(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn full_syntax() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("a.io/x", "")]);
        let yes = [
            "",
            "app=web",
            "app==web",
            "app!=db",
            "missing!=x",
            "app in (web, db)",
            "app notin (db)",
            "missing notin (db)",
            "app",
            "a.io/x",
            "!missing",
            "app=web,tier in (front,back),!missing",
        ];
        for s in yes {
            assert!(Selector::parse(s).unwrap().matches(&l), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "app in (db)",
            "app notin (web,db)",
            "missing",
            "!app",
            "app=web,tier=back",
        ];
        for s in no {
            assert!(!Selector::parse(s).unwrap().matches(&l), "{s}");
        }
    }

    #[test]
    fn errors() {
        assert!(Selector::parse("app in web").is_err());
        assert!(Selector::parse("app in (web").is_err());
        assert!(Selector::parse("=web").is_err());
        assert!(Selector::parse("a b").is_err());
    }
}
