//! Compiles the stock rule set of `docs/stock-rules.md` into the resolver as data: the table a
//! person reads (and `hack/chart-reads.py` checks against Cozystack's charts) is the one the
//! module carries, so the two cannot drift. No JSON is parsed at run time: the generated
//! `builtin.rs` is a static array the rules are built from when a request needs a kind.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn main() {
    let table = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/stock-rules.md");
    println!("cargo::rerun-if-changed={}", table.display());
    let text =
        std::fs::read_to_string(&table).unwrap_or_else(|e| panic!("{}: {e}", table.display()));
    let code = generate(&text).unwrap_or_else(|e| panic!("{}: {e}", table.display()));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("builtin.rs");
    std::fs::write(&out, code).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}

/// The Rust source of `SOURCE` and `KINDS` from the document's first table.
fn generate(text: &str) -> Result<String, String> {
    let source = text
        .split("cozystack/cozystack ")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_hexdigit()).next())
        .filter(|sha| sha.len() >= 7)
        .ok_or("no `cozystack/cozystack <commit>` names the commit the table was derived from")?;
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let header = cells(rows.first().ok_or("no table")?);
    let column = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .ok_or(format!("the table has no column {name:?}"))
    };
    let [
        kind,
        visibility,
        cardinality,
        protection,
        provides,
        consumes,
        share,
        slots,
        off_slot,
        prefix,
    ] = [
        "kind",
        "visibility",
        "cardinality",
        "protection",
        "provides",
        "consumes",
        "share",
        "slots",
        "off its slot",
        "release prefix",
    ]
    .map(column);
    let (kind, visibility, cardinality, protection) =
        (kind?, visibility?, cardinality?, protection?);
    let (provides, consumes, share, slots, off_slot, prefix) =
        (provides?, consumes?, share?, slots?, off_slot?, prefix?);
    let mut code = format!(
        "/// The Cozystack commit the built-in rule set was derived from.\npub const SOURCE: &str = \"cozystack/cozystack {source}\";\n\n/// The built-in rule set, one entry per kind, from `docs/stock-rules.md`.\npub static KINDS: &[BuiltinKind] = &[\n"
    );
    for row in rows.iter().skip(2) {
        let cells = cells(row);
        let cell = |i: usize| cells.get(i).copied().unwrap_or_default();
        let none = |c: &str| c.is_empty() || c == "—";
        let list = |c: &str| -> String {
            if none(c) {
                return "&[]".into();
            }
            let items: Vec<String> = c.split(',').map(|s| format!("{:?}", s.trim())).collect();
            format!("&[{}]", items.join(", "))
        };
        let variant = |value: &str, what: &str| -> Result<String, String> {
            let mut chars = value.chars();
            let first = chars.next().ok_or(format!("{row}: empty {what}"))?;
            Ok(format!("{}{}", first.to_ascii_uppercase(), chars.as_str()))
        };
        let card = cell(cardinality);
        let cardinality = match card.split_once('/') {
            None if none(card) => "None".to_owned(),
            None => return Err(format!("{row}: cardinality is scope/max")),
            Some((scope, max)) => {
                let max: u32 = max.parse().map_err(|e| format!("{row}: {e}"))?;
                let slot_cell = cell(slots);
                let (names, namespace) = match slot_cell.split_once(" (in ") {
                    Some((names, ns)) => (names, Some(ns.trim_end_matches(')'))),
                    None => (slot_cell, None),
                };
                format!(
                    "Some(BuiltinCardinality {{ scope: Scope::{}, max: {max}, slots: {}, slot_namespace: {:?} }})",
                    variant(scope, "scope")?,
                    list(names),
                    namespace,
                )
            }
        };
        let (deletion, edit) = match cell(protection).split_once(": ") {
            None if none(cell(protection)) => ("None", "None"),
            Some(("deletion", "protect")) => ("Some(Deletion::Protect)", "None"),
            Some(("edit", "adminOnly")) => ("None", "Some(Edit::AdminOnly)"),
            other => return Err(format!("{row}: unknown protection {other:?}")),
        };
        let share = match cell(share) {
            c if none(c) => "None".to_owned(),
            c => format!("Some(Share::{})", variant(c, "share")?),
        };
        let off_slot = match cell(off_slot) {
            c if none(c) => "None",
            "never renders" => "Some(OffSlot::NeverRenders)",
            "runs; deleting it drops its volumes" => "Some(OffSlot::DropsVolumes)",
            "runs" => "Some(OffSlot::Runs)",
            other => return Err(format!("{row}: unknown off-slot behaviour {other:?}")),
        };
        let release_prefix = cell(prefix).trim_matches('`').trim_matches('"');
        writeln!(
            code,
            "    BuiltinKind {{ kind: {:?}, visibility: Visibility::{}, cardinality: {cardinality}, deletion: {deletion}, edit: {edit}, provides: {}, consumes: {}, share: {share}, off_slot: {off_slot}, release_prefix: {release_prefix:?} }},",
            cell(kind),
            variant(cell(visibility), "visibility")?,
            list(cell(provides)),
            list(cell(consumes)),
        )
        .map_err(|e| e.to_string())?;
    }
    code.push_str("];\n");
    // The kinds examined that take no rule, with their release prefixes; then every kind the
    // derivation examined, the rule rows and those.
    let mut unruled = unruled_kinds(text)?;
    unruled.sort_unstable();
    writeln!(
        code,
        "\n/// The kinds examined at `SOURCE` that take no rule, with their release prefixes, sorted.\npub static UNRULED: &[(&str, &str)] = &{unruled:?};"
    )
    .map_err(|e| e.to_string())?;
    code.push_str(&rendered_names(text)?);
    let mut examined: Vec<&str> = rows
        .iter()
        .skip(2)
        .filter_map(|r| cells(r).get(kind).copied())
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

