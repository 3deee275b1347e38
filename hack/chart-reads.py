#!/usr/bin/env python3
"""Derives the stock rule set (resolver/stock-rules.yaml) from a cozystack/cozystack checkout.

Usage: hack/chart-reads.py COZYSTACK_CHECKOUT [--check resolver/stock-rules.yaml [--release NAME]]
       hack/chart-reads.py --render docs/stock-rules.md [--stock resolver/stock-rules.yaml]

The stock rule set is data (resolver/stock-rules.yaml): resolver/build.rs compiles it into the
module, --check compares it with what the charts say, and --render writes its three tables into
the document that explains them, so the Markdown is generated, never read as code.

For every ApplicationDefinition (packages/system/*-rd/cozyrds/*.yaml) it follows the chart the
definition installs, as Cozystack resolves it: `spec.release.chartRef` names an ExternalArtifact,
which the PackageSources (packages/core/platform/sources/*.yaml) build as
`<source>-<variant>-<component>` from a component's path (internal/operator/package_reconciler.go).
Inside a chart it reads only template actions (`{{ ... }}`; comments and plain text are not reads):
a provider class is consumed when an action reads `.Values._namespace.<class>` (directly, through
`index`, through a variable holding `_namespace`, or through a helper such as `cozy-lib.ns-<class>`
that reads it), and every HelmRelease the chart renders from another artifact with the tenant's
`cozystack-values` is followed the same way, recursively (Monitoring's `monitoring-system`,
Bucket's `bucket-system`, ComputePlane's `kubernetes`). A `gateway` read that the same chart falls
back from to an Ingress when it is empty (`if not $gateway`) is optional: nothing waits for it.

From the Tenant chart (packages/apps/tenant) it derives what a module provides (a class whose
namespace value `namespace.yaml` sets to the tenant when the switch is on, and hands down to
every descendant: share children), and the release each module template names (the slot) with
its switch; a system chart that renders an instance into a fixed namespace (BootBox) names a
cluster-wide slot. Visibility is `module` for a definition with `dashboard.module: true`,
`hidden` for a kind the Tenant chart renders without a definition (Gateway), `catalog` else.

It prints every kind it examined, one line each, with the evidence of every column; a kind that
reads nothing is a line too. With --check it compares every derived column with the table and
its list of kinds that take no rules, and exits 1 on a difference. Protection is the design's
choice (community#39), not a chart's, and is not derived.
"""

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

CLASSES = ("etcd", "ingress", "gateway", "monitoring", "seaweedfs")
CLASS = "|".join(CLASSES)
# Charts that hand the classes down to their children instead of using them.
PROPAGATORS = {"Tenant"}

ACTION = re.compile(r"\{\{(.*?)\}\}", re.S)
COMMENT = re.compile(r"^-?\s*/\*.*\*/\s*-?$", re.S)
DIRECT = re.compile(r"_namespace(?:\s*\|\s*default\s+dict\s*\))?\.(" + CLASS + r")\b")
INDEXED = re.compile(r"index\s+\(?\$?\.Values\._namespace[^\"]*\"(" + CLASS + r")\"")
ALIAS = re.compile(r"\$(\w+)\s*:?=\s*\(?\s*\$?\.Values\._namespace\b(?!\.)")
INCLUDE = re.compile(r"\b(?:include|template)\s+\"([^\"]+)\"")
DEFINE = re.compile(r"^-?\s*define\s+\"([^\"]+)\"")
OPENS = re.compile(r"^-?\s*(if|range|with|block|define)\b")
ENDS = re.compile(r"^-?\s*end\b")
GATEWAY_VAR = re.compile(r"\$(\w+)\s*:?=[^\n]*_namespace[^\n]*\.gateway\b")


@dataclass
class Definition:
    kind: str
    name: str
    prefix: str
    module: bool
    artifact: str
    file: str


@dataclass
class Reads:
    """The classes a chart reads: {class: sorted evidence}, and the optional ones."""
    found: dict = field(default_factory=dict)
    optional: dict = field(default_factory=dict)

    def add(self, cls, evidence):
        self.found.setdefault(cls, set()).add(evidence)

    def merge(self, other):
        for cls, evidence in other.found.items():
            for e in evidence:
                self.add(cls, e)
        self.optional.update(other.optional)


