#!/usr/bin/env python3
"""Captures the tool inventories of real MCP servers from npm for the findability benchmark.

For each server below: `npm install --prefix bench/findability/.npm <package>@<exact version>`,
start its bin with `node` over stdio, send `initialize` (protocolVersion 2025-06-18),
`notifications/initialized`, then `tools/list` (following `nextCursor`), and write
`inventories/<stem>.json` as `{"_comment", "serverInfo", "tools"}` with each tool exactly as the
server listed it, in its order.

No real credentials are used: where a server refuses to start without a token or an API key it
gets a dummy value; servers that still cannot list tools are reported and skipped.

Usage: python3 bench/findability/capture.py [stem ...]   (no stems: every server)
Stdlib only (Python 3.11+); needs `node` (20+) and `npm` on PATH.
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.path.join(HERE, ".npm")
OUT = os.path.join(HERE, "inventories")
PROTOCOL = "2025-06-18"
DEFAULT_TIMEOUT = 60.0
NPM_TIMEOUT = 300

# stem, package, exact version, options:
#   bin: which of the package's bins to run (default: the only one, or the one named like the package)
#   args: command-line arguments; "{tmp}" becomes a fresh empty temporary directory
#   env: extra environment variables (dummy credentials only)
#   note: appended to the _comment
SERVERS = [
    ("everything", "@modelcontextprotocol/server-everything", "2026.8.31", {"args": ["stdio"]}),
    ("filesystem", "@modelcontextprotocol/server-filesystem", "2026.8.31", {"args": ["{tmp}"]}),
    ("memory", "@modelcontextprotocol/server-memory", "2026.8.31",
     {"env": {"MEMORY_FILE_PATH": "{tmp}/memory.jsonl"}}),
    ("sequential-thinking", "@modelcontextprotocol/server-sequential-thinking", "2026.8.31", {}),
    ("github", "@modelcontextprotocol/server-github", "2025.4.8",
     {"env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "dummy"}}),
    ("gitlab", "@modelcontextprotocol/server-gitlab", "2025.4.25",
     {"env": {"GITLAB_PERSONAL_ACCESS_TOKEN": "dummy", "GITLAB_API_URL": "https://gitlab.invalid/api/v4"}}),
    ("slack", "@modelcontextprotocol/server-slack", "2025.4.25",
     {"env": {"SLACK_BOT_TOKEN": "xoxb-dummy", "SLACK_TEAM_ID": "T00000000"}}),
    ("puppeteer", "@modelcontextprotocol/server-puppeteer", "2025.5.12",
     {"note": "Installed with PUPPETEER_SKIP_DOWNLOAD=1; listing tools needs no browser."}),
    ("brave-search", "@modelcontextprotocol/server-brave-search", "0.6.2",
     {"env": {"BRAVE_API_KEY": "dummy"}}),
    ("google-maps", "@modelcontextprotocol/server-google-maps", "0.6.2",
     {"env": {"GOOGLE_MAPS_API_KEY": "dummy"}}),
    ("postgres", "@modelcontextprotocol/server-postgres", "0.6.2",
     {"args": ["postgresql://dummy:dummy@127.0.0.1:1/dummy"]}),
    ("playwright", "@playwright/mcp", "0.0.83", {}),
    ("chrome-devtools", "chrome-devtools-mcp", "1.11.0", {}),
    ("notion", "@notionhq/notion-mcp-server", "2.5.2", {"env": {"NOTION_TOKEN": "ntn_dummy"}}),
    ("context7", "@upstash/context7-mcp", "4.1.1", {}),
    ("kubernetes", "mcp-server-kubernetes", "4.1.7", {}),
    ("sentry", "@sentry/mcp-server", "0.39.0", {"args": ["--access-token=dummy"]}),
    ("exa", "exa-mcp-server", "3.4.1", {"env": {"EXA_API_KEY": "dummy"}}),
    ("tavily", "tavily-mcp", "0.2.22", {"env": {"TAVILY_API_KEY": "tvly-dummy"}}),
    ("firecrawl", "firecrawl-mcp", "3.26.0", {"env": {"FIRECRAWL_API_KEY": "fc-dummy"}}),
    ("supabase", "@supabase/mcp-server-supabase", "0.13.0",
     {"args": ["--access-token=dummy",
               "--features=account,database,debugging,development,functions,branching,storage"],
      "note": "The 'docs' feature group is left out: listing it fetches a schema from supabase.com."}),
    ("mongodb", "mongodb-mcp-server", "3.0.4", {}),
    ("azure", "@azure/mcp", "2.0.5",
     {"args": ["server", "start"],
      "note": "Default (namespace) mode: most tools are routers over many sub-commands."}),
    ("hubspot", "@hubspot/mcp-server", "0.4.0", {"env": {"PRIVATE_APP_ACCESS_TOKEN": "dummy"}}),
    ("circleci", "@circleci/mcp-server-circleci", "0.20.0", {"env": {"CIRCLECI_TOKEN": "dummy"}}),
    ("lara", "@translated/lara-mcp", "1.0.6", {"env": {"LARA_ACCESS_KEY_ID": "dummy", "LARA_ACCESS_KEY_SECRET": "dummy"}}),
    ("youtube-transcript", "@kimtaeyoon83/mcp-server-youtube-transcript", "0.1.1", {}),
    ("elasticsearch", "@elastic/mcp-server-elasticsearch", "0.3.1", {"env": {"ES_URL": "http://127.0.0.1:1", "ES_API_KEY": "dummy"}}),
    ("everart", "@modelcontextprotocol/server-everart", "0.6.2", {"env": {"EVERART_API_KEY": "dummy"}}),
    ("aws-kb-retrieval", "@modelcontextprotocol/server-aws-kb-retrieval", "0.6.2", {"env": {"AWS_ACCESS_KEY_ID": "dummy", "AWS_SECRET_ACCESS_KEY": "dummy", "AWS_REGION": "us-east-1"}}),
    ("browserbase", "@browserbasehq/mcp-server-browserbase", "2.4.3", {"env": {"BROWSERBASE_API_KEY": "dummy", "BROWSERBASE_PROJECT_ID": "dummy", "GEMINI_API_KEY": "dummy"}}),
]

# Tried and left out: they cannot list tools here without real credentials, a live backend or
# network access beyond the npm registry.
SKIPPED = [
    ("@modelcontextprotocol/server-redis@2025.4.25", "exits unless it can connect to a Redis server"),
    ("@stripe/mcp@0.3.3", "proxies to mcp.stripe.com; no tools without that network"),
    ("@heroku/mcp-server@1.2.8", "crashes at start: imports an @modelcontextprotocol/sdk path the "
     "resolved SDK (1.32.2) no longer has"),
    ("@twilio-alpha/mcp@0.7.0", "exits before initialize with dummy credentials"),
    ("@cloudflare/mcp-server-cloudflare@0.2.0", "needs a wrangler login (~/.config/.wrangler)"),
    ("@benborla29/mcp-server-mysql@2.0.9", "exits when it cannot connect to MySQL"),
    ("@upstash/mcp-server@0.3.0", "checks the API key against api.upstash.com at start"),
    ("@modelcontextprotocol/server-gdrive@2025.1.14", "needs Google OAuth credentials (`auth` first)"),
    ("@neondatabase/mcp-server-neon@0.6.5", "npm install does not finish (hangs) here"),
    ("@shopify/dev-mcp@1.16.0", "npm install does not finish (hangs) here"),
]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def npm_install(specs):
    """Installs the given package@version specs into PREFIX; one at a time if the batch fails."""
    os.makedirs(PREFIX, exist_ok=True)
    missing = [s for s in specs if installed_version(s.rsplit("@", 1)[0]) != s.rsplit("@", 1)[1]]
    if not missing:
        return
    cmd = ["npm", "install", "--prefix", PREFIX, "--no-audit", "--no-fund", "--save-exact"]
    # No browser downloads at install time (there may be no network but the registry).
    env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1", PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
    log("npm install", " ".join(missing))
    if run_npm(cmd + missing, env) == 0:
        return
    for s in missing:
        if run_npm(cmd + [s], env) != 0:
            log("  install failed:", s)


def run_npm(cmd, env):
    try:
        return subprocess.run(cmd, env=env, timeout=NPM_TIMEOUT).returncode
    except subprocess.TimeoutExpired:
        log("  npm install timed out after %ds" % NPM_TIMEOUT)
        return -1


def package_dir(pkg):
    return os.path.join(PREFIX, "node_modules", *pkg.split("/"))


def installed_version(pkg):
    try:
        with open(os.path.join(package_dir(pkg), "package.json")) as f:
            return json.load(f).get("version")
    except OSError:
        return None


def entry_point(pkg, wanted=None):
    with open(os.path.join(package_dir(pkg), "package.json")) as f:
        meta = json.load(f)
    bins = meta.get("bin")
    if isinstance(bins, str):
        return os.path.join(package_dir(pkg), bins)
    if not bins:
        raise RuntimeError("%s has no bin" % pkg)
    if wanted is None:
        if len(bins) == 1:
            wanted = next(iter(bins))
        else:
            short = pkg.rsplit("/", 1)[-1]
            wanted = short if short in bins else sorted(bins)[0]
    return os.path.join(package_dir(pkg), bins[wanted])


class Session:
    """A JSON-RPC session with one server over stdio (newline-delimited JSON)."""

    def __init__(self, argv, env, cwd):
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env=env, cwd=cwd, start_new_session=True)
        self.lines = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._pump_out, daemon=True).start()
        threading.Thread(target=self._pump_err, daemon=True).start()
        self.next_id = 1

    def _pump_out(self):
        for raw in self.proc.stdout:
            self.lines.put(raw)
        self.lines.put(None)

    def _pump_err(self):
        for raw in self.proc.stderr:
            if len(self.stderr) < 200:
                self.stderr.append(raw.decode("utf-8", "replace").rstrip())

    def send(self, msg):
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params, deadline):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer to %s" % method)
            try:
                raw = self.lines.get(timeout=left)
            except queue.Empty:
                raise TimeoutError("no answer to %s" % method)
            if raw is None:
                raise RuntimeError("server exited (%s) before answering %s" % (self.proc.poll(), method))
            try:
                msg = json.loads(raw)
            except ValueError:
                continue  # a log line on stdout
            if not isinstance(msg, dict):
                continue
            if "method" in msg:  # a request or notification from the server
                if "id" in msg:
                    reply = {"jsonrpc": "2.0", "id": msg["id"]}
                    if msg["method"] == "ping":
                        reply["result"] = {}
                    elif msg["method"] == "roots/list":
                        reply["result"] = {"roots": []}
                    else:
                        reply["error"] = {"code": -32601, "message": "not supported"}
                    self.send(reply)
                continue
            if msg.get("id") != rid:
                continue
            if "error" in msg:
                raise RuntimeError("%s failed: %s" % (method, json.dumps(msg["error"])[:300]))
            return msg.get("result", {})

    def list_tools(self, deadline):
        """initialize, then every page of tools/list, then close: (the initialize result, the
        tools, how many pages). A failure says the server's last lines of stderr."""
        try:
            init = self.request("initialize", {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "moniker-findability-capture", "version": "0.1.0"},
            }, deadline)
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
            tools, cursor, pages = [], None, 0
            while True:
                params = {"cursor": cursor} if cursor else {}
                res = self.request("tools/list", params, deadline)
                tools.extend(res.get("tools", []))
                pages += 1
                cursor = res.get("nextCursor")
                if not cursor:
                    return init, tools, pages
        except Exception as e:
            tail = "\n    ".join(self.stderr[-8:])
            raise RuntimeError("%s\n    %s" % (e, tail)) from None
        finally:
            self.close()

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                pass
            self.proc.wait()


