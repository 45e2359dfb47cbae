#!/usr/bin/env bash
# Each scenario of one mode of run.sh ALONE, compared with that mode's full run:
#   1. reads the scenarios of the mode's full run and their results (out[-<revision>][-http]
#      [-ts|-legacy]/scenarios.txt and results/, written by run.sh with the same arguments and
#      CONFORMANCE_BACKEND: run that first);
#   2. runs each scenario alone: `CONFORMANCE_SCENARIO=<name> run.sh <same arguments>`, i.e. a
#      FRESH moniker and fresh backends of the same mode for every scenario, one suite invocation
#      (`--scenario <name>`, at the revision's wire) each, results in out[...]-alone/<name>/;
#   3. prints a table: scenario, its result in the full run, its result alone (pass: no check is
#      a FAILURE, as report.py judges; `-` when the suite left no result), and flags every
#      scenario that passes alone but fails in the full run (an earlier scenario of the full run
#      left moniker, or a backend, in a state that breaks it); then, for every failure, its
#      FAILURE checks' messages, and how often the logs say "cannot tell which" (moniker
#      refused a server's request, not knowing which client it is for: the refusal as
#      moniker_gateway::deliver logs it at debug, "concerns no one client", and as the server
#      says it on stderr, as backend_2025.py does: "cannot tell which").
# Exits 1 if some scenario passes alone but fails in the full run, 2 on a usage error, 0 else.
# Writes no RESULTS.md section and judges nothing against the expected-failures lists.
#
#   tests/conformance/alone.sh 2026-07-28                          # the default mode
#   CONFORMANCE_BACKEND=legacy tests/conformance/alone.sh 2026-07-28
#   CONFORMANCE_BACKEND=ts tests/conformance/alone.sh 2026-07-28 http
#   tests/conformance/alone.sh                                     # the older suite, --suite all
#
# Environment: what run.sh reads (CONFORMANCE_BACKEND, MONIKER_BIN, ...); ALONE_SCENARIOS
# (space-separated: only these, default every scenario of the full run); ALONE_TIMEOUT (seconds
# for one scenario's run.sh, default 90); RUST_LOG (moniker's log filter; default here: warnings,
# plus the refusals of moniker_gateway::deliver and the servers' stderr, moniker::server).
set -uo pipefail
export RUST_LOG=${RUST_LOG:-warn,moniker::server=info,moniker_gateway::deliver=debug}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BACKEND=${CONFORMANCE_BACKEND:-python}
SUFFIX=
[[ $BACKEND == python ]] || SUFFIX=-$BACKEND
FULL=$HERE/out${1:+-$1}${2:+-$2}$SUFFIX
ALONE=$FULL-alone
TIMEOUT=${ALONE_TIMEOUT:-90}

usage() {
    printf 'conformance/alone.sh: %s\n' "$*" >&2
    exit 2
}
[[ -f $FULL/scenarios.txt && -d $FULL/results ]] ||
    usage "no full run in $FULL: run ${CONFORMANCE_BACKEND:+CONFORMANCE_BACKEND=$CONFORMANCE_BACKEND }tests/conformance/run.sh $* first"

# The scenarios, in the full run's order (`  - name` or `  - name [versions]`).
mapfile -t scenarios < <(sed -n 's/^[[:space:]]*-[[:space:]]\{1,\}\([^[:space:]]\{1,\}\).*/\1/p' "$FULL/scenarios.txt")
if [[ -n ${ALONE_SCENARIOS:-} ]]; then
    for name in $ALONE_SCENARIOS; do
        printf '%s\n' "${scenarios[@]}" | grep -qxF -- "$name" || usage "$name is not a scenario of the full run ($FULL/scenarios.txt)"
    done
    read -r -a scenarios <<<"$ALONE_SCENARIOS"