def load(path):
    """The YAML documents of a plain (untemplated) file; a templated one yields nothing."""
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    except yaml.YAMLError:
        return []


def definitions(root):
    for path in sorted(root.glob("packages/system/*-rd/cozyrds/*.yaml")):
        for doc in load(path):
            if doc.get("kind") != "ApplicationDefinition":
                continue
            spec = doc.get("spec") or {}
            release = spec.get("release") or {}
            yield Definition(
                kind=spec["application"]["kind"],
                name=doc["metadata"]["name"],
                prefix=release.get("prefix", ""),
                module=bool((spec.get("dashboard") or {}).get("module")),
                artifact=(release.get("chartRef") or {}).get("name", ""),
                file=str(path.relative_to(root)),
            )


def artifacts(root):
    """{ExternalArtifact name: chart folder} from every PackageSource's components."""
    table = {}
    for path in sorted(root.glob("packages/core/platform/sources/*.yaml")):
        for doc in load(path):
            if doc.get("kind") != "PackageSource":
                continue
            source = doc["metadata"]["name"].replace(".", "-")
            for variant in (doc.get("spec") or {}).get("variants") or []:
                for component in variant.get("components") or []:
                    name = f"{source}-{variant['name'].replace('.', '-')}-{component['name'].replace('.', '-')}"
                    table[name] = root / "packages" / component["path"].strip("/")
    return table


def actions(text):
    """The template actions of a file, comments dropped, each with whether it sits in a define."""
    depth, in_define = 0, None
    for match in ACTION.finditer(text):
        body = match.group(1).strip()
        if COMMENT.match(body):
            continue
        name = DEFINE.match(body)
        if name:
            in_define, depth = name.group(1), 0
            continue
        if in_define is not None:
            if OPENS.match(body):
                depth += 1
            elif ENDS.match(body):
                if depth == 0:
                    in_define = None
                    continue
                depth -= 1
        yield in_define, body


def direct_reads(bodies):
    """The classes a run of actions reads without a helper, and the helpers it includes."""
    aliases, classes, includes = set(), set(), set()
    for body in bodies:
        aliases.update(ALIAS.findall(body))
    for body in bodies:
        classes.update(DIRECT.findall(body))
        classes.update(INDEXED.findall(body))
        for alias in aliases:
            classes.update(re.findall(r"\$" + alias + r"\.(" + CLASS + r")\b", body))
        includes.update(INCLUDE.findall(body))
    return classes, includes


def templates(chart):
    return sorted(p for p in chart.glob("templates/**/*") if p.is_file() and p.suffix in (".yaml", ".tpl", ".yml"))


class Checkout:
    def __init__(self, root):
        self.root = root
        self.artifacts = artifacts(root)
        self.helpers = {}
        for chart in sorted(root.glob("packages/library/*")):
            self._collect_helpers(chart)

    def rel(self, path):
        return str(path.relative_to(self.root))

    def _collect_helpers(self, chart):
        bodies = {}
        for path in templates(chart):
            for name, body in actions(path.read_text()):
                if name is not None:
                    bodies.setdefault(name, (path, []))[1].append(body)
        for name, (path, body) in bodies.items():
            classes, includes = direct_reads(body)
            self.helpers[name] = (self.rel(path), classes, includes)

    def helper_reads(self, name, seen=None):
        """{class: evidence} a helper reads, through the helpers it includes."""
        seen = seen if seen is not None else set()
        if name in seen or name not in self.helpers:
            return {}
        seen.add(name)
        path, classes, includes = self.helpers[name]
        found = {cls: f"{path} ({name})" for cls in classes}
        for inner in includes:
            for cls, evidence in self.helper_reads(inner, seen).items():
                found.setdefault(cls, evidence)
        return found

    def reads(self, chart, seen=None):
        """What a chart reads, and what the charts it wraps with the tenant's values read."""
        seen = seen if seen is not None else set()
        result = Reads()
        if chart in seen or not (chart / "templates").is_dir():
            return result
        seen.add(chart)
        self._collect_helpers(chart)
        falls_back = False
        for path in templates(chart):
            text = path.read_text()
            bodies = [body for name, body in actions(text) if name is None]
            classes, includes = direct_reads(bodies)
            for cls in classes:
                result.add(cls, self.rel(path))
            for name in includes:
                for cls, evidence in self.helper_reads(name).items():
                    result.add(cls, evidence)
            gateway_vars = set(GATEWAY_VAR.findall(text))
            if any(re.search(r"\bif\s+not\s+\$" + v + r"\b", b) for v in gateway_vars for b in bodies):
                falls_back = True
            for artifact in wrapped(text):
                inner = self.artifacts.get(artifact)
                if inner is not None:
                    result.merge(self.reads(inner, seen))
        if falls_back and "gateway" in result.found and "ingress" in result.found:
            result.optional["gateway"] = "falls back to an Ingress when empty"
        return result


