#!/usr/bin/env bash
# Two builds of moniker compared so that a change of 10 us can be told from the machine's noise:
# each build's release binary, measured alternately (A B, then B A, ...) in several rounds with
# the same load client (moniker-load, raw JSON-RPC) against the same echo server, over every path
# a call takes:
#   stdio      moniker serve --standalone over stdio (a gateway of its own)
#   shared     moniker serve over stdio attached to the config's shared gateway (Unix socket)
#   http       moniker serve --http, MCP 2025 (initialize, a session)
#   http-2026  moniker serve --http, MCP 2026-07-28 (stateless: the envelope in each request)
# plus, in each round, the echo server alone (direct) and the floor: the same server behind
# moniker-relay, a process that passes each message on unread (over stdio, and over HTTP/1.1 for
# the HTTP paths): what any process between the client and the server costs on this machine,
# its wake-ups and copies. Reports, for each path, size and build, the median over the rounds of
# each round's p50 and p99 with their spread (lowest-highest), moniker's added latency over
# direct (p50 and p99) and over the floor, and whether B differs from A beyond the spread (the
# ranges of the two builds' rounds do not overlap). Says the load average before and after.
# Beside latency, what moniker's process spent a call: CPU time and context switches (its
# threads' scheduler counts, read by moniker-load before and after the sequential calls; not on
# `shared`, whose calls the shared gateway serves, a process of its own). On a VM whose wake-ups vary by tens of µs from
# one minute to the next, they tell a change of a few µs where latency cannot.
#
#   bench/ab.sh A B              two revisions (anything `git rev-parse` reads; B may be
#                                `WORKTREE` for the working tree as it is)
#   ROUNDS=5 CALLS=2000 SIZES="10 1000 10000" SERVERS="1 5" PATHS="stdio shared http http-2026"
#   QUICK=1 bench/ab.sh A B      a smoke run (2 rounds, fewer calls, 10 tools)
#
# Each revision is built once (target/ab/<commit>/moniker; the working tree's each time); the
# report goes to stdout and to bench/ab-report.md (OUT=... to write elsewhere). Run on an idle
# machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
A=${1:?usage: bench/ab.sh A B}
B=${2:?usage: bench/ab.sh A B}
ROUNDS=${ROUNDS:-5}; CALLS=${CALLS:-2000}; WARMUP=${WARMUP:-200}
SIZES=${SIZES:-10 1000 10000}; SERVERS=${SERVERS:-1 5}; PATHS=${PATHS:-stdio shared http http-2026}
if [[ -n ${QUICK:-} ]]; then ROUNDS=2; CALLS=300; WARMUP=50; SIZES=10; SERVERS=1; fi
OUT=${OUT:-$ROOT/bench/ab-report.md}
WORK=$(mktemp -d)
HTTP_PID=
trap 'rm -rf "$WORK"; [[ -n $HTTP_PID ]] && kill "$HTTP_PID" 2>/dev/null || true' EXIT

# The release binary of a revision, built once and kept as target/ab/<commit>/moniker: from a
# worktree of it, into this checkout's target directory (the dependencies built once serve
# both), then copied out.
build() {
    local rev=$1 dir commit
    if [[ $rev == WORKTREE ]]; then
        cargo build --release --quiet -p moniker-mcp </dev/null
        dir=$ROOT/target/ab/worktree
        mkdir -p "$dir" && cp "$ROOT/target/release/moniker" "$dir/moniker"
        echo "$dir/moniker"
        return
    fi
    commit=$(git rev-parse --verify "$rev^{commit}")
    dir=$ROOT/target/ab/$commit
    if [[ ! -x $dir/moniker ]]; then
        mkdir -p "$dir"
        [[ -d $dir/src ]] || git worktree add --detach --force "$dir/src" "$commit" >/dev/null 2>&1
        (cd "$dir/src" && CARGO_TARGET_DIR=$ROOT/target cargo build --release --quiet -p moniker-mcp </dev/null)
        cp "$ROOT/target/release/moniker" "$dir/moniker"
        git worktree remove --force "$dir/src" >/dev/null 2>&1 || true
    fi
    echo "$dir/moniker"
}

echo "== builds ==" >&2
BIN_A=$(build "$A"); BIN_B=$(build "$B")
cargo build --release --quiet -p moniker-fixture </dev/null
FIXTURE=$ROOT/target/release/moniker-fixture
LOAD=$ROOT/target/release/moniker-load
RELAY=$ROOT/target/release/moniker-relay
LOAD_BEFORE=$(cut -d' ' -f1 /proc/loadavg)
results=$WORK/results.jsonl
: >"$results"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# record ROUND BUILD PATH TOOLS SERVERS LOAD-ARGS...
# (--no-memory: moniker-load's memory sampler, which reads all of /proc every 10 ms, delayed a
# call now and then and put up to a millisecond in the p99; this bench does not report memory.)
record() {
    local round=$1 build=$2 path=$3 tools=$4 servers=$5 json
    shift 5
    if json=$("$LOAD" --arguments '{"query":"bench"}' --calls "$CALLS" --warmup "$WARMUP" \
        --pipelined 1 --inflight 1 --lists 1 --no-memory "$@" 2>"$WORK/err"); then
        printf '{"round":%s,"build":"%s","path":"%s","tools":%s,"servers":%s,"report":%s}\n' \
            "$round" "$build" "$path" "$tools" "$servers" "$json" >>"$results"
    else
        echo "  $build $path $tools/$servers failed: $(tail -n 2 "$WORK/err")" >&2
    fi
}

