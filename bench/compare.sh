#!/usr/bin/env bash
# Side-by-side cost of moniker, in one run: the same load (moniker-load: raw JSON-RPC) against
#   direct     the echo server alone (moniker-fixture --echo), no gateway
#   moniker    moniker serve --standalone over stdio in front of it (a gateway of its own)
#   moniker-shared  moniker serve over stdio as a client starts it: attached to the config's
#              shared gateway over a Unix socket (one hop more; the gateway is warm)
#   moniker-http  moniker serve --http, over Streamable HTTP
#   moniker-otel  moniker serve over stdio with OpenTelemetry traces on (`telemetry:`), exporting
#              to a local OTLP/HTTP sink that takes every export (one server only)
#   fastmcp    FastMCP's proxy (FastMCP.as_proxy) over stdio, installed into bench/.venv
# at 10, 1,000 and 10,000 tools, with 1 and 5 servers behind the gateway. Prints a table of
# absolute figures and ratios (each system / direct) and writes it to BENCHMARKS.md.
#
#   bench/compare.sh             everything (release build; about 10 minutes on 2 cores)
#   QUICK=1 bench/compare.sh     fewer calls, for a smoke run
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/BENCHMARKS.md}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"; [[ -n ${HTTP_PID:-} ]] && kill "$HTTP_PID" 2>/dev/null; [[ -n ${SINK_PID:-} ]] && kill "$SINK_PID" 2>/dev/null || true' EXIT

CALLS=${CALLS:-3000}; WARMUP=${WARMUP:-300}; PIPELINED=${PIPELINED:-6000}; INFLIGHT=${INFLIGHT:-16}
if [[ -n ${QUICK:-} ]]; then CALLS=300; WARMUP=50; PIPELINED=600; fi

echo "== release build =="
cargo build --release --quiet -p moniker-mcp -p moniker-fixture
BIN=$ROOT/target/release
FIXTURE=$BIN/moniker-fixture
MONIKER=$BIN/moniker
LOAD=$BIN/moniker-load

echo "== FastMCP (bench/.venv) =="
if [[ ! -x bench/.venv/bin/python ]] || ! bench/.venv/bin/python -c "import fastmcp.server" 2>/dev/null; then
    python3 -m venv bench/.venv
    bench/.venv/bin/pip install --quiet --disable-pip-version-check "fastmcp==4.1.2" </dev/null
fi
FASTMCP_VERSION=$(bench/.venv/bin/python -c 'import fastmcp; print(fastmcp.__version__)')
echo "fastmcp $FASTMCP_VERSION"

results=$WORK/results.jsonl
: >"$results"

# An OTLP/HTTP sink for the traced runs: it reads every export and answers 200.
SINK_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$SINK_PORT" <<'EOF' &
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
EOF
SINK_PID=$!

# measure NAME TOOLS SERVERS TOOL LOAD-ARGS...  (`-- COMMAND...` for stdio, `--url URL --pid PID` for HTTP)
measure() {
    local system=$1 tools=$2 servers=$3 tool=$4
    shift 4
    printf '%-13s %6s tools %s server(s) ... ' "$system" "$tools" "$servers"
    local json
    if json=$("$LOAD" --tool "$tool" --arguments '{"query":"bench"}' --calls "$CALLS" --warmup "$WARMUP" \
        --pipelined "$PIPELINED" --inflight "$INFLIGHT" "$@" 2>"$WORK/err"); then
        echo "$json" | python3 -c 'import json,sys; r=json.load(sys.stdin); print("p50 %.1f us, p99 %.1f us, list %.2f ms" % (r["call_us"]["p50"], r["call_us"]["p99"], r["list_ms"]["p50"]))'
        printf '{"system":"%s","tools":%s,"servers":%s,"report":%s}\n' "$system" "$tools" "$servers" "$json" >>"$results"
    else
        echo "failed: $(tail -n 3 "$WORK/err")"
    fi
}