def wrapped(text):
    """The ExternalArtifacts of the HelmReleases a template renders with the tenant's values."""
    for doc in re.split(r"^---\s*$", text, flags=re.M):
        if not re.search(r"^kind:\s*HelmRelease\s*$", doc, re.M) or "cozystack-values" not in doc:
            continue
        yield from re.findall(r"kind:\s*ExternalArtifact\s*\n\s*name:\s*([a-z0-9-]+)", doc)


@dataclass
class Named:
    """A release a chart renders for a kind: its name, namespace (None: the tenant's) and switch."""
    kind: str
    release: str
    namespace: object
    switch: object
    file: str
    artifact: str


def named_instances(checkout, by_artifact):
    """Every release the Tenant chart or a system chart names for a kind, with its switch."""
    found = []
    root = checkout.root
    for path in sorted(root.glob("packages/apps/tenant/templates/*.yaml")) + sorted(root.glob("packages/system/*/templates/**/*.yaml")):
        text = path.read_text()
        for doc in re.split(r"^---\s*$", text, flags=re.M):
            if not re.search(r"^kind:\s*HelmRelease\s*$", doc, re.M):
                continue
            artifact = re.search(r"kind:\s*ExternalArtifact\s*\n\s*name:\s*([a-z0-9-]+)", doc)
            name = re.search(r"^  name:\s*([a-z0-9-]+)\s*$", doc, re.M)
            label = re.search(r"apps\.cozystack\.io/application\.kind:\s*(\w+)", doc)
            if not (artifact and name):
                continue
            kind = by_artifact.get(artifact.group(1)) or (label.group(1) if label else None)
            if kind is None or kind in PROPAGATORS:
                continue
            namespace = re.search(r"^  namespace:\s*([a-z0-9-]+)\s*$", doc, re.M)
            tenant = "packages/apps/tenant/" in str(path)
            if not tenant and namespace is None:
                continue
            switch = None
            if tenant:
                guard = re.search(r"\{\{-?\s*if\s+(?:\.Values\.(\w+)|eq \(include \"tenant\.(\w+)Effective\" \.\) \"true\")\s*-?\}\}", text)
                switch = (guard.group(1) or guard.group(2)) if guard else None
            found.append(Named(kind, name.group(1), None if tenant else namespace.group(1), switch, checkout.rel(path), artifact.group(1)))
    return found


RELEASE_NAME = re.compile(r"\{\{-?\s*\$?\.Release\.Name\s*-?\}\}")
NAME_LINE = re.compile(r"^  name:\s*(.+?)\s*$", re.M)
NAMESPACE_LINE = re.compile(r"^  namespace:\s*(\S+)\s*$", re.M)


@dataclass
class Rendered:
    """A HelmRelease name a chart renders: its namespace (None: the tenant's), the kind its app
    labels name (None: no app release), the file, and when (a switch, "always", or "package")."""
    release: str
    namespace: object
    kind: object
    file: str
    when: str


