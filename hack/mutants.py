#!/usr/bin/env python3
"""The simulator's mutation score: plant each defect of hack/mutants.txt alone in the resolver
or the stock rule set, build the module with it, and see whether `make simulate-ci`'s runs break
a promise (killed) and whether the e2e scenarios fail. The CLI and the scenario runner are built
once from the landed tree, so only the module carries the defect.

    python3 hack/mutants.py                 # every defect, the score and a table
    python3 hack/mutants.py --only row-edit,count-off-by-one
    python3 hack/mutants.py --list          # check every block against its file, no build

A killed defect's counterexample (an e2e scenario) is run on the defective module, where it must
fail, and on the landed one, where it must pass. Exit 1 when the score is under --target.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "target" / "mutants"
WASM = ROOT / "target/wasm32-wasip1/wasm/cozystack_capabilities_policy.wasm"

# `make simulate-ci`'s streams: each deployment it plays, as data.
STREAMS = "e2e/simulate/streams.yaml"


@dataclass
class Mutant:
    id: str
    file: str
    says: str
    find: list = field(default_factory=list)
    replace: list = field(default_factory=list)
    equivalent: str = ""

    def apply(self, text):
        """The file's text with the defect planted; ValueError unless the block occurs once."""
        find = "\n".join(self.find) + "\n"
        count = text.count(find)
        if count != 1:
            raise ValueError(f"{self.id}: the block occurs {count} times in {self.file}")
        replace = "\n".join(self.replace) + "\n" if self.replace else ""
        return text.replace(find, replace)


def parse(text):
    """The defects of a hack/mutants.txt text, in order."""
    mutants = []
    for line in text.splitlines():
        if line.startswith("## "):
            parts = [p.strip() for p in line[3:].split("|")]
            if len(parts) != 3:
                raise ValueError(f"malformed heading: {line}")
            mutants.append(Mutant(*parts))
        elif not mutants or line.startswith("#") or not line.strip():
            continue
        elif line.startswith("- ") or line == "-":
            mutants[-1].find.append(line[2:])
        elif line.startswith("+ ") or line == "+":
            mutants[-1].replace.append(line[2:])
        elif line.startswith("= equivalent:"):
            mutants[-1].equivalent = line.split(":", 1)[1].strip()
        else:
            raise ValueError(f"{mutants[-1].id}: unexpected line: {line}")
    ids = [m.id for m in mutants]
    if len(set(ids)) != len(ids):
        raise ValueError("a defect id is used twice")
    return mutants


def run(cmd, env=None, timeout=None):
    return subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def build(mutant):
    """Builds the module with `mutant` planted (the file restored whatever happens); the
    annotated module's path, or None when it does not build."""
    path = ROOT / mutant.file
    landed = path.read_text()
    try:
        path.write_text(mutant.apply(landed))
        built = run(
            ["cargo", "build", "--locked", "-q", "--profile", "wasm",
             "--target", "wasm32-wasip1", "-p", "cozystack-capabilities-policy"]
        )
    finally:
        path.write_text(landed)
    if built.returncode != 0:
        return None
    module = OUT / f"{mutant.id}.wasm"
    annotated = run(
        ["target/debug/cozystack-policy", "annotate", "--metadata", "policy-metadata.yml",
         "--usage", "README.md", "-o", str(module), str(WASM)]
    )
    if annotated.returncode != 0:
        sys.exit(f"annotate failed: {annotated.stderr}")
    return module


def simulate(module, out):
    """The first stream of simulate-ci that breaks a promise: (invariant, seconds), or None."""
    started = time.monotonic()
    done = run(
        ["target/debug/cozystack-policy", "simulate", "--policy", str(module),
         "--streams", STREAMS, "--out", str(out)]
    )
    if done.returncode == 1:
        # The summary opens with the settings that judged it; the break is the BROKEN line.
        broken = next(
            (line for line in done.stdout.splitlines() if line.startswith("BROKEN ")),
            "BROKEN (no BROKEN line)",
        )
        return broken.removeprefix("BROKEN "), time.monotonic() - started
    if done.returncode != 0:
        # The simulator itself failed: a finding, not a kill.
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"simulate failed: {done.stderr}", file=sys.stderr)
        return f"ERROR {last}", time.monotonic() - started
    return None


def scenarios(module, directory=None):
    """Whether the scenarios (or those of `directory`) all pass on `module`."""
    env = dict(os.environ, POLICY_WASM=str(module))
    cmd = ["target/debug/cozystack-e2e", "run"]
    if directory:
        cmd += ["--scenarios", str(directory)]
    return run(cmd, env=env).returncode == 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="the ids of the defects to plant, comma-separated")
    parser.add_argument("--list", action="store_true", help="check the blocks only")
    parser.add_argument("--target", type=float, default=90.0, help="the score to reach (%%)")
    args = parser.parse_args()
    mutants = parse((ROOT / "hack/mutants.txt").read_text())
    for m in mutants:
        m.apply((ROOT / m.file).read_text())
    if args.only:
        wanted = args.only.split(",")
        unknown = set(wanted) - {m.id for m in mutants}
        if unknown:
            sys.exit(f"no defect {', '.join(sorted(unknown))}")
        mutants = [m for m in mutants if m.id in wanted]
    if args.list:
        for m in mutants:
            print(f"{m.id:32} {m.file:40} {m.says}")
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    tools = run(["cargo", "test", "--locked", "--no-run", "-q",
                 "-p", "cozystack-e2e", "-p", "cozystack-policy"])
    if tools.returncode != 0:
        sys.exit(tools.stderr)
    for target in ("release-v1.5.3", "release-v1.5.4", "release-v1.6.2"):
        made = run(["make", "-s", target])
        if made.returncode != 0:
            sys.exit(made.stderr)
    landed = ROOT / "annotated-policy.wasm"
    rows, killed, scored = [], 0, 0
    for m in mutants:
        module = build(m)
        if module is None:
            rows.append((m, "does not build", "", ""))
            continue
        out = OUT / m.id
        shutil.rmtree(out, ignore_errors=True)
        found = simulate(module, out)
        caught = not scenarios(module)
        if found is None:
            sim = "survived"
        elif found[0].startswith("ERROR"):
            sim, found = f"simulator failed: {found[0]}", None
        else:
            invariant, seconds = found
            # The counterexample fails on the defective module and passes on the landed one.
            shown = (not scenarios(module, out)) and scenarios(landed, out)
            sim = f"killed in {seconds:.0f} s: {invariant}"
            if not shown:
                sim += " (counterexample NOT shown)"
        if not m.equivalent:
            scored += 1
            killed += bool(found)
        note = f"equivalent: {m.equivalent}" if m.equivalent else ""
        rows.append((m, sim, "killed" if caught else "survived", note))
        print(f"{m.id}: simulator {sim}; scenarios {'killed' if caught else 'survived'}", flush=True)
    score = 100.0 * killed / scored if scored else 0.0
    print(f"\n| defect | what | simulate-ci | scenarios |\n|---|---|---|---|")
    for m, sim, scen, note in rows:
        print(f"| `{m.id}` | {m.says}{' (' + note + ')' if note else ''} | {sim} | {scen} |")
    print(f"\nsimulator score: {killed} of {scored} non-equivalent defects killed ({score:.0f}%)")
    return 0 if score >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
