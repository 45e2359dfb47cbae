"""Judges one run of the MCP conformance suite against moniker: its server scenarios (called by
run.sh, `--mode server`, the default) or its client scenarios (called by run-client.sh,
`--mode client`).

Reads the suite's per-scenario results (`<results>/<dir>/checks.json`, where <dir> is
`server-<scenario>-<timestamp>` for a server run and `<scenario>-<timestamp>` for a client run;
a client scenario's name may hold a `/`, so its directory is nested), the scenarios the suite
lists, and the expected-failures file; writes the table to its section of RESULTS.md (the
other mode's section is kept) and prints it; exits 1 when the run is wrong:
- a scenario failed and is not listed as expected;
- a listed scenario passed (the list must be kept honest: remove the line);
- a listed name is not a scenario of the suite.

When a scenario passes: the suite's own rule for each mode.
- server: none of its checks is a FAILURE; WARNING and INFO checks are shown in the notes.
- client: the suite's verdict for the scenario (`OVERALL: PASSED`, exit 0 of its run, read from
  `--runs`): no FAILURE and no WARNING check, the client did not time out, and it exited 0
  unless the scenario expects the client to give up (allowClientError).
  Client scenarios of the `draft` spec version only are informational: reported, never wrong,
  and not to be listed as expected failures.
Python standard library only.

    python3 report.py [--mode server] --results DIR --scenarios FILE --expected FILE
                      [--markdown FILE] --suite-version V --node-version V
    python3 report.py --mode client --runs FILE ... [--moniker-version V]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

TIMESTAMP = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z"
RESULT_DIR = {
    "server": re.compile(rf"^server-(?P<name>.+)-{TIMESTAMP}$"),
    "client": re.compile(rf"^(?P<name>.+)-{TIMESTAMP}$"),
}
LISTED = re.compile(r"^\s*-\s+(?P<name>\S+)(?:\s+\[(?P<versions>[^\]]*)\])?\s*$")
SECTION = re.compile(r"<!-- begin (?P<name>\w+) -->\n(?P<body>.*?)<!-- end (?P=name) -->\n", re.S)
SECTIONS = {
    "server": "tests/conformance/run.sh",
    "server_ts": "CONFORMANCE_BACKEND=ts tests/conformance/run.sh",
    "server_2026_07_28": "tests/conformance/run.sh 2026-07-28",
    "server_2026_07_28_ts": "CONFORMANCE_BACKEND=ts tests/conformance/run.sh 2026-07-28",
    "server_2026_07_28_http": "tests/conformance/run.sh 2026-07-28 http",
    "server_2026_07_28_http_ts": "CONFORMANCE_BACKEND=ts tests/conformance/run.sh 2026-07-28 http",
    "server_2026_07_28_legacy": "CONFORMANCE_BACKEND=legacy tests/conformance/run.sh 2026-07-28",
    "server_2026_07_28_http_legacy": "CONFORMANCE_BACKEND=legacy tests/conformance/run.sh 2026-07-28 http",
    "server_2025_11_25": "tests/conformance/run.sh 2025-11-25",
    "server_2025_11_25_ts": "CONFORMANCE_BACKEND=ts tests/conformance/run.sh 2025-11-25",
    "client": "tests/conformance/run-client.sh",
    "client_2026_07_28": "tests/conformance/run-client.sh 2026-07-28",
}


@dataclass
class Run:
    """One client scenario's run of the suite (run-client.sh's runs file and its log)."""

    rc: int
    seconds: str = ""
    exit_code: int | None = None  # the client's, when the suite reports a non-zero one
    exit_allowed: bool = False  # the scenario expects the client to give up (allowClientError)
    timed_out: bool = False


@dataclass
class Outcome:
    name: str
    versions: str = ""
    checks: list[dict] = field(default_factory=list)
    found: bool = False
    run: Run | None = None

    def count(self, status: str) -> int:
        return sum(1 for c in self.checks if c.get("status") == status)

    @property
    def informational(self) -> bool:
        """Reported, never judged: a draft scenario, or one a requirement set runs but never
        scores (extensions, pending ones)."""
        return self.versions in ("draft", "unscored")

    def passed(self, mode: str) -> bool:
        if not self.found:
            return False
        if mode == "server":
            return self.count("FAILURE") == 0
        return self.run is not None and self.run.rc == 0


def read_scenarios(path: Path) -> list[tuple[str, str]]:
    """`conformance list --server` (or `--client`) output: `  - name [versions]` lines."""
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


def read_results(results: Path, mode: str, outcomes: dict[str, Outcome]) -> list[str]:
    problems = []
    pattern = RESULT_DIR[mode]
    found = sorted(p.parent for p in results.rglob("checks.json")) if results.is_dir() else []
    for directory in found:
        m = pattern.match(directory.relative_to(results).as_posix())
        if not m:
            continue
        outcome = outcomes.setdefault(m["name"], Outcome(m["name"]))
        try:
            outcome.checks = json.loads((directory / "checks.json").read_text())
            outcome.found = True
        except (OSError, ValueError) as e:
            problems.append(f"{directory.name}: unreadable checks.json: {e}")
    return problems


def read_runs(path: Path, outcomes: dict[str, Outcome]) -> list[str]:
    """run-client.sh's runs file: `scenario<TAB>suite exit<TAB>seconds<TAB>log` per line."""
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        parts = line.split("\t")
        if len(parts) != 4 or not parts[1].lstrip("-").isdigit():
            problems.append(f"{path.name}:{number}: not `scenario, exit, seconds, log`: {line!r}")
            continue
        name, rc, seconds, log = parts
        run = Run(int(rc), seconds)
        try:
            text = Path(log).read_text(errors="replace")
        except OSError:
            text = ""
        m = re.search(r"Client exited with code (-?\d+)", text)
        run.exit_code = int(m[1]) if m else None
        run.timed_out = "Client timed out after" in text
        # The suite says "CLIENT EXITED WITH ERROR" only when the scenario does not allow it.
        run.exit_allowed = run.exit_code is not None and "CLIENT EXITED WITH ERROR" not in text
        if run.rc not in (0, 1):
            problems.append(f"{name}: the suite exited {run.rc} (124: the run's timeout); see {log}")
        outcomes.setdefault(name, Outcome(name)).run = run
    return problems


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def notes(o: Outcome, mode: str, limit: int = 220) -> str:
    if not o.found:
        return "no result: the suite did not run it or crashed (see out/suite.log)" if mode == "server" \
            else "no result: the suite did not run it or crashed (see out/client/logs/)"
    parts = []
    if o.run is not None:
        if o.run.timed_out:
            parts.append("client timed out")
        elif o.run.exit_code is not None:
            allowed = " (the scenario expects it to give up)" if o.run.exit_allowed else ""
            parts.append(f"client exited {o.run.exit_code}{allowed}")
    for c in o.checks:
        if c.get("status") in ("FAILURE", "WARNING"):
            text = c.get("errorMessage") or c.get("description", "")
            details = c.get("details") if isinstance(c.get("details"), dict) else {}
            if mode == "client" and not c.get("errorMessage") and details.get("message"):
                text += f" ({details['message']})"
            parts.append(f"{c['status']} {c.get('id')}: {text}")
    if not parts and not (o.count("SUCCESS") or o.count("FAILURE")):
        # Nothing scored: say why, from the scenario's INFO checks.
        infos = [c for c in o.checks if c.get("status") == "INFO" and isinstance(c.get("details"), dict)]
        messages = [c["details"]["message"] for c in infos if c["details"].get("message")]
        parts.append("INFO only: " + ("; ".join(messages) if messages else "no check scored"))
    text = "; ".join(parts)
    return cell(text if len(text) <= limit else text[: limit - 1] + "…")