def helm_releases(text):
    """(name, namespace, kind label, artifact) of every HelmRelease document of a template."""
    for doc in re.split(r"^---\s*$", text, flags=re.M):
        if not re.search(r"^kind:\s*HelmRelease\s*$", doc, re.M):
            continue
        name = NAME_LINE.search(doc)
        if not name:
            continue
        namespace = NAMESPACE_LINE.search(doc)
        label = re.search(r"apps\.cozystack\.io/application\.kind:\s*(\w+)", doc)
        artifact = re.search(r"kind:\s*ExternalArtifact\s*\n\s*name:\s*([a-z0-9-]+)", doc)
        yield (name.group(1), namespace.group(1) if namespace else None,
               label.group(1) if label else None, artifact.group(1) if artifact else None)


def rendered_names(checkout, named):
    """Every HelmRelease name a stock install renders under a fixed name: each named instance
    (the Tenant chart's modules, `info` among them, and a system chart's instance in a fixed
    namespace), then what its own chart renders in its namespace with its release name filled
    in (Monitoring's `monitoring-system`), recursively through the charts those render. A name
    still templated after that (an app's `{{ .Release.Name }}-system`) is not fixed, and left out."""
    found = {}

    def add(release, namespace, kind, file, when):
        found.setdefault((release, namespace), Rendered(release, namespace, kind, file, when))

    def follow(chart, release, namespace, when, seen):
        if chart is None or chart in seen:
            return
        for path in templates(chart):
            for name, ns, kind, artifact in helm_releases(path.read_text()):
                name = RELEASE_NAME.sub(release, name)
                if "{{" in name or (ns is not None and "Release.Namespace" not in ns):
                    continue
                add(name, namespace, kind, checkout.rel(path), when)
                follow(checkout.artifacts.get(artifact), name, namespace, when, seen | {chart})

    for n in named:
        when = n.switch or ("always" if n.namespace is None else "package")
        add(n.release, n.namespace, n.kind, n.file, when)
        follow(checkout.artifacts.get(n.artifact), n.release, n.namespace, when, frozenset())
    return sorted(found.values(), key=lambda r: (r.namespace or "", r.release))


RENDERED_HEADER = ["release", "namespace", "kind", "when", "rendered by"]


def rendered_row(r):
    """A rendered name as the document's table states it."""
    when = r.when if r.when in ("always", "package") else f"switch {r.when}"
    return [r.release, r.namespace or "the tenant's", r.kind or "—", when, f"`{r.file}`"]


def provided(root):
    """{switch key: class} the Tenant chart sets to the tenant itself (`namespace.yaml`)."""
    text = (root / "packages/apps/tenant/templates/namespace.yaml").read_text()
    table = {}
    for cls in CLASSES:
        plain = re.search(r"if \.Values\.(\w+) \}\}\s*\{\{-? \$" + cls + r" = \$tenantName", text)
        effective = re.search(r"if eq \(include \"tenant\.(\w+)Effective\" \.\) \"true\" \}\}\s*\{\{-? \$" + cls + r" = \$tenantName", text)
        match = plain or effective
        if match:
            table[match.group(1)] = cls
    return table


NAME_CHECK = re.compile(r"if\s+ne\s+\.Release\.Name\s+\.Chart\.Name\s*-?\}\}\s*\{\{-?\s*fail\b")


def off_slot(checkout, chart):
    """What an instance released under another name than its slot does, from its chart: one
    whose chart fails on any release name but its own never renders; one whose post-delete
    hook deletes PersistentVolumeClaims runs, and deleting it drops its volumes."""
    if chart is None:
        return "runs", []
    files = templates(chart)
    for path in files:
        if NAME_CHECK.search(path.read_text()):
            return "never renders", [checkout.rel(path)]
    for path in files:
        text = path.read_text()
        if "post-delete" in text and re.search(r"persistentvolumeclaims", text) and re.search(r"\bdelete\b", text):
            return "runs; deleting it drops its volumes", [checkout.rel(path)]
    return "runs", []