/// `RENDERED` from the table headed `| release | namespace | kind | when | rendered by |`.
fn rendered_names(text: &str) -> Result<String, String> {
    let header = ["release", "namespace", "kind", "when", "rendered by"];
    let mut lines = text
        .lines()
        .skip_while(|l| !(l.starts_with('|') && cells(l) == header));
    lines.next().ok_or(format!(
        "no `| {} |` table lists the names the charts render",
        header.join(" | ")
    ))?;
    let mut code = String::from(
        "\n/// Every HelmRelease name a stock install renders under a fixed name, from `docs/stock-rules.md`.\npub static RENDERED: &[RenderedName] = &[\n",
    );
    for line in lines.skip(1).take_while(|l| l.starts_with('|')) {
        let [release, namespace, kind, when, by] = cells(line)[..] else {
            return Err(format!("{line}: a rendered name has five cells"));
        };
        // The template that renders it is the document's evidence (and the derivation's
        // check), not the module's: its path would be most of the table's bytes.
        if !by.starts_with("`packages/") {
            return Err(format!(
                "{line}: rendered by names a template under packages/"
            ));
        }
        let namespace = match namespace {
            "the tenant's" => "None".to_owned(),
            ns => format!("Some({ns:?})"),
        };
        let kind = match kind {
            "—" => "None".to_owned(),
            kind => format!("Some({kind:?})"),
        };
        let when = match when.split_once(' ') {
            None if when == "always" => "When::Always".to_owned(),
            None if when == "package" => "When::Package".to_owned(),
            Some(("switch", key)) => format!("When::Switch({key:?})"),
            _ => return Err(format!("{line}: when is always, package or `switch <key>`")),
        };
        writeln!(
            code,
            "    RenderedName {{ release: {release:?}, namespace: {namespace}, kind: {kind}, when: {when} }},"
        )
        .map_err(|e| e.to_string())?;
    }
    code.push_str("];\n");
    Ok(code)
}

/// The rows of the table headed `| kind | release prefix |`: examined, and given no rule.
fn unruled_kinds(text: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut lines = text
        .lines()
        .skip_while(|l| !(l.starts_with('|') && cells(l).starts_with(&["kind", "release prefix"])));
    lines
        .next()
        .ok_or("no `| kind | release prefix |` table lists the kinds examined that take no rule")?;
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| match cells(l).as_slice() {
            [kind, prefix, ..] => Ok((*kind, prefix.trim_matches('`').trim_matches('"'))),
            _ => Err(format!("{l}: a row names a kind and its release prefix")),
        })
        .collect()
}

fn cells(row: &str) -> Vec<&str> {
    row.trim()
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect()
}
