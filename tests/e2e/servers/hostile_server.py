#!/usr/bin/env python3
"""A stdio MCP server that misbehaves as `HOSTILE` (a comma list) says, for test_hostile_peers.py.

- `stderr_endless`: after `initialized`, writes stderr without a newline, without end.
- `stderr_not_utf8`: on its first call, writes a stderr line that is not UTF-8, then a line
  every 20 ms, counting the lines written in `$HOSTILE_OUT/stderr_written` (and the error that
  stopped it, if one did).
- `stop_reading`: after its first listing, reads stdin no more.
- `asks`: after `initialized`, sends `$ASKS` `roots/list` requests with ids of `$ID_BYTES`
  bytes, then as many with short ids; writes each error answer's message to
  `$HOSTILE_OUT/answers` (one a line).
- `relist_fails`: after its first listing, says its tools changed every 50 ms and answers every
  later listing with an error of `$ERROR_BYTES` bytes.

Tools: `$TOOLS` (names, comma-separated), else `echo`.
"""

import json
import os
import sys
import threading
import time

MODES = set(filter(None, os.environ.get("HOSTILE", "").split(",")))
OUT = os.environ.get("HOSTILE_OUT", ".")
lock = threading.Lock()


def send(message: dict) -> None:
    with lock:
        sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
        sys.stdout.buffer.flush()


def tools() -> list[dict]:
    names = os.environ.get("TOOLS", "echo").split(",")
    return [{"name": n, "description": f"the tool {n}", "inputSchema": {"type": "object"}} for n in names]


def stderr_endless() -> None:
    chunk = b"A" * (1 << 20)
    while True:
        try:
            sys.stderr.buffer.write(chunk)
            sys.stderr.buffer.flush()
        except OSError:
            return


def stderr_not_utf8() -> None:
    sys.stderr.buffer.write(b"a file named caf\xe9 \xff\xfe\n")
    sys.stderr.buffer.flush()
    written = 0
    while True:
        time.sleep(0.02)
        try:
            sys.stderr.buffer.write(b"log line %d\n" % written)
            sys.stderr.buffer.flush()
            written += 1
            note = str(written)
        except OSError as e:
            note = f"{written} then {e!r}"
        with open(os.path.join(OUT, "stderr_written.tmp"), "w") as f:
            f.write(note)
        os.replace(os.path.join(OUT, "stderr_written.tmp"), os.path.join(OUT, "stderr_written"))
        if "then" in note:
            return


def asks() -> None:
    count = int(os.environ.get("ASKS", "100"))
    long_id = "i" * int(os.environ.get("ID_BYTES", "2048"))
    for k in range(count):
        send({"jsonrpc": "2.0", "id": f"{long_id}{k}", "method": "roots/list", "params": {}})
    for k in range(count):
        send({"jsonrpc": "2.0", "id": f"short-{k}", "method": "roots/list", "params": {}})


def say_changed() -> None:
    while True:
        time.sleep(0.05)
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


listed = False
for line in sys.stdin.buffer:
    if not line.strip():
        continue
    message = json.loads(line)
    method, id_ = message.get("method"), message.get("id")
    if method is None and "error" in message:
        with open(os.path.join(OUT, "answers"), "a") as f:
            f.write(json.dumps(message["error"]) + "\n")
    elif method == "initialize":
        send({"jsonrpc": "2.0", "id": id_, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1"},
        }})
    elif method == "notifications/initialized":
        if "stderr_endless" in MODES:
            threading.Thread(target=stderr_endless, daemon=True).start()
        if "asks" in MODES:
            threading.Thread(target=asks, daemon=True).start()
    elif method == "tools/list":
        if listed and "relist_fails" in MODES:
            error_bytes = int(os.environ.get("ERROR_BYTES", "1000000"))
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32603, "message": "E" * error_bytes}})
            continue
        send({"jsonrpc": "2.0", "id": id_, "result": {"tools": tools()}})
        if not listed and "relist_fails" in MODES:
            threading.Thread(target=say_changed, daemon=True).start()
        listed = True
        if "stop_reading" in MODES:
            time.sleep(1e6)
    elif method == "tools/call":
        if "stderr_not_utf8" in MODES and not os.path.exists(os.path.join(OUT, "stderr_started")):
            open(os.path.join(OUT, "stderr_started"), "w").close()
            threading.Thread(target=stderr_not_utf8, daemon=True).start()
        send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": "ok"}]}})
    elif id_ is not None:
        send({"jsonrpc": "2.0", "id": id_, "result": {}})