@dataclass
class Row:
    kind: str
    visibility: str
    cardinality: str
    provides: list
    consumes: list
    share: str
    slots: str
    prefix: str
    evidence: dict
    optional: dict
    named: str
    off_slot: str
    off_slot_evidence: list
    named_files: list


def derive(root):
    """The rule rows, one per kind examined, and the names the charts render."""
    checkout = Checkout(root)
    defs = list(definitions(root))
    by_artifact = {d.artifact: d.kind for d in defs}
    named = named_instances(checkout, by_artifact)
    provides_of = provided(root)
    rows = {}
    kinds = {d.kind: d for d in defs}
    for n in named:
        kinds.setdefault(n.kind, None)
    for kind, definition in sorted(kinds.items()):
        chart = checkout.artifacts.get(definition.artifact) if definition else None
        reads = Reads() if chart is None or kind in PROPAGATORS else checkout.reads(chart)
        mine = [n for n in named if n.kind == kind]
        provides = sorted({provides_of[n.switch] for n in mine if n.switch in provides_of})
        if mine and all(n.namespace is None for n in mine):
            cardinality = "tenant/1"
            slots = ", ".join(sorted({n.release for n in mine}))
        elif mine:
            cardinality = "cluster/1"
            slots = ", ".join(sorted({f"{n.release} (in {n.namespace})" for n in mine}))
        else:
            cardinality, slots = "—", "—"
        if definition is None:
            visibility = "hidden"
        else:
            visibility = "module" if definition.module else "catalog"
        # A kind without a definition is found through the release that names it (Gateway).
        own_chart = chart or next((checkout.artifacts.get(n.artifact) for n in mine if checkout.artifacts.get(n.artifact)), None)
        behaviour, behaviour_evidence = off_slot(checkout, own_chart) if mine else ("—", [])
        rows[kind] = Row(
            kind=kind,
            visibility=visibility,
            cardinality=cardinality,
            provides=provides,
            consumes=sorted(c for c in reads.found if c not in reads.optional),
            share="children" if provides else "—",
            slots=slots,
            prefix=definition.prefix if definition else "",
            evidence={c: sorted(e) for c, e in reads.found.items()},
            optional=reads.optional,
            off_slot=behaviour,
            off_slot_evidence=behaviour_evidence,
            named_files=sorted({n.file for n in mine}),
            named="; ".join(f"{n.file} ({n.release}, {'switch ' + n.switch if n.switch else 'always rendered' if n.namespace is None else 'namespace ' + n.namespace})" for n in mine) or "—",
        )
    return rows, rendered_names(checkout, named)


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


RULE_HEADER = ["kind", "visibility", "cardinality", "protection", "provides", "consumes", "share",
               "read in", "slots", "off its slot", "named by", "release prefix"]
PLAIN_HEADER = ["kind", "release prefix", "chart"]
RELEASE_HEADER = ["release", "commit", "version stamp", "ancestor labels", "lacks", "off its slot",
                  "cozystack-api refuses before admission", "cozystack-api's dry run"]
STOCK = Path(__file__).resolve().parent.parent / "resolver" / "stock-rules.yaml"


def load_stock(path=STOCK):
    return yaml.safe_load(Path(path).read_text())


def quoted_prefix(prefix):
    return f"`{prefix}`" if prefix else '`""`'


def kind_cells(entry):
    """A kind of the stock rule set as its table's cells, each column as the document shows it."""
    def listed_cell(key):
        return ", ".join(entry.get(key) or []) or "—"
    slots = listed_cell("slots")
    if entry.get("slotNamespace"):
        slots += f" (in {entry['slotNamespace']})"
    protection = entry.get("protection") or {}
    return {
        "kind": entry["kind"],
        "visibility": entry["visibility"],
        "cardinality": entry.get("cardinality", "—"),
        "protection": ", ".join(f"{k}: {v}" for k, v in protection.items()) or "—",
        "provides": listed_cell("provides"),
        "consumes": listed_cell("consumes"),
        "share": entry.get("share", "—"),
        "read in": entry.get("readIn", "—"),
        "slots": slots,
        "off its slot": entry.get("offSlot", "—"),
        "named by": entry.get("namedBy", "—"),
        "release prefix": quoted_prefix(entry["releasePrefix"]),
    }


