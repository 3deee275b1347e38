//! Compiles the stock rule set (`stock-rules.yaml`) into the resolver as data: the set
//! `hack/chart-reads.py` derives from Cozystack's charts and `docs/stock-rules.md` shows as
//! tables generated from the same file is the one the module carries, so they cannot drift. No
//! text is parsed at run time: the generated `builtin.rs` is static arrays the rules are built
//! from when a request needs a kind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Deserialize;

fn main() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("stock-rules.yaml");
    println!("cargo::rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let stock: Stock =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    for (file, code) in [
        ("builtin.rs", generate(&stock)),
        ("releases.rs", releases(&stock)),
    ] {
        let code = code.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let out = out.join(file);
        std::fs::write(&out, code).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Stock {
    /// The cozystack/cozystack commit the set was derived from.
    source: String,
    kinds: Vec<Kind>,
    unruled: Vec<Unruled>,
    rendered: Vec<Rendered>,
    releases: Vec<Release>,
}

/// A row of the support matrix.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Release {
    release: String,
    commit: String,
    version_stamp: u32,
    ancestor_labels: String,
    #[serde(default)]
    lacks: Vec<String>,
    #[serde(default)]
    off_slot: BTreeMap<String, String>,
    #[serde(default)]
    api_refuses: Vec<String>,
    api_dry_run: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Kind {
    kind: String,
    visibility: String,
    /// `scope/max`.
    cardinality: Option<String>,
    #[serde(default)]
    protection: BTreeMap<String, String>,
    #[serde(default)]
    provides: Vec<String>,
    #[serde(default)]
    consumes: Vec<String>,
    share: Option<String>,
    #[serde(default)]
    slots: Vec<String>,
    slot_namespace: Option<String>,
    off_slot: Option<String>,
    release_prefix: String,
    // The evidence: the document's, not the module's.
    #[allow(dead_code)]
    read_in: Option<String>,
    #[allow(dead_code)]
    named_by: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Unruled {
    kind: String,
    release_prefix: String,
    #[allow(dead_code)]
    chart: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Rendered {
    release: String,
    namespace: Option<String>,
    kind: Option<String>,
    /// `always`, `package` or `switch <key>`.
    when: String,
    // The template that renders it is the document's evidence (and the derivation's check),
    // not the module's: its path would be most of the table's bytes.
    #[allow(dead_code)]
    rendered_by: String,
}

/// The `OffSlot` variant a table's text names.
fn off_slot(kind: &str, text: &str) -> Result<&'static str, String> {
    match text {
        "never renders" => Ok("OffSlot::NeverRenders"),
        "runs; deleting it drops its volumes" => Ok("OffSlot::DropsVolumes"),
        "runs" => Ok("OffSlot::Runs"),
        other => Err(format!("{kind}: unknown off-slot behaviour {other:?}")),
    }
}

/// The Rust source of `RELEASES`, the support matrix, checked against the kinds it names.
fn releases(stock: &Stock) -> Result<String, String> {
    let known = |kind: &str| {
        stock.kinds.iter().any(|k| k.kind == kind) || stock.unruled.iter().any(|u| u.kind == kind)
    };
    let mut code =
        "/// The supported Cozystack releases, oldest first, from `stock-rules.yaml`.\npub static RELEASES: &[ReleaseRow] = &[\n".to_owned();
    for r in &stock.releases {
        let name = &r.release;
        if let Some(kind) = r.lacks.iter().chain(r.off_slot.keys()).find(|k| !known(k)) {
            return Err(format!(
                "release {name}: {kind} is no kind of the stock rule set"
            ));
        }
        let ancestor_labels = match r.ancestor_labels.as_str() {
            "full" | "parentPrefixes" => variant(&r.ancestor_labels, "ancestorLabels", name)?,
            other => return Err(format!("release {name}: unknown ancestorLabels {other:?}")),
        };
        let mut off_slots = Vec::new();
        for (kind, text) in &r.off_slot {
            off_slots.push(format!("({kind:?}, {})", off_slot(kind, text)?));
        }
        let mut refuses = Vec::new();
        for validation in &r.api_refuses {
            refuses.push(format!(
                "ApiValidation::{}",
                variant(validation, "apiRefuses", name)?
            ));
        }
        let dry_run = match r.api_dry_run.as_str() {
            "ignored" | "honoured" => variant(&r.api_dry_run, "apiDryRun", name)?,
            other => return Err(format!("release {name}: unknown apiDryRun {other:?}")),
        };
        writeln!(
            code,
            "    ReleaseRow {{ name: {name:?}, commit: {:?}, version_stamp: {}, ancestor_labels: AncestorLabels::{ancestor_labels}, lacks: {}, off_slot: &[{}], api_refuses: &[{}], api_dry_run: ApiDryRun::{dry_run} }},",
            r.commit,
            r.version_stamp,
            list(&r.lacks),
            off_slots.join(", "),
            refuses.join(", "),
        )
        .map_err(|e| e.to_string())?;
    }
    code.push_str("];\n");
    let names: Vec<&str> = stock.releases.iter().map(|r| r.release.as_str()).collect();
    writeln!(
        code,
        "\n/// Their names, for a message.\npub const SUPPORTED: &str = {:?};",
        names.join(", ")
    )
    .map_err(|e| e.to_string())?;
    Ok(code)
}

/// `module` → `Module`: the variant a value names.
fn variant(value: &str, what: &str, kind: &str) -> Result<String, String> {
    let mut chars = value.chars();
    let first = chars.next().ok_or(format!("{kind}: empty {what}"))?;
    Ok(format!("{}{}", first.to_ascii_uppercase(), chars.as_str()))
}

fn list(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| format!("{s:?}")).collect();
    format!("&[{}]", items.join(", "))
}

/// One kind's `BuiltinKind` entry in `KINDS`, a line of Rust.
fn kind_entry(k: &Kind) -> Result<String, String> {
    let name = &k.kind;
    let cardinality = match k.cardinality.as_deref().map(|c| c.split_once('/')) {
        None => "None".to_owned(),
        Some(None) => return Err(format!("{name}: cardinality is scope/max")),
        Some(Some((scope, max))) => {
            let max: u32 = max.parse().map_err(|e| format!("{name}: {e}"))?;
            format!(
                "Some(BuiltinCardinality {{ scope: Scope::{}, max: {max}, slots: {}, slot_namespace: {:?} }})",
                variant(scope, "scope", name)?,
                list(&k.slots),
                k.slot_namespace,
            )
        }
    };
    let mut protection = k.protection.iter();
    let (deletion, edit) = match (protection.next(), protection.next()) {
        (None, _) => ("None", "None"),
        (Some((what, value)), None) => match (what.as_str(), value.as_str()) {
            ("deletion", "protect") => ("Some(Deletion::Protect)", "None"),
            ("edit", "adminOnly") => ("None", "Some(Edit::AdminOnly)"),
            other => return Err(format!("{name}: unknown protection {other:?}")),
        },
        _ => return Err(format!("{name}: one protection a kind")),
    };
    let share = match &k.share {
        None => "None".to_owned(),
        Some(share) => format!("Some(Share::{})", variant(share, "share", name)?),
    };
    let off_slot = match k.off_slot.as_deref() {
        None => "None".to_owned(),
        Some(text) => format!("Some({})", off_slot(name, text)?),
    };
    Ok(format!(
        "    BuiltinKind {{ kind: {name:?}, visibility: Visibility::{}, cardinality: {cardinality}, deletion: {deletion}, edit: {edit}, provides: {}, consumes: {}, share: {share}, off_slot: {off_slot}, release_prefix: {:?} }},",
        variant(&k.visibility, "visibility", name)?,
        list(&k.provides),
        list(&k.consumes),
        k.release_prefix,
    ))
}

/// The Rust source of `SOURCE`, `KINDS`, `UNRULED`, `RENDERED` and `EXAMINED`.
fn generate(stock: &Stock) -> Result<String, String> {
    if stock.source.len() < 7 || !stock.source.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("source {:?} is not a commit", stock.source));
    }
    let mut code = format!(
        "/// The Cozystack commit the built-in rule set was derived from.\npub const SOURCE: &str = \"cozystack/cozystack {}\";\n\n/// The built-in rule set, one entry per kind, from `stock-rules.yaml`.\npub static KINDS: &[BuiltinKind] = &[\n",
        stock.source
    );
    for kind in &stock.kinds {
        code.push_str(&kind_entry(kind)?);
        code.push('\n');
    }
    code.push_str("];\n");
    let mut unruled: Vec<(&str, &str)> = stock
        .unruled
        .iter()
        .map(|u| (u.kind.as_str(), u.release_prefix.as_str()))
        .collect();
    unruled.sort_unstable();
    writeln!(
        code,
        "\n/// The kinds examined at `SOURCE` that take no rule, with their release prefixes, sorted.\npub static UNRULED: &[(&str, &str)] = &{unruled:?};"
    )
    .map_err(|e| e.to_string())?;
    code.push_str(
        "\n/// Every HelmRelease name a stock install renders under a fixed name, from `stock-rules.yaml`.\npub static RENDERED: &[RenderedName] = &[\n",
    );
    for r in &stock.rendered {
        let when = match r.when.split_once(' ') {
            None if r.when == "always" => "When::Always".to_owned(),
            None if r.when == "package" => "When::Package".to_owned(),
            Some(("switch", key)) => format!("When::Switch({key:?})"),
            _ => {
                return Err(format!(
                    "{}: when is always, package or `switch <key>`",
                    r.release
                ));
            }
        };
        writeln!(
            code,
            "    RenderedName {{ release: {:?}, namespace: {:?}, kind: {:?}, when: {when} }},",
            r.release, r.namespace, r.kind,
        )
        .map_err(|e| e.to_string())?;
    }
    code.push_str("];\n");
    let mut examined: Vec<&str> = stock
        .kinds
        .iter()
        .map(|k| k.kind.as_str())
        .chain(unruled.iter().map(|(kind, _)| *kind))
        .collect();
    examined.sort_unstable();
    examined.dedup();
    writeln!(
        code,
        "\n/// Every kind the derivation examined at `SOURCE`, with rules or without, sorted.\npub static EXAMINED: &[&str] = &{examined:?};"
    )
    .map_err(|e| e.to_string())?;
    Ok(code)
}