# A moniker config and a FastMCP proxy script for TOOLS tools split over SERVERS servers.
setup() {
    local tools=$1 servers=$2 dir=$WORK/$1-$2
    mkdir -p "$dir"
    local per=$((tools / servers))
    {
        echo "servers:"
        for i in $(seq 1 "$servers"); do
            echo "  s$i: { command: $FIXTURE, args: [--echo, --tools-count, \"$per\"], prefix: $([[ $servers -gt 1 ]] && echo true || echo false) }"
        done
    } >"$dir/moniker.yaml"
    {
        echo "from fastmcp.server import create_proxy"
        echo "config = {'mcpServers': {"
        for i in $(seq 1 "$servers"); do
            echo "  's$i': {'command': '$FIXTURE', 'args': ['--echo', '--tools-count', '$per']},"
        done
        echo "}}"
        echo "create_proxy(config, name='proxy').run(show_banner=False)"
    } >"$dir/proxy.py"
    echo "$dir"
}

mkdir -p "$WORK/run" && chmod 700 "$WORK/run"
for tools in 10 1000 10000; do
    measure direct "$tools" 1 tool_00001 -- "$FIXTURE" --echo --tools-count "$tools"
    for servers in 1 5; do
        dir=$(setup "$tools" "$servers")
        tool=tool_00001
        [[ $servers -gt 1 ]] && tool=s1_tool_00001
        measure moniker "$tools" "$servers" "$tool" -- "$MONIKER" serve --standalone -c "$dir/moniker.yaml"
        # The default over stdio: the client's moniker attaches to the config's shared gateway
        # (started by the first run, warm for the rest; it stops 2 s after the last).
        { cat "$dir/moniker.yaml"; echo "gateway: { idle_stop: 2s }"; } >"$dir/shared.yaml"
        measure moniker-shared "$tools" "$servers" "$tool" -- env XDG_RUNTIME_DIR="$WORK/run" "$MONIKER" serve -c "$dir/shared.yaml"
        if [[ $servers -eq 1 ]]; then
            { cat "$dir/moniker.yaml"; echo "telemetry: http://127.0.0.1:$SINK_PORT"; } >"$dir/otel.yaml"
            measure moniker-otel "$tools" "$servers" "$tool" -- "$MONIKER" serve --standalone -c "$dir/otel.yaml"
        fi
        if "$MONIKER" serve --help | grep -q -- '--http'; then
            port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
            "$MONIKER" serve --http "127.0.0.1:$port" -c "$dir/moniker.yaml" 2>"$WORK/http.log" &
            HTTP_PID=$!
            for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
            measure moniker-http "$tools" "$servers" "$tool" --url "http://127.0.0.1:$port/mcp" --pid "$HTTP_PID"
            kill "$HTTP_PID" 2>/dev/null || true
            wait "$HTTP_PID" 2>/dev/null || true
            HTTP_PID=
        fi
        ftool=tool_00001
        [[ $servers -gt 1 ]] && ftool=s1_tool_00001
        # FastMCP is some 30x slower per call with one server, and ~1000x with several (its
        # proxy opens backend sessions per request): fewer calls keep the run short.
        saved=("$CALLS" "$WARMUP" "$PIPELINED")
        cut=$([[ $servers -gt 1 ]] && echo 100 || echo 10)
        CALLS=$((CALLS / cut)); WARMUP=$((WARMUP / cut)); PIPELINED=$((PIPELINED / cut))
        measure fastmcp "$tools" "$servers" "$ftool" -- bench/.venv/bin/python "$dir/proxy.py"
        CALLS=${saved[0]}; WARMUP=${saved[1]}; PIPELINED=${saved[2]}
    done
done

# The findability section (written by `cargo run -p moniker-findability -- --write`) stays.
kept=$(sed -n '/^## Findability/,$p' "$OUT" 2>/dev/null || true)
{
    python3 bench/report.py "$results" "$FASTMCP_VERSION"
    if [[ -n $kept ]]; then printf '\n%s\n' "$kept"; fi
} | tee "$OUT.new"
mv "$OUT.new" "$OUT"
echo "written to $OUT"