def capture(stem, pkg, version, opts):
    tmp = tempfile.mkdtemp(prefix="findability-%s-" % stem)
    try:
        subst = lambda s: s.replace("{tmp}", tmp)
        entry = entry_point(pkg, opts.get("bin"))
        argv = ["node", entry] + [subst(a) for a in opts.get("args", [])]
        env = dict(os.environ)
        env.update({k: subst(v) for k, v in opts.get("env", {}).items()})
        env.setdefault("NO_COLOR", "1")
        deadline = time.monotonic() + opts.get("timeout", DEFAULT_TIMEOUT)
        init, tools, pages = Session(argv, env, tmp).list_tools(deadline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not tools:
        raise RuntimeError("tools/list returned no tools")
    info = init.get("serverInfo", {})
    command = " ".join(["node", os.path.relpath(entry, PREFIX)] + opts.get("args", []))
    comment = ("npm %s@%s, captured by bench/findability/capture.py: `%s` over stdio, "
               "initialize (protocolVersion %s) then tools/list (%d page%s): %d tool%s, as listed."
               % (pkg, version, command.replace("{tmp}", "<tmpdir>"), PROTOCOL, pages,
                  "" if pages == 1 else "s", len(tools), "" if len(tools) == 1 else "s"))
    if opts.get("env"):
        comment += " Environment: %s." % ", ".join(
            "%s=%s" % (k, v.replace("{tmp}", "<tmpdir>")) for k, v in opts["env"].items())
    if opts.get("note"):
        comment += " " + opts["note"]
    doc = {"_comment": comment,
           "serverInfo": {"name": info.get("name"), "version": info.get("version")},
           "tools": tools}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, stem + ".json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")
    return len(tools)