# http_up BINARY-AND-ARGS...: starts an HTTP server in the background (HTTP_PID) on a free
# port (PORT), and waits until it answers.
http_up() {
    PORT=$(free_port)
    "${@//@PORT@/$PORT}" 2>>"$WORK/http.log" &
    HTTP_PID=$!
    for _ in $(seq 1 100); do curl -fsS "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break; sleep 0.05; done
}

http_down() {
    kill "$HTTP_PID" 2>/dev/null || true
    wait "$HTTP_PID" 2>/dev/null || true
    HTTP_PID=
}

# floor ROUND TOOLS: the echo server behind moniker-relay, over stdio and over HTTP.
floor() {
    local round=$1 tools=$2 server=("$FIXTURE" --echo --tools-count "$2")
    if [[ " $PATHS " =~ \ (stdio|shared)\  ]]; then
        record "$round" floor floor-stdio "$tools" 1 --tool tool_00001 -- "$RELAY" -- "${server[@]}"
    fi
    if [[ " $PATHS " =~ \ http ]]; then
        http_up "$RELAY" --http "127.0.0.1:@PORT@" -- "${server[@]}"
        record "$round" floor floor-http "$tools" 1 --tool tool_00001 --url "http://127.0.0.1:$PORT/mcp" --pid "$HTTP_PID"
        http_down
    fi
}

# measure ROUND BUILD BINARY PATH TOOLS SERVERS CONFIG TOOL
measure() {
    local round=$1 build=$2 bin=$3 path=$4 tools=$5 servers=$6 config=$7 tool=$8
    case $path in
        stdio) record "$round" "$build" "$path" "$tools" "$servers" --tool "$tool" -- "$bin" serve --standalone -c "$config" ;;
        shared)
            { cat "$config"; echo "gateway: { idle_stop: 1s }"; } >"$config.shared-$build.yaml"
            record "$round" "$build" "$path" "$tools" "$servers" --tool "$tool" -- \
                env XDG_RUNTIME_DIR="$WORK/run-$build" "$bin" serve -c "$config.shared-$build.yaml"
            sleep 1.5 # the shared gateway stops before the other build's starts
            ;;
        http | http-2026)
            http_up "$bin" serve --http "127.0.0.1:@PORT@" -c "$config"
            local modern=()
            [[ $path == http-2026 ]] && modern=(--modern)
            record "$round" "$build" "$path" "$tools" "$servers" --tool "$tool" "${modern[@]}" --url "http://127.0.0.1:$PORT/mcp" --pid "$HTTP_PID"
            http_down
            ;;
    esac
}

mkdir -p "$WORK/run-A" "$WORK/run-B" && chmod 700 "$WORK/run-A" "$WORK/run-B"
for round in $(seq 1 "$ROUNDS"); do
    echo "== round $round of $ROUNDS (load $(cut -d' ' -f1 /proc/loadavg)) ==" >&2
    for tools in $SIZES; do
        record "$round" direct direct "$tools" 1 --tool tool_00001 -- "$FIXTURE" --echo --tools-count "$tools"
        floor "$round" "$tools"
        for servers in $SERVERS; do
            config=$WORK/$tools-$servers.yaml
            per=$((tools / servers)); prefix=false; tool=tool_00001
            if [[ $servers -gt 1 ]]; then prefix=true; tool=s1_tool_00001; fi
            {
                echo "servers:"
                for i in $(seq 1 "$servers"); do
                    echo "  s$i: { command: $FIXTURE, args: [--echo, --tools-count, \"$per\"], prefix: $prefix }"
                done
            } >"$config"
            for path in $PATHS; do
                # A then B on odd rounds, B then A on even ones: drift favours neither.
                if ((round % 2)); then order="A B"; else order="B A"; fi
                for build in $order; do
                    bin=$BIN_A
                    [[ $build == B ]] && bin=$BIN_B
                    measure "$round" "$build" "$bin" "$path" "$tools" "$servers" "$config" "$tool"
                done
            done
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1 /proc/loadavg)
python3 bench/ab_report.py "$results" "$A" "$B" "$LOAD_BEFORE" "$LOAD_AFTER" "$ROUNDS" "$CALLS" | tee "$OUT"
echo "written to $OUT" >&2