def write_section(path: Path, mode: str, body: str) -> None:
    """Replaces this mode's section of RESULTS.md; keeps the other one (or says it has not run)."""
    old = path.read_text() if path.exists() else ""
    sections = {m["name"]: m["body"] for m in SECTION.finditer(old)}
    sections[mode] = body
    lines = [
        "# MCP conformance: moniker",
        "",
        "Written by the runners in `tests/conformance/` (do not edit): `run.sh` writes the server",
        "section, `run-client.sh` the client section, each without touching the other.",
        "",
    ]
    for name, runner in SECTIONS.items():
        text = sections.get(name) or f"## {name.capitalize()} scenarios\n\nNot run yet: `{runner}`.\n"
        lines += [f"<!-- begin {name} -->", text.rstrip("\n"), f"<!-- end {name} -->", ""]
    path.write_text("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("server", "client"), default="server")
    ap.add_argument("--results", type=Path, required=True)
    ap.add_argument("--scenarios", type=Path, required=True)
    ap.add_argument("--expected", type=Path, required=True)
    ap.add_argument("--markdown", type=Path, help="RESULTS.md; its section for --mode is rewritten")
    ap.add_argument("--runs", type=Path, help="client mode: run-client.sh's runs file")
    ap.add_argument("--suite-version", required=True)
    ap.add_argument("--node-version", required=True)
    ap.add_argument("--moniker-version", default="")
    ap.add_argument("--only", default="", help="space-separated scenarios: judge only these")
    ap.add_argument("--section", default="", help="the section of RESULTS.md to write (default: --mode)")
    ap.add_argument("--title", default="", help="the section's title and the sentence under it")
    args = ap.parse_args()
    mode = args.mode
    if mode == "client" and not args.runs:
        ap.error("--mode client needs --runs")

    listed = read_scenarios(args.scenarios)
    outcomes = {name: Outcome(name, versions) for name, versions in listed}
    problems = []
    if not listed:
        problems.append(f"the suite listed no {mode} scenario ({args.scenarios})")
    expected, bad_lines = read_expected(args.expected)
    problems += bad_lines
    for name in expected:
        if name not in outcomes:
            problems.append(f"{args.expected.name} lists `{name}`, which is not a scenario of the suite")
        elif outcomes[name].informational:
            problems.append(f"{args.expected.name} lists `{name}`, which is informational (never scored)")
    only = args.only.split()
    for name in only:
        if name not in outcomes:
            problems.append(f"--only: `{name}` is not a scenario of the suite")
    if only:
        outcomes = {name: o for name, o in outcomes.items() if name in only}
    problems += read_results(args.results, mode, outcomes)
    if args.runs:
        problems += read_runs(args.runs, outcomes)

    rows, wrong = [], []
    for o in outcomes.values():
        passed = o.passed(mode)
        scored_any = o.count("SUCCESS") + o.count("FAILURE") > 0
        if o.name in expected:
            verdict = "expected failure" if not passed else "PASS, but listed as expected failure"
            if passed:
                wrong.append(f"{o.name}: passes now: remove it from {args.expected.name}")
        elif o.informational:
            kind = "draft" if o.versions == "draft" else "not scored"
            verdict = ("pass" if passed else "fail") + f" (informational: {kind})"
        else:
            verdict = ("pass" if scored_any else "pass (no check scored)") if passed else "FAIL"
            if not passed:
                wrong.append(f"{o.name}: {notes(o, mode, 2000)}")
        scored = o.count("SUCCESS") + o.count("FAILURE")
        checks = f"{o.count('SUCCESS')}/{scored}" if o.found else "-"
        why = expected.get(o.name)
        note = notes(o, mode)
        if why:
            note = cell(f"expected: {why}") + (f"; {note}" if note else "")
        rows.append((o.name, o.versions, verdict, checks, o.count("WARNING"), note))

    counted = [o for o in outcomes.values() if not o.informational]
    passed = sum(1 for o in counted if o.passed(mode) and o.name not in expected)
    xfail = sum(1 for o in counted if not o.passed(mode) and o.name in expected)
    informational = len(outcomes) - len(counted)

    suite = f"`@modelcontextprotocol/conformance` {args.suite_version}, Node {args.node_version}"
    if mode == "server":
        title, _, sentence = args.title.partition("|")
        lines = [
            title or "## Server scenarios: `moniker serve --http`",
            "",
            sentence.strip()
            or "The official MCP conformance suite's server scenarios (`--suite all`), run by `run.sh`\n"
            "against `moniker serve --http` with the Python fixture server (`fixture_server.py`,\n"
            "FastMCP over stdio) behind it. A scenario passes when none of its checks is a FAILURE.",
            "",
            f"- suite: {suite}",
            f"- scenarios: {len(outcomes)}; pass: {passed}; expected failures: {xfail};"
            f" informational (not scored): {informational}; wrong: {len(wrong)}",
            "- checks: passed/scored (SUCCESS or FAILURE); warnings are SHOULD-level findings",
        ]
    else:
        lines = [
            "## Client scenarios: moniker as an MCP client",
            "",
            "The suite's client scenarios, one by one (`run-client.sh`): the suite starts each",
            "scenario's MCP server (and OAuth authorization server), and `client.sh` drives moniker",
            "against it with an ordinary config (one `url:` server with `auth:`) and ordinary commands",
            "(`moniker login`, `moniker list --json`, `moniker call`). A scenario passes on the suite's",
            "own verdict: no FAILURE and no WARNING check, no client timeout, and the client exited 0",
            "(unless the scenario expects it to give up). Draft-spec scenarios are informational.",
            "",
            f"- suite: {suite}" + (f"; moniker {args.moniker_version}" if args.moniker_version else ""),
            f"- scenarios: {len(outcomes)}; pass: {passed}; expected failures: {xfail};"
            f" informational (draft): {informational}; wrong: {len(wrong)}",
            "- checks: passed/scored (SUCCESS or FAILURE); warnings are SHOULD-level findings",
        ]
    lines += [
        "",
        "| scenario | spec versions | result | checks | warnings | notes |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {n} | {v} | {r} | {c} | {w} | {why} |" for n, v, r, c, w, why in rows]
    if args.markdown:
        write_section(args.markdown, args.section or mode, "\n".join(lines) + "\n")

    width = max((len(r[0]) for r in rows), default=10)
    for name, _, verdict, checks, warnings, _ in rows:
        extra = f", {warnings} warning(s)" if warnings else ""
        print(f"  {name:<{width}}  {verdict} ({checks} checks{extra})")
    if args.markdown:
        print(f"table written to {args.markdown} ({mode} section)")
    for p in problems:
        print(f"ERROR: {p}")
    for w in wrong:
        print(f"WRONG: {w}")
    if xfail:
        print(f"{xfail} expected failure(s), listed in {args.expected.name}")
    # One plain closing line: scenarios that passed, and scenarios whose outcome is wrong.
    label = "conformance" if mode == "server" else "conformance (client)"
    print(f"{label}: {passed} passed, {len(wrong) + len(problems)} failed"
          + (f", {informational} informational" if informational else ""))
    return 1 if wrong or problems else 0


if __name__ == "__main__":
    sys.exit(main())
