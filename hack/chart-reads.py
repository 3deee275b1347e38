#!/usr/bin/env python3
"""Derives the `consumes` of every app kind from the `_namespace.<class>` reads of its chart.

Usage: hack/chart-reads.py COZYSTACK_CHECKOUT [--check docs/stock-rules.md]

Reads the ApplicationDefinitions of a cozystack/cozystack checkout
(packages/system/*-rd/cozyrds/*.yaml), finds each kind's chart (packages/apps/<name> or
packages/extra/<name>), and collects the provider classes its templates read from the values
the Tenant chart hands down (`.Values._namespace.<class>`), following the HelmReleases a chart
renders from another app chart with the tenant's `cozystack-values` (ComputePlane wraps
apps/kubernetes). Template comments are skipped. With --check it compares the result with the
stock rule table (docs/stock-rules.md) and exits 1 on a difference. Standard library only.
"""

import argparse
import itertools
import re
import sys
from pathlib import Path

CLASSES = ("etcd", "ingress", "gateway", "monitoring", "seaweedfs")
# Reads the derivation leaves out on purpose; docs/stock-rules.md says why.
OPTIONAL = {("Harbor", "gateway"): "falls back to an Ingress when empty"}
# Charts that hand the classes down instead of using them.
PROPAGATORS = {"tenant"}

READ = re.compile(r"_namespace\.(" + "|".join(CLASSES) + r")\b|index \.Values\._namespace \"(" + "|".join(CLASSES) + r")\"")
COMMENT = re.compile(r"\{\{-?\s*/\*.*?\*/\s*-?\}\}", re.S)
WRAPPED = re.compile(r"name:\s*cozystack-[a-z0-9-]+-application-[a-z0-9]+-([a-z0-9-]+)\s*$", re.M)


def definitions(root):
    """(kind, definition name) of every ApplicationDefinition in the checkout."""
    for path in sorted(root.glob("packages/system/*-rd/cozyrds/*.yaml")):
        text = path.read_text()
        kind = re.search(r"^\s{4}kind:\s*(\S+)", text, re.M)
        name = re.search(r"^\s{2}name:\s*(\S+)", text, re.M)
        if kind and name:
            yield kind.group(1), name.group(1)


def chart_dir(root, name):
    for base in ("packages/apps", "packages/extra"):
        candidate = root / base / name
        if (candidate / "templates").is_dir():
            return candidate
    return None


def reads(root, chart, seen=None):
    """{class: [template paths]} of a chart and of the app charts it wraps."""
    seen = seen if seen is not None else set()
    if chart in seen:
        return {}
    seen.add(chart)
    found = {}
    for path in sorted(chart.glob("templates/**/*")):
        if not path.is_file() or path.suffix not in (".yaml", ".tpl"):
            continue
        text = COMMENT.sub("", path.read_text())
        for match in READ.finditer(text):
            cls = match.group(1) or match.group(2)
            found.setdefault(cls, []).append(str(path.relative_to(root)))
        # A HelmRelease of another app chart, fed the tenant's values, reads for this kind too.
        if "kind: HelmRelease" in text and "cozystack-values" in text:
            for wrapped in WRAPPED.findall(text):
                inner = chart_dir(root, wrapped)
                if inner is not None and inner.parent.name == "apps":
                    for cls, paths in reads(root, inner, seen).items():
                        found.setdefault(cls, []).extend(paths)
    return {cls: sorted(set(paths)) for cls, paths in found.items()}


def derive(root):
    table = {}
    for kind, name in definitions(root):
        chart = chart_dir(root, name)
        if chart is None or name in PROPAGATORS:
            continue
        found = reads(root, chart)
        consumes = sorted(c for c in found if (kind, c) not in OPTIONAL)
        table[kind] = (consumes, found)
    return table


def documented_table(path):
    text = Path(path).read_text()
    lines = text.splitlines()
    start = next(i for i, l in enumerate(lines) if l.startswith("|"))
    rows = list(itertools.takewhile(lambda l: l.startswith("|"), lines[start:]))
    table = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        consumes = [] if cells[5] in ("", "—") else [c.strip() for c in cells[5].split(",")]
        table[cells[0]] = sorted(consumes)
    return table


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkout", type=Path)
    parser.add_argument("--check", metavar="TABLE", help="compare with the stock rule table (docs/stock-rules.md)")
    args = parser.parse_args()
    derived = derive(args.checkout)
    for kind, (consumes, found) in sorted(derived.items()):
        if not found:
            continue
        detail = "; ".join(f"{c}: {', '.join(p)}" for c, p in sorted(found.items()))
        left_out = [c for c in found if (kind, c) in OPTIONAL]
        note = f" (left out: {', '.join(f'{c} {OPTIONAL[(kind, c)]}' for c in left_out)})" if left_out else ""
        print(f"{kind}: consumes [{', '.join(consumes)}]{note}\n    {detail}")
    if not args.check:
        return 0
    documented = documented_table(args.check)
    problems = []
    for kind, (consumes, _) in sorted(derived.items()):
        if consumes and documented.get(kind) != consumes:
            problems.append(f"{kind}: the charts read {consumes}, docs/stock-rules.md says {documented.get(kind)}")
    for kind, consumes in sorted(documented.items()):
        if consumes and derived.get(kind, ([], {}))[0] != consumes:
            problems.append(f"{kind}: docs/stock-rules.md says {consumes}, the charts read {derived.get(kind, ([], {}))[0]}")
    for problem in dict.fromkeys(problems):
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