def capture_each(chosen, label, install, capture_one):
    """Installs (`install(stem, pkg, version, opts)`: None, or why it failed) and captures
    (`capture_one`: the count of tools) each chosen server, `label(pkg, version)` naming it;
    prints what was captured and what failed; returns the exit code."""
    ok, failed = [], []
    for stem, pkg, ver, opts in chosen:
        log("==> %s (%s)" % (stem, label(pkg, ver)))
        why = install(stem, pkg, ver, opts)
        if why:
            failed.append((stem, why))
            log("    FAILED: %s" % why)
            continue
        try:
            n = capture_one(stem, pkg, ver, opts)
            ok.append((stem, n))
            log("    %d tools" % n)
        except Exception as e:
            failed.append((stem, str(e)))
            log("    FAILED: %s" % e)
    print("captured: %s" % ", ".join("%s (%d)" % x for x in ok))
    print("total tools: %d" % sum(n for _, n in ok))
    if failed:
        print("failed: %s" % ", ".join(stem for stem, _ in failed))
    return 1 if failed else 0


def main():
    only = set(sys.argv[1:])
    chosen = [s for s in SERVERS if not only or s[0] in only]
    npm_install(["%s@%s" % (pkg, ver) for _, pkg, ver, _ in chosen])
    return capture_each(chosen, lambda pkg, ver: "%s@%s" % (pkg, ver),
                        lambda *_: None, capture)


if __name__ == "__main__":
    sys.exit(main())