fi
((${#scenarios[@]})) || usage "$FULL/scenarios.txt lists no scenario"

rm -rf "$ALONE"
mkdir -p "$ALONE"
echo "each of ${#scenarios[@]} scenarios alone (a fresh moniker and fresh backends each), mode: ${CONFORMANCE_BACKEND:-python} ${*:-(older suite)}; full run: $FULL"
start=$SECONDS
for name in "${scenarios[@]}"; do
    rc=0
    timeout --kill-after=10 "$TIMEOUT" env CONFORMANCE_SCENARIO="$name" "$HERE/run.sh" "$@" \
        >"$ALONE/$name.run.log" 2>&1 </dev/null || rc=$?
    printf '  %-48s run.sh exit %s\n' "$name" "$rc"
done
echo "alone runs took $((SECONDS - start))s"

python3 - "$FULL" "$ALONE" "${scenarios[@]}" <<'PY'
"""The table: a scenario's result in the full run and alone, as report.py judges a server one."""
import json
import re
import sys
from pathlib import Path

full, alone, names = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3:]
STAMP = r"-\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}-\d{3}Z$"


def checks_of(results: Path, name: str) -> list | None:
    if not results.is_dir():
        return None
    found = sorted(d for d in results.iterdir() if re.fullmatch(rf"server-{re.escape(name)}{STAMP}", d.name))
    for d in reversed(found):
        try:
            return json.loads((d / "checks.json").read_text())
        except (OSError, ValueError):
            continue
    return None


def verdict(checks: list | None) -> tuple[bool, str]:
    if checks is None:
        return False, "-"
    ok = sum(c.get("status") == "SUCCESS" for c in checks)
    bad = sum(c.get("status") == "FAILURE" for c in checks)
    warn = sum(c.get("status") == "WARNING" for c in checks)
    text = f"{'pass' if not bad else 'FAIL'} {ok}/{ok + bad}" + (f" ({warn}w)" if warn else "")
    return not bad, text


def failures(checks: list | None) -> list[str]:
    if checks is None:
        return ["no result: the suite did not run it or crashed"]
    return [f"{c.get('id')}: {c.get('errorMessage') or c.get('description', '')}" for c in checks
            if c.get("status") == "FAILURE"]


def refusals(directory: Path) -> str:
    """How often moniker refused a server's request (its debug line in moniker.log), and how
    often a server said on stderr that it was told "cannot tell which" (in moniker.log for a
    stdio server, in its own <name>.log for an HTTP one); "" for neither."""
    text = ""
    for log in sorted(directory.glob("*.log")):
        if log.name != "suite.log":
            text += log.read_text(errors="replace")
    refused, told = text.count("concerns no one client"), text.count("cannot tell which")
    if not refused and not told:
        return ""
    return f"{refused} server request(s) refused (\"concerns no one client\"), {told} line(s) \"cannot tell which\""


unscored = {m[1] for m in re.finditer(r"^\s*-\s+(\S+)\s+\[unscored\]", (full / "scenarios.txt").read_text(), re.M)}
rows, flagged, notes = [], [], []
for name in names:
    f_checks = checks_of(full / "results", name)
    a_checks = checks_of(alone / name / "results", name)
    f_ok, f_text = verdict(f_checks)
    a_ok, a_text = verdict(a_checks)
    flag = ""
    if a_ok and not f_ok:
        flag = "PASSES ALONE, FAILS IN FULL RUN"
        flagged.append(name)
    elif not a_ok and f_ok:
        flag = "fails alone only"
    elif not a_ok:
        flag = "fails both ways"
    rows.append((name + (" [unscored]" if name in unscored else ""), f_text, a_text, flag))
    if not f_ok or not a_ok:
        notes.append((name, failures(f_checks) if not f_ok else [], failures(a_checks) if not a_ok else [],
                      refusals(alone / name)))

width = max(len(r[0]) for r in rows)
cw = max(len("full run"), *(len(r[1]) for r in rows), *(len(r[2]) for r in rows))
print()
print(f"| {'scenario':<{width}} | {'full run':<{cw}} | {'alone':<{cw}} | |")
print(f"| {'-' * width} | {'-' * cw} | {'-' * cw} | --- |")
for name, f_text, a_text, flag in rows:
    print(f"| {name:<{width}} | {f_text:<{cw}} | {a_text:<{cw}} | {flag} |")
print()


def version(directory: Path) -> str:
    try:
        return (directory / "moniker.version").read_text().strip()
    except OSError:
        return "?"


full_version = version(full)
others = sorted({version(alone / name) for name in names} - {full_version})
if others:
    print(f"WARNING: the full run ran {full_version}, the alone runs {', '.join(others)}: not the same build")
else:
    print(f"full run and alone runs: {full_version}")
print(f"full run's logs: {refusals(full) or 'no refusal of a server request'}")
for name, f_fail, a_fail, alone_refusals in notes:
    print(f"\n{name}:")
    if f_fail == a_fail:
        f_fail, a_fail = [], []
        for text in failures(checks_of(full / "results", name)):
            print(f"  both:  {text}")
    for text in f_fail:
        print(f"  full:  {text}")
    for text in a_fail:
        print(f"  alone: {text}")
    if alone_refusals:
        print(f"  alone logs: {alone_refusals}")
print()
if flagged:
    print(f"{len(flagged)} scenario(s) pass alone but fail in the full run: {' '.join(flagged)}")
    sys.exit(1)
print("no scenario passes alone but fails in the full run")
PY