def plain_cells(entry):
    return {"kind": entry["kind"], "release prefix": quoted_prefix(entry["releasePrefix"]), "chart": entry["chart"]}


def rendered_cells(entry):
    return [entry["release"], entry.get("namespace") or "the tenant's", entry.get("kind") or "—",
            entry["when"], f"`{entry['renderedBy']}`"]


def release_cells(entry):
    """A row of the support matrix as the document shows it."""
    off_slot = entry.get("offSlot") or {}
    return [entry["release"], f"`{entry['commit']}`", str(entry["versionStamp"]), entry["ancestorLabels"],
            ", ".join(entry.get("lacks") or []) or "—",
            "; ".join(f"{k}: {v}" for k, v in sorted(off_slot.items())) or "as above",
            ", ".join(entry.get("apiRefuses") or []) or "—", entry["apiDryRun"]]


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def stock_tables(stock):
    """The document's three tables, generated from the stock rule set: rules, no rules, rendered."""
    return [
        markdown(RULE_HEADER, [[kind_cells(e)[c] for c in RULE_HEADER] for e in stock["kinds"]]),
        markdown(PLAIN_HEADER, [[plain_cells(e)[c] for c in PLAIN_HEADER] for e in stock["unruled"]]),
        markdown(RENDERED_HEADER, [rendered_cells(e) for e in stock["rendered"]]),
        markdown(RELEASE_HEADER, [release_cells(e) for e in stock.get("releases", [])]),
    ]


def render(document, stock):
    """`document` with each of its tables replaced by the one generated under the same header."""
    generated = {tuple(cells(t[0])): t for t in stock_tables(stock)}
    lines, out, at = Path(document).read_text().splitlines(), [], 0
    while at < len(lines):
        table = generated.get(tuple(cells(lines[at]))) if lines[at].startswith("|") else None
        if table is None:
            out.append(lines[at])
            at += 1
            continue
        out += table
        while at < len(lines) and lines[at].startswith("|"):
            at += 1
    return "\n".join(out) + "\n"


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def tables(stock):
    """The stock rule set as the derivation compares it: {kind: {column: cell}} of the kinds
    with rules, and of the kinds examined that take none."""
    return ({e["kind"]: kind_cells(e) for e in stock["kinds"]},
            {e["kind"]: plain_cells(e) for e in stock.get("unruled", [])})


def rendered_table(stock):
    """The stock rule set's rendered names as the document's rows of cells."""
    return [rendered_cells(e) for e in stock.get("rendered", [])]


def compare_rendered(rendered, stock):
    """Every difference between the derived rendered names and the document's table."""
    documented = rendered_table(stock)
    derived = [rendered_row(r) for r in rendered]
    problems = []
    for row in derived:
        if row not in documented:
            problems.append(f"rendered names: the charts render {' | '.join(row)}, the stock rule set has no such row")
    for row in documented:
        if row not in derived:
            problems.append(f"rendered names: the stock rule set lists {' | '.join(row)}, the charts render no such name")
    return problems


def listed(cell):
    return [] if cell in ("", "—") else sorted(c.strip() for c in cell.split(","))


def prefix_cell(cell):
    return cell.strip("`").strip('"')


