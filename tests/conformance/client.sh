#!/usr/bin/env bash
# moniker as the client of one MCP conformance client scenario: the `--command` of
#   node dist/index.js client --command tests/conformance/client.sh --scenario S
# The suite starts the scenario's MCP server (and authorization server), appends its URL as the
# last argument, and sets MCP_CONFORMANCE_SCENARIO and, for some scenarios,
# MCP_CONFORMANCE_CONTEXT (JSON: client_id, client_secret, private_key_pem, ...).
#
# moniker holds no scenario-specific code: this wrapper turns the URL and the context into an
# ordinary moniker config (one server `remote` with `url:` and `auth:`) in a work directory, and
# runs ordinary moniker commands, each logged on stderr:
#   1. `moniker login remote`, for the auth/* scenarios with the authorization-code grant
#      (BROWSER is browser.py, a headless browser that follows the redirects to moniker's
#      loopback callback);
#   2. `moniker list --json`, the tools the scenario's server offers;
#   3. `moniker call TOOL ARGS` for each listed tool, with arguments made from its inputSchema
#      (the required properties: numbers 1, 2, ..., strings, booleans; a property's default
#      when it has one; a parameter mirrored into a header gets a value that tries the header's
#      encoding), and empty lines on stdin (`yes ''`): moniker asks for an elicitation's
#      fields one by one on the terminal, and an empty line takes a field's default.
# When `list` or `call` exits 77 (the server asks for a login, or for more scope: one-shot
# commands never open a browser), `moniker login remote` and the command again, as a person
# would. The first command that fails otherwise ends the run with its exit status.
#
# Environment: MONIKER_BIN (default <target dir>/debug/moniker, CARGO_TARGET_DIR honoured),
# MONIKER_CONFORMANCE_WORK (keep the work directory there: config, key, tokens; else a
# temporary one, removed at exit), MONIKER_CONFORMANCE_LOG (moniker's --log, default info),
# MONIKER_CONFORMANCE_STEP_TIMEOUT (seconds per moniker command, default 25).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
TARGET=${CARGO_TARGET_DIR:-target}
[[ $TARGET == /* ]] || TARGET=$ROOT/$TARGET
MONIKER=${MONIKER_BIN:-$TARGET/debug/moniker}
LOG=${MONIKER_CONFORMANCE_LOG:-info}
STEP_TIMEOUT=${MONIKER_CONFORMANCE_STEP_TIMEOUT:-25}
# The fixed Client ID Metadata Document URL of the suite's CIMD scenario (auth/basic-cimd).
# An ordinary config key: moniker uses it only when the authorization server says
# client_id_metadata_document_supported.
CLIENT_METADATA_URL=https://conformance-test.local/client-metadata.json

log() {
    printf 'client.sh: %s\n' "$*" >&2
}
die() {
    log "$*"
    exit 2
}

(($# >= 1)) || die "usage: client.sh SERVER_URL (the suite appends it)"
URL=${!#}
SCENARIO=${MCP_CONFORMANCE_SCENARIO:-}
[[ -x $MONIKER ]] || die "$MONIKER is missing (MONIKER_BIN): run cargo build --workspace"

if [[ -n ${MONIKER_CONFORMANCE_WORK:-} ]]; then
    WORK=$MONIKER_CONFORMANCE_WORK
    rm -rf "$WORK"
    mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/moniker-conformance-client.XXXXXX")
fi
chmod 700 "$WORK"
CONFIG=$WORK/moniker.yaml

child=
cleanup() {
    [[ -z $child ]] || kill -TERM "$child" 2>/dev/null || true
    [[ -n ${MONIKER_CONFORMANCE_WORK:-} ]] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# Tokens and registrations stay in the work directory: one run of one scenario. No config or
# data of the user's reaches moniker, and no proxy: every server is local.
export XDG_DATA_HOME=$WORK/data XDG_CONFIG_HOME=$WORK/config
export BROWSER=$HERE/browser.py
unset MONIKER_CONFIG http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
mkdir -p "$XDG_DATA_HOME" "$XDG_CONFIG_HOME"

# The config, from the URL and the context. Prints the grant it chose.
#
# The grant: a context with a private key means the client-credentials grant with
# private_key_jwt (the suite hands out a signing key only for that). A client_id with a
# client_secret means a pre-registered client, which serves both grants: auth/pre-registration
# logs in with a browser, auth/client-credentials-basic must not; their contexts are alike, so
# there (and only there) the scenario's name decides. Context keys moniker has no config for
# (signing_algorithm: moniker takes the algorithm from the key; the idp_* of cross-app access)
# are logged and left out.
grant=$(python3 - "$CONFIG" "$URL" "$SCENARIO" "$CLIENT_METADATA_URL" "$WORK" <<'EOF'
import json, os, sys

config, url, scenario, metadata_url, work = sys.argv[1:]
context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
auth = {"client_metadata_url": metadata_url}
for key in ("client_id", "client_secret"):
    if context.get(key):
        auth[key] = context[key]
grant = "authorization_code"
if context.get("private_key_pem"):
    key_file = os.path.join(work, "client-key.pem")
    fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(context["private_key_pem"])
    auth["private_key"] = key_file
    grant = "client_credentials"
if scenario.startswith("auth/client-credentials-"):
    grant = "client_credentials"
if grant != "authorization_code":
    auth["grant"] = grant
unused = sorted(set(context) - {"name", "client_id", "client_secret", "private_key_pem"})
if unused:
    print(f"client.sh: context keys without a moniker config key: {', '.join(unused)}", file=sys.stderr)


def scalar(value: str) -> str:
    # moniker expands ${VAR} in server fields; the suite's values never hold one.
    if "${" in value:
        sys.exit(f"client.sh: {value!r} holds '${{', which moniker would expand")
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


lines = ["# Written by tests/conformance/client.sh for one conformance scenario.", "servers:", "  remote:",
         f"    url: {scalar(url)}"]
if os.environ.get("MONIKER_CONFORMANCE_WIRE") == "2026-07-28":
    lines.append("    protocol: 2026-07-28")
lines.append("    auth:")
lines += [f"      {key}: {scalar(value)}" for key, value in auth.items()]
fd = os.open(config, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    f.write("\n".join(lines) + "\n")
print(grant)
EOF
)
log "scenario ${SCENARIO:-?}, server $URL, grant $grant, config $CONFIG:"
# The config, with the client secret masked (only the suite's test credentials, but still).
sed -e 's/\(client_secret: \).*/\1<set>/' "$CONFIG" | sed 's/^/client.sh:   /' >&2

# Runs one moniker command in the background (so that a TERM from the suite reaches it), its
# stdin from $STDIN (default /dev/null). Returns its exit status.
moniker() {
    log "\$ moniker -c $CONFIG --log $LOG $*${STDIN:+ <$STDIN}"
    timeout --kill-after=2 "$STEP_TIMEOUT" "$MONIKER" -c "$CONFIG" --log "$LOG" "$@" <"${STDIN:-/dev/null}" &
    child=$!
    local rc=0
    wait "$child" || rc=$?
    child=
    log "moniker $1: exit $rc"
    return "$rc"
}

# A one-shot command (list, call) never opens a browser: when the server asks for a login or
# for more scope than the tokens have, it exits 77 and remembers the scope asked for. Then, as a
# person would: `moniker login remote` and the command again. A login that fails ends the run;
# so does a third 77 in a row (moniker's own login gives up after 3 authorizations anyway).
moniker_logged_in() {
    local rc logins=0
    while true; do
        rc=0
        moniker "$@" || rc=$?
        ((rc == 77 && logins < 3)) || return "$rc"
        logins=$((logins + 1))
        log "moniker $1 asks for a login (exit 77): moniker login remote, then $1 again"
        moniker login remote
    done
}

# 1. Log in: only an auth/* scenario's server asks for OAuth, and only the authorization-code
#    grant needs a person (a browser). Without this step, `list` would exit 77 and the login
#    would come then; logging in first is how a person starts.
if [[ $SCENARIO == auth/* && $grant == authorization_code ]]; then
    moniker login remote
fi

# 2. The tools.
moniker_logged_in list --json >"$WORK/list.json"
cat "$WORK/list.json" >&2

# 3. Call each tool, with arguments from its inputSchema, which `moniker list --json` gives
#    (the tools/list of `moniker serve`, moniker's own MCP server on stdio, is the fallback for
#    rows without one).
python3 - "$WORK/list.json" "$WORK/calls.tsv" "$MONIKER" "$CONFIG" "$LOG" "$STEP_TIMEOUT" <<'EOF'
import json, os, select, subprocess, sys, time

listing, calls, moniker, config, log, step_timeout = sys.argv[1:]
rows = json.load(open(listing))
tools = [r for r in rows if r.get("kind") == "tool" and r.get("listed", True)]
schemas = {r["name"]: r.get("inputSchema", r.get("input_schema")) for r in tools}


def served_schemas() -> dict:
    """initialize, notifications/initialized and tools/list through `moniker serve` on stdio."""
    argv = [moniker, "-c", config, "--log", log, "serve"]
    print(f"client.sh: $ moniker -c {config} --log {log} serve (tools/list on stdio, for the schemas)", file=sys.stderr)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr)
    deadline = time.monotonic() + float(step_timeout)
    buffer = b""

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    def receive(want_id: int) -> dict:
        nonlocal buffer
        while True:
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                message = json.loads(line)
                if message.get("id") == want_id and "method" not in message:
                    if "error" in message:
                        raise RuntimeError(f"moniker serve answered {message['error']}")
                    return message["result"]
                if "method" in message and "id" in message:  # a request to us: not supported
                    send({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "not supported by client.sh"}})
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                raise RuntimeError(f"moniker serve did not answer within {step_timeout}s")
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                raise RuntimeError(f"moniker serve exited ({proc.wait()}) before answering")
            buffer += chunk

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "moniker-conformance-client.sh", "version": "0"}}})
        receive(1)
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        found, cursor, next_id = {}, None, 2
        while True:
            send({"jsonrpc": "2.0", "id": next_id, "method": "tools/list",
                  "params": {"cursor": cursor} if cursor else {}})
            result = receive(next_id)
            next_id += 1
            found.update({t["name"]: t.get("inputSchema") for t in result.get("tools", [])})
            cursor = result.get("nextCursor")
            if not cursor:
                return found
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if tools and any(s is None for s in schemas.values()):
    try:
        served = served_schemas()
    except (RuntimeError, OSError, ValueError) as e:
        sys.exit(f"client.sh: no schemas from moniker serve: {e}")
    schemas.update({name: served.get(name) for name, s in schemas.items() if s is None})


def value(schema: dict, counter: list) -> object:
    if "default" in schema:
        return schema["default"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind in ("number", "integer"):
        counter[0] += 1
        return counter[0]
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return arguments(schema)
    return "test"


# A parameter mirrored into a header (`x-mcp-header`) is given too, with a value that tries the
# header's encoding as its description asks (non-ASCII, whitespace at the ends, control
# characters: Base64; plain ASCII: as it is; a null: no header).
HEADER_VALUES = [
    ("non-ascii", "日本語 café"),
    ("carriage return", "a\r\nb"),
    ("control", "a\u0001b"),
    ("leading tab", "\tx"),
    ("leading/trailing", " padded "),
    ("leading space", " lead"),
    ("trailing space", "trail "),
    ("internal space", "a b c"),
    ("empty", ""),
]


def header_value(schema: dict, counter: list) -> object:
    description = (schema.get("description") or "").lower()
    if "null" in description:
        return None  # an absent value: the header must be left out
    if schema.get("type") == "string":
        for words, text in HEADER_VALUES:
            if words in description:
                return text
    return value(schema, counter)


def arguments(schema) -> dict:
    schema = schema if isinstance(schema, dict) else {}
    properties = schema.get("properties") or {}
    counter = [0]
    given = {name: value(properties.get(name) or {}, counter) for name in schema.get("required") or []}
    for name, prop in properties.items():
        if isinstance(prop, dict) and "x-mcp-header" in prop and name not in given:
            given[name] = header_value(prop, counter)
    return given


with open(calls, "w") as out:
    for row in tools:
        out.write(f"{row['name']}\t{json.dumps(arguments(schemas.get(row['name'])))}\n")
EOF

# A scenario about what a client does with a listing alone (its server answers no call).
if [[ $SCENARIO == json-schema-ref-no-deref ]]; then
    log "the scenario is about the listing: no call"
    : >"$WORK/calls.tsv"
fi
# `yes ''`, but a file: a pipe would hide moniker's exit status behind yes's SIGPIPE.
printf '\n%.0s' $(seq 1000) >"$WORK/empty-lines"
while IFS=$'\t' read -r tool arguments; do
    STDIN=$WORK/empty-lines moniker_logged_in call "$tool" "$arguments"
done <"$WORK/calls.tsv"
[[ -s $WORK/calls.tsv ]] || log "the server lists no tool: nothing to call"
log "done"
