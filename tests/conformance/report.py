"""Judges one run of the MCP conformance suite against moniker (called by run.sh).

Reads the suite's per-scenario results (`<results>/server-<scenario>-<timestamp>/checks.json`),
the scenarios the suite lists, and expected-failures.txt; writes the table to RESULTS.md and
prints it; exits 1 when the run is wrong:
- a scenario failed (a FAILURE check, or no result at all) and is not listed as expected;
- a listed scenario passed (the list must be kept honest: remove the line);
- a listed name is not a scenario of the suite.

A scenario passes when none of its checks is a FAILURE (the suite's own rule); WARNING and INFO
checks are shown in the notes. Python standard library only.

    python3 report.py --results DIR --scenarios FILE --expected FILE --markdown FILE
                      --suite-version V --node-version V
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

RESULT_DIR = re.compile(r"^server-(?P<name>.+)-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$")
LISTED = re.compile(r"^\s*-\s+(?P<name>\S+)(?:\s+\[(?P<versions>[^\]]*)\])?\s*$")


@dataclass
class Outcome:
    name: str
    versions: str = ""
    checks: list[dict] = field(default_factory=list)
    found: bool = False

    def count(self, status: str) -> int:
        return sum(1 for c in self.checks if c.get("status") == status)

    @property
    def passed(self) -> bool:
        return self.found and self.count("FAILURE") == 0


def read_scenarios(path: Path) -> list[tuple[str, str]]:
    """`conformance list --server` output: `  - name [versions]` lines."""
    found = []
    for line in path.read_text().splitlines():
        m = LISTED.match(line)
        if m:
            found.append((m["name"], m["versions"] or ""))
    return found


def read_expected(path: Path) -> tuple[dict[str, str], list[str]]:
    """`scenario  # why` per line; blank lines and whole-line comments ignored."""
    expected: dict[str, str] = {}
    problems = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, _, why = line.partition("#")
        name, why = name.strip(), why.strip()
        if " " in name:
            problems.append(f"{path.name}:{number}: one scenario per line, then `# why`: {raw!r}")
        elif not why:
            problems.append(f"{path.name}:{number}: `{name}` needs a `# why` comment")
        elif name in expected:
            problems.append(f"{path.name}:{number}: `{name}` is listed twice")
        else:
            expected[name] = why
    return expected, problems


def read_results(results: Path, outcomes: dict[str, Outcome]) -> list[str]:
    problems = []
    for directory in sorted(results.iterdir()) if results.is_dir() else []:
        m = RESULT_DIR.match(directory.name)
        if not m:
            continue
        outcome = outcomes.setdefault(m["name"], Outcome(m["name"]))
        try:
            outcome.checks = json.loads((directory / "checks.json").read_text())
            outcome.found = True
        except (OSError, ValueError) as e:
            problems.append(f"{directory.name}: unreadable checks.json: {e}")
    return problems


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def notes(o: Outcome, limit: int = 220) -> str:
    if not o.found:
        return "no result: the suite did not run it or crashed (see out/suite.log)"
    parts = []
    for c in o.checks:
        if c.get("status") in ("FAILURE", "WARNING"):
            parts.append(f"{c['status']} {c.get('id')}: {c.get('errorMessage') or c.get('description', '')}")
    if not parts and not (o.count("SUCCESS") or o.count("FAILURE")):
        # Nothing scored: say why, from the scenario's INFO checks.
        infos = [c for c in o.checks if c.get("status") == "INFO" and isinstance(c.get("details"), dict)]
        messages = [c["details"]["message"] for c in infos if c["details"].get("message")]
        parts.append("INFO only: " + ("; ".join(messages) if messages else "no check scored"))
    text = "; ".join(parts)
    return cell(text if len(text) <= limit else text[: limit - 1] + "…")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--scenarios", type=Path, required=True)
    ap.add_argument("--expected", type=Path, required=True)
    ap.add_argument("--markdown", type=Path, required=True)
    ap.add_argument("--suite-version", required=True)
    ap.add_argument("--node-version", required=True)
    args = ap.parse_args()

    listed = read_scenarios(args.scenarios)
    outcomes = {name: Outcome(name, versions) for name, versions in listed}
    problems = []
    if not listed:
        problems.append(f"the suite listed no server scenario ({args.scenarios})")
    expected, bad_lines = read_expected(args.expected)
    problems += bad_lines
    problems += read_results(args.results, outcomes)
    for name in expected:
        if name not in outcomes:
            problems.append(f"{args.expected.name} lists `{name}`, which is not a scenario of the suite")

    rows, wrong = [], []
    for o in outcomes.values():
        if o.name in expected:
            verdict = "expected failure" if not o.passed else "PASS, but listed as expected failure"
            if o.passed:
                wrong.append(f"{o.name}: passes now: remove it from expected-failures.txt")
        else:
            scored_any = o.count("SUCCESS") + o.count("FAILURE") > 0
            verdict = ("pass" if scored_any else "pass (no check scored)") if o.passed else "FAIL"
            if not o.passed:
                wrong.append(f"{o.name}: {notes(o, 2000)}")
        scored = o.count("SUCCESS") + o.count("FAILURE")
        checks = f"{o.count('SUCCESS')}/{scored}" if o.found else "-"
        why = expected.get(o.name)
        note = notes(o)
        if why:
            note = cell(f"expected: {why}") + (f"; {note}" if note else "")
        rows.append((o.name, o.versions, verdict, checks, o.count("WARNING"), note))

    passed = sum(1 for o in outcomes.values() if o.passed and o.name not in expected)
    xfail = sum(1 for o in outcomes.values() if not o.passed and o.name in expected)

    lines = [
        "# MCP conformance: moniker",
        "",
        "Written by `tests/conformance/run.sh` (do not edit): the official MCP conformance suite's",
        "server scenarios (`--suite all`), run against `moniker serve --http` with the Python",
        "fixture server (`fixture_server.py`, FastMCP over stdio) behind it.",
        "",
        f"- suite: `@modelcontextprotocol/conformance` {args.suite_version}, Node {args.node_version}",
        f"- scenarios: {len(outcomes)}; pass: {passed}; expected failures: {xfail}; wrong: {len(wrong)}",
        "- checks: passed/scored (SUCCESS or FAILURE); warnings are SHOULD-level findings",
        "",
        "| scenario | spec versions | result | checks | warnings | notes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {n} | {v} | {r} | {c} | {w} | {why} |" for n, v, r, c, w, why in rows]
    args.markdown.write_text("\n".join(lines) + "\n")

    width = max((len(r[0]) for r in rows), default=10)
    for name, _, verdict, checks, warnings, _ in rows:
        extra = f", {warnings} warning(s)" if warnings else ""
        print(f"  {name:<{width}}  {verdict} ({checks} checks{extra})")
    print(f"table written to {args.markdown}")
    for p in problems:
        print(f"ERROR: {p}")
    for w in wrong:
        print(f"WRONG: {w}")
    if xfail:
        print(f"{xfail} expected failure(s), listed in {args.expected.name}")
    # One plain closing line: scenarios that passed, and scenarios whose outcome is wrong.
    print(f"conformance: {passed} passed, {len(wrong) + len(problems)} failed")
    return 1 if wrong or problems else 0


if __name__ == "__main__":
    sys.exit(main())
