#!/usr/bin/env python3
"""Captures the HELD-OUT tool inventories (bench/findability/inventories-heldout/).

Same procedure as capture.py, for a disjoint set of real MCP servers from npm: for each server
below, `npm install --prefix <prefix>/<stem> <package>@<exact version>`, start its bin with `node`
over stdio, send `initialize` (protocolVersion 2025-06-18), `notifications/initialized`, then
`tools/list` (following `nextCursor`), and write `inventories-heldout/<stem>.json` as
`{"_comment", "serverInfo", "tools"}` with each tool exactly as the server listed it, in its order.

Each package gets its own npm prefix (so one slow or conflicting install cannot block the rest),
under $HELDOUT_NPM_PREFIX (default /tmp/moniker-heldout-npm); nothing is installed in the repo.
No real credentials are used: servers that refuse to start without a token get a dummy one.

Usage: python3 bench/findability/capture-heldout.py [stem ...]   (no stems: every server)
Stdlib only (Python 3.11+); needs `node` (20+) and `npm` on PATH.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from capture import PROTOCOL, Session, capture_each  # capture.py, beside this file: its stdio JSON-RPC session

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get("HELDOUT_NPM_PREFIX", "/tmp/moniker-heldout-npm")
OUT = os.path.join(HERE, "inventories-heldout")
DEFAULT_TIMEOUT = 60.0
NPM_TIMEOUT = 300

# stem, package, exact version, options (as in capture.py):
#   bin: which of the package's bins to run
#   args: command-line arguments; "{tmp}" becomes a fresh empty temporary directory
#   env: extra environment variables (dummy credentials only)
#   files: {name: text} written into the temporary directory before the server starts
#   note: appended to the _comment
SERVERS = [
    ("airtable", "airtable-mcp-server", "1.14.0", {"env": {"AIRTABLE_API_KEY": "patdummy.dummy"}}),
    ("antv-chart", "@antv/mcp-server-chart", "0.9.10", {}),
    ("bitbucket", "@nexus2520/bitbucket-mcp-server", "3.0.0",
     {"env": {"BITBUCKET_USERNAME": "dummy", "BITBUCKET_APP_PASSWORD": "dummy"}}),
    ("datadog", "@winor30/mcp-server-datadog", "1.8.0",
     {"env": {"DATADOG_API_KEY": "dummy", "DATADOG_APP_KEY": "dummy"}}),
    ("google-calendar", "@cocal/google-calendar-mcp", "2.6.3",
     {"env": {"GOOGLE_OAUTH_CREDENTIALS": "{tmp}/gcp-oauth.keys.json"},
      "files": {"gcp-oauth.keys.json": json.dumps({"installed": {
          "client_id": "dummy.apps.googleusercontent.com", "client_secret": "dummy",
          "project_id": "dummy", "redirect_uris": ["http://localhost"]}})},
      "note": "<tmpdir>/gcp-oauth.keys.json holds a dummy OAuth client "
              "({\"installed\": {\"client_id\": \"dummy.apps.googleusercontent.com\", ...}})."}),
    ("launchdarkly", "@launchdarkly/mcp-server", "0.6.2",
     {"args": ["start", "--api-key", "api-dummy"]}),
    ("line-bot", "@line/line-bot-mcp-server", "0.5.0",
     {"env": {"CHANNEL_ACCESS_TOKEN": "dummy", "DESTINATION_USER_ID": "Udummy"}}),
    ("lunchmoney", "@akutishevsky/lunchmoney-mcp", "3.0.0", {"env": {"LUNCHMONEY_API_TOKEN": "dummy"}}),
    ("mapbox", "@mapbox/mcp-server", "0.14.0",
     {"env": {"MAPBOX_ACCESS_TOKEN": "pk.eyJ1IjoiZHVtbXkiLCJhIjoiZHVtbXkifQ.dummy"}}),
    ("netlify", "@netlify/mcp", "1.15.1", {}),
    ("open-meteo", "open-meteo-mcp-server", "2.1.0",
     {"note": "The package asks for Node >= 22; it installs and lists its tools under Node 20."}),
]

# Captured as well but left out of the held-out set, to keep it near 250 tools and one server per
# domain (tool counts as listed with the options shown):
#   @roychri/mcp-server-asana@1.8.0 (41; ASANA_ACCESS_TOKEN=dummy),
#   @shortcut/mcp@0.25.0 (56; SHORTCUT_API_TOKEN=dummy),
#   @ivotoby/contentful-management-mcp-server@1.21.0 (40; CONTENTFUL_MANAGEMENT_ACCESS_TOKEN=CFPAT-dummy),
#   mcp-discord@1.3.4 (22; DISCORD_TOKEN=dummy), @pinecone-database/mcp@0.3.0 (9; PINECONE_API_KEY=dummy),
#   creem@1.13.0 (79; `start --api-key dummy`).
# Tried and failed here:
#   @coingecko/coingecko-mcp@8.2.0: npm install downloads a tarball from github.com (no network).
#   @postman/postman-mcp-server@2.13.0: its install script runs `npx only-allow pnpm` and fails.
#   @akutishevsky/lunchmoney-mcp exits without LUNCHMONEY_API_TOKEN (set above);
#   @cocal/google-calendar-mcp exits unless GOOGLE_OAUTH_CREDENTIALS names an existing file (written above).


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def prefix_of(stem):
    return os.path.join(PREFIX, stem)


def package_dir(stem, pkg):
    return os.path.join(prefix_of(stem), "node_modules", *pkg.split("/"))


def installed_version(stem, pkg):
    try:
        with open(os.path.join(package_dir(stem, pkg), "package.json")) as f:
            return json.load(f).get("version")
    except OSError:
        return None


def npm_install(stem, pkg, version):
    if installed_version(stem, pkg) == version:
        return True
    os.makedirs(prefix_of(stem), exist_ok=True)
    cmd = ["npm", "install", "--prefix", prefix_of(stem), "--no-audit", "--no-fund", "--save-exact",
           "%s@%s" % (pkg, version)]
    # No browser downloads at install time (there may be no network but the registry).
    env = dict(os.environ, PUPPETEER_SKIP_DOWNLOAD="1", PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD="1")
    log("npm install %s@%s" % (pkg, version))
    try:
        rc = subprocess.run(cmd, env=env, timeout=NPM_TIMEOUT, stdout=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        log("  npm install timed out after %ds" % NPM_TIMEOUT)
        return False
    return rc == 0


def entry_point(stem, pkg, wanted=None):
    with open(os.path.join(package_dir(stem, pkg), "package.json")) as f:
        meta = json.load(f)
    bins = meta.get("bin")
    if isinstance(bins, str):
        return os.path.join(package_dir(stem, pkg), bins)
    if not bins:
        raise RuntimeError("%s has no bin" % pkg)
    if wanted is None:
        if len(bins) == 1:
            wanted = next(iter(bins))
        else:
            short = pkg.rsplit("/", 1)[-1]
            wanted = short if short in bins else sorted(bins)[0]
    return os.path.join(package_dir(stem, pkg), bins[wanted])


def capture(stem, pkg, version, opts):
    tmp = tempfile.mkdtemp(prefix="findability-heldout-%s-" % stem)
    try:
        subst = lambda s: s.replace("{tmp}", tmp)
        for name, text in opts.get("files", {}).items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        entry = entry_point(stem, pkg, opts.get("bin"))
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
    rel = os.path.relpath(entry, os.path.join(prefix_of(stem), "node_modules"))
    command = " ".join(["node", "node_modules/" + rel] + opts.get("args", []))
    comment = ("npm %s@%s, captured by bench/findability/capture-heldout.py: `%s` over stdio, "
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


def main():
    only = set(sys.argv[1:])
    chosen = [s for s in SERVERS if not only or s[0] in only]
    install = lambda stem, pkg, ver, _: None if npm_install(stem, pkg, ver) else "npm install"
    return capture_each(chosen, lambda pkg, ver: "%s@%s" % (pkg, ver), install, capture)


if __name__ == "__main__":
    sys.exit(main())