def compare(rows, stock):
    """Every difference between the derived rows and the document, one line each."""
    rules, plain = tables(stock)
    problems = []
    for kind, row in sorted(rows.items()):
        has_rules = row.provides or row.consumes or row.visibility != "catalog" or row.cardinality != "—"
        if kind in PROPAGATORS:
            has_rules = False
        if not has_rules:
            if kind in rules:
                problems.append(f"{kind}: the charts give it no rule, the stock rule set has a row for it")
            elif kind not in plain:
                problems.append(f"{kind}: examined, but the stock rule set lists it neither among the rules nor among the kinds that take none")
            elif prefix_cell(plain[kind]["release prefix"]) != row.prefix:
                problems.append(f"{kind}: release prefix: the charts say {row.prefix!r}, the stock rule set {prefix_cell(plain[kind]['release prefix'])!r}")
            continue
        documented = rules.get(kind)
        if documented is None:
            problems.append(f"{kind}: the charts give it rules ({describe(row)}), the stock rule set has no row for it")
            continue
        derived = {
            "visibility": row.visibility,
            "cardinality": row.cardinality,
            "provides": row.provides,
            "consumes": row.consumes,
            "share": row.share,
            "slots": row.slots,
            "off its slot": row.off_slot,
            "release prefix": row.prefix,
        }
        # The evidence column names the files: each one the derivation found must be there.
        named_cell = documented.get("named by", "")
        for n in row.named_files:
            if n not in named_cell:
                problems.append(f"{kind}: named by: the charts name it in {n}, the stock rule set says {named_cell}")
        # And each chart folder a consumed class is read in must be named where it is read.
        read_cell = documented.get("read in", "")
        folders = {"/".join(e.split("/")[:3]) for c in row.consumes for e in row.evidence.get(c, [])}
        for folder in sorted(folders):
            if folder not in read_cell:
                problems.append(f"{kind}: read in: the charts read {', '.join(row.consumes)} in {folder}, the stock rule set says {read_cell}")
        if not row.named_files and named_cell not in ("", "—"):
            problems.append(f"{kind}: named by: no chart names it, the stock rule set says {named_cell}")
        for column, value in derived.items():
            cell = documented.get(column, "")
            stated = listed(cell) if isinstance(value, list) else prefix_cell(cell) if column == "release prefix" else cell
            if column == "slots" and cell not in ("", "—"):
                stated = ", ".join(sorted(s.strip() for s in cell.split(",")))
            if stated != value:
                problems.append(f"{kind}: {column}: the charts say {show(value)}, the stock rule set says {show(stated)}")
    for kind in sorted(set(rules) | set(plain)):
        if kind not in rows:
            problems.append(f"{kind}: the stock rule set names it, the checkout has no such kind")
    return problems


def release_view(stock, name):
    """The stock rule set as release `name` of the support matrix (`releases`) has it: the kinds
    it lacks gone, with their switches' rendered names, and its own off-slot behaviours."""
    release = next((r for r in stock.get("releases", []) if r["release"] == name), None)
    if release is None:
        raise SystemExit(f"{name}: no such release in the stock rule set's releases")
    lacks = set(release.get("lacks") or [])
    gone_switches = {slot for e in stock["kinds"] if e["kind"] in lacks for slot in e.get("slots") or []}
    off_slot = release.get("offSlot") or {}
    kinds = [dict(e, offSlot=off_slot.get(e["kind"], e.get("offSlot"))) if e.get("offSlot") else e
             for e in stock["kinds"] if e["kind"] not in lacks]
    rendered = [r for r in stock["rendered"]
                if r.get("kind") not in lacks and r["when"] not in {f"switch {k}" for k in gone_switches}]
    view = dict(stock, kinds=kinds, rendered=rendered,
                unruled=[e for e in stock["unruled"] if e["kind"] not in lacks])
    return view, release


def read(root, path):
    try:
        return (Path(root) / path).read_text()
    except OSError:
        return ""


def release_facts(root):
    """What a checkout's release does that the rule rows do not say: the ancestor labels its
    Tenant chart writes, its migration stamp, and cozystack-api's validations before admission.
    Each value comes with the file it was read in."""
    namespace = read(root, "packages/apps/tenant/templates/namespace.yaml")
    helpers = read(root, "packages/apps/tenant/templates/_helpers.tpl")
    if 'include "tenant.ancestorTenantLabels"' in namespace and 'define "tenant.ancestorTenantLabels"' in helpers:
        ancestors = "full"
    elif re.search(r'splitList "-" \.Release\.Namespace', namespace) and "tenant.cozystack.io/{{" in namespace:
        ancestors = "parentPrefixes"
    else:
        ancestors = "unknown"
    stamp = re.search(r"^\s*targetVersion:\s*(\d+)", read(root, "packages/core/platform/values.yaml"), re.M)
    rest = read(root, "pkg/registry/apps/application/rest.go")
    refuses = ["tenantResourceQuotas"] if "validateTenantResourceQuotas(ctx" in rest else []
    # Update creates through r.Create with fresh CreateOptions, or updates the release with
    # fresh UpdateOptions: the request's dryRun never reaches the write.
    drops = ("r.Create(ctx, obj, createValidation, &metav1.CreateOptions{})" in rest
             or "UpdateOptions{Raw: &metav1.UpdateOptions{}}" in rest)
    return {
        "ancestorLabels": (ancestors, "packages/apps/tenant/templates/{namespace.yaml,_helpers.tpl}"),
        "versionStamp": (int(stamp.group(1)) if stamp else None, "packages/core/platform/values.yaml targetVersion"),
        "apiRefuses": (refuses, "pkg/registry/apps/application/rest.go"),
        "apiDryRun": ("ignored" if drops else "honoured", "pkg/registry/apps/application/rest.go Update"),
    }


def compare_release(facts, release):
    """Every difference between a checkout's release facts and the matrix's row."""
    problems = []
    for key, (value, where) in facts.items():
        stated = release.get(key) or ([] if key == "apiRefuses" else None)
        if stated != value:
            problems.append(f"release {release['release']}: {key}: {where} says {value}, the stock rule set says {stated}")
    return problems


def show(value):
    if isinstance(value, list):
        return "[" + ", ".join(value) + "]" if value else "—"
    return repr(value) if value == "" else value


def describe(row):
    parts = [row.visibility]
    if row.cardinality != "—":
        parts.append(f"{row.cardinality} held by {row.slots}; off its slot: {row.off_slot}")
    if row.provides:
        parts.append(f"provides {', '.join(row.provides)} to {row.share}")
    parts.append(f"consumes {', '.join(row.consumes) or 'nothing'}")
    if row.optional:
        parts.append("optional " + ", ".join(f"{c} ({why})" for c, why in sorted(row.optional.items())))
    parts.append(f"release prefix {row.prefix!r}")
    return "; ".join(parts)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkout", type=Path, nargs="?")
    parser.add_argument("--check", metavar="STOCK", help="compare with the stock rule set (resolver/stock-rules.yaml)")
    parser.add_argument("--render", metavar="DOC", help="write the stock rule set's tables into DOC (docs/stock-rules.md)")
    parser.add_argument("--stock", metavar="STOCK", default=STOCK, help="the stock rule set --render reads")
    parser.add_argument("--release", metavar="NAME", help="with --check: compare with that release of the support matrix (the checkout is its tag)")
    args = parser.parse_args()
    if args.render:
        Path(args.render).write_text(render(args.render, load_stock(args.stock)))
        return 0
    if args.checkout is None:
        parser.error("a cozystack/cozystack checkout is needed, or --render")
    rows, rendered = derive(args.checkout)
    for kind, row in sorted(rows.items()):
        print(f"{kind}: {describe(row)}")
        for cls, evidence in sorted(row.evidence.items()):
            print(f"    reads {cls}: {', '.join(evidence)}")
        if row.named != "—":
            print(f"    named by {row.named}")
        if row.off_slot_evidence:
            print(f"    off its slot: {', '.join(row.off_slot_evidence)}")
    print(f"{len(rows)} kinds examined")
    for r in rendered:
        print(f"renders {' | '.join(rendered_row(r))}")
    print(f"{len(rendered)} names rendered")
    facts = release_facts(args.checkout)
    for key, (value, where) in facts.items():
        print(f"release: {key} {value} ({where})")
    if not args.check:
        return 0
    stock = load_stock(args.check)
    if args.release:
        stock, release = release_view(stock, args.release)
    else:
        release = next((r for r in stock.get("releases", []) if r["release"] == "main"), None)
    problems = compare(rows, stock) + compare_rendered(rendered, stock)
    if release is not None:
        problems += compare_release(facts, release)
    for problem in problems:
        print(problem, file=sys.stderr)
    if not problems:
        print(f"every column agrees with {args.check}" + (f" (release {release['release']})" if release else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
