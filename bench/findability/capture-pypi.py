#!/usr/bin/env python3
"""Captures the tool inventories of real MCP servers from PyPI (bench/findability/inventories-pypi/).

Same procedure as capture-heldout.py, for a disjoint set of MCP servers published on PyPI: for each
server below, create a venv under <prefix>/<stem>, `pip install <package>==<exact version>` into it,
start the server (its console script, or `python -m <module>`) over stdio, send `initialize`
(protocolVersion 2025-06-18), `notifications/initialized`, then `tools/list` (following
`nextCursor`), and write `inventories-pypi/<stem>.json` as `{"_comment", "serverInfo", "tools"}`
with each tool exactly as the server listed it, in its order.

Each package gets its own venv (so one slow or conflicting install cannot block the rest), under
$PYPI_VENV_PREFIX (default /tmp/moniker-pypi-venvs); nothing is installed in the repo. The venvs
are made with the repository's .venv/bin/python (3.11) if it exists, else `python3.11` on PATH
($PYPI_PYTHON overrides both); a server whose package needs Python 3.12 gets `python3.12` (or
pyenv's, or $PYPI_PYTHON312). No real credentials are used: servers that refuse to start without a token get a
dummy one, and nothing is reached over the network but the package registry (by pip). Servers
run with PYTHONHASHSEED=0, so that schemas built from sets list in the same order every time.

Usage: python3 bench/findability/capture-pypi.py [stem ...]   (no stems: every server)
Stdlib only (Python 3.11+); needs network access to PyPI for the installs.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from capture import PROTOCOL, capture_each  # capture.py, beside this file
from capture import Session as StdioSession  # its JSON-RPC session over stdio

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get("PYPI_VENV_PREFIX", "/tmp/moniker-pypi-venvs")
OUT = os.path.join(HERE, "inventories-pypi")
DEFAULT_TIMEOUT = 90.0  # first starts compile bytecode and import boto3, pandas, ...
PIP_TIMEOUT = 900
VENV_TIMEOUT = 120


def base_python(minor=None):
    """The interpreter the venvs are made with: 3.11 unless a server's `python` option asks for
    another minor version (e.g. "3.12" for packages whose Requires-Python excludes 3.11)."""
    if minor is None:
        if os.environ.get("PYPI_PYTHON"):
            return os.environ["PYPI_PYTHON"]
        repo_venv = os.path.join(HERE, "..", "..", ".venv", "bin", "python")
        if os.path.exists(repo_venv):
            return os.path.abspath(repo_venv)
        minor = "3.11"
    var = "PYPI_PYTHON" + minor.replace(".", "")
    if os.environ.get(var):
        return os.environ[var]
    # pyenv's shim may exist without that version being selected: try it, then pyenv's versions.
    cands = [shutil.which("python" + minor)]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (minor, minor))),
                    reverse=True)
    for c in cands:
        if c and subprocess.run([c, "-c", ""], capture_output=True).returncode == 0:
            return c
    raise RuntimeError("no python%s found (set $%s)" % (minor, var))


# stem, package, exact version, options:
#   python: the Python minor version for the venv (default 3.11; "3.12" where the package needs it)
#   pip: further requirements installed with the package (pins for dependencies that the package
#        leaves open and that broke it since: mcp 2.x dropped mcp.server.fastmcp, for one)
#   script: the console script to run (default: the package name)
#   module: run `python -m <module>` instead of a console script
#   args: command-line arguments; "{tmp}" becomes a fresh empty temporary directory
#   env: extra environment variables (dummy credentials only)
#   files: {name: text} written into the temporary directory before the server starts
#   timeout: seconds allowed for the start and tools/list (default DEFAULT_TIMEOUT)
#   note: appended to the _comment
AWS_ENV = {"AWS_CONFIG_FILE": "{tmp}/aws-config", "AWS_SHARED_CREDENTIALS_FILE": "{tmp}/aws-credentials",
           "AWS_REGION": "us-east-1", "FASTMCP_LOG_LEVEL": "ERROR"}
AWS_FILES = {"aws-config": "[default]\nregion = us-east-1\n",
             "aws-credentials": "[default]\naws_access_key_id = AKIADUMMYDUMMYDUMMY0\n"
                                "aws_secret_access_key = dummy\n"}
AWS_NOTE = ("<tmpdir>/aws-config and <tmpdir>/aws-credentials hold a [default] profile with "
            "region us-east-1 and dummy keys (aws_access_key_id = AKIADUMMYDUMMYDUMMY0, "
            "aws_secret_access_key = dummy).")
SERVERS = [
    ("arxiv", "arxiv-mcp-server", "0.8.2", {"args": ["--storage-path", "{tmp}"]}),
    ("aws-cloudwatch", "awslabs.cloudwatch-mcp-server", "0.3.1",
     {"script": "awslabs.cloudwatch-mcp-server", "env": AWS_ENV, "files": AWS_FILES, "note": AWS_NOTE}),
    ("aws-iam", "awslabs.iam-mcp-server", "1.1.2",
     {"script": "awslabs.iam-mcp-server", "env": AWS_ENV, "files": AWS_FILES, "note": AWS_NOTE}),
    ("blender", "blender-mcp", "2.0.0",
     {"note": "No Blender is running; listing tools needs none."}),
    ("chroma", "chroma-mcp", "0.2.6",
     {"args": ["--client-type", "ephemeral"], "pip": ["pydantic==2.11.10"],
      "note": "pydantic is pinned because chroma-mcp resolves mcp 1.6.0, which fails to import "
              "under the newest pydantic (2.14.4)."}),
    ("excel", "excel-mcp-server", "2.2.2", {"args": ["stdio"], "env": {"EXCEL_FILES_PATH": "{tmp}"}}),
    ("git", "mcp-server-git", "2026.10.19", {}),
    ("jira", "mcp-atlassian", "0.23.1",
     {"env": {"JIRA_URL": "https://dummy.atlassian.net", "JIRA_USERNAME": "dummy@example.com",
              "JIRA_API_TOKEN": "dummy"},
      "note": "Only Jira is configured, so its Confluence tools (35 more) are not listed."}),
    ("obsidian", "mcp-obsidian", "0.2.3", {"env": {"OBSIDIAN_API_KEY": "dummy"}}),
    ("pagerduty", "pagerduty-mcp", "1.1.0",
     {"python": "3.12", "env": {"PAGERDUTY_USER_API_KEY": "dummy"},
      "note": "Default (read-only) tool set; --enable-write-tools would list 101."}),
    ("redis", "redis-mcp-server", "0.5.1", {"args": ["--url", "redis://127.0.0.1:1/0"]}),
    ("tree-sitter", "mcp-server-tree-sitter", "0.7.0",
     {"pip": ["mcp==1.30.0"],
      "note": "mcp is pinned to the last 1.x: under mcp 2.x the server fails to import FastMCP."}),
    ("yahoo-finance", "mcp-yahoo-finance", "0.2.0", {}),
    ("zotero", "zotero-mcp-server", "0.15.1", {"script": "zotero-mcp", "env": {"ZOTERO_LOCAL": "true"}}),
]

# Captured as well but left out, to keep the set near 400 tools with one server per domain (tool
# counts as listed with the options shown; the AWS ones with AWS_ENV/AWS_FILES above):
#   office-word-mcp-server==1.1.11 (54; script word_mcp_server),
#   office-powerpoint-mcp-server==2.0.7 (37; script ppt_mcp_server, with mcp==1.30.0),
#   alpaca-mcp-server==2.4.0 (72; ALPACA_API_KEY=PKDUMMY, ALPACA_SECRET_KEY=dummy),
#   awslabs.billing-cost-management-mcp-server==0.0.42 (47), awslabs.amazon-sns-sqs-mcp-server==2.1.1 (43),
#   awslabs.aws-dataprocessing-mcp-server==0.2.2 (36), awslabs.eks-mcp-server==0.2.1 (16;
#   --allow-write --allow-sensitive-data-access), awslabs.aws-pricing-mcp-server==1.1.1 (9),
#   awslabs.aws-location-mcp-server==2.1.1 (8), awslabs.ecs-mcp-server==0.1.37 (7; script ecs-mcp-server),
#   awslabs.aws-documentation-mcp-server==1.2.3 (5), opensearch-mcp-server-py==0.12.0 (5;
#   OPENSEARCH_URL=http://127.0.0.1:1), mcp-clickhouse==0.7.0 (3; CLICKHOUSE_HOST=127.0.0.1,
#   CLICKHOUSE_PORT=1), mcp-server-time==2026.10.19 (2), mcp-server-fetch==2026.10.24 (1).
# Tried and failed here:
#   mcp-server-qdrant==0.8.1: downloads an embedding model (fastembed) at start.
#   mcp-server-docker==0.3.0 (Python 3.12): exits unless it can reach a Docker daemon.
#   postgres-mcp==0.3.0 (Python 3.12): pins pglast==7.2.0, which pip cannot find.
#   jupyter-mcp-server==2.2.4: no answer to initialize without a running Jupyter server.
#   mcp-server-git exits if --repository names a directory that is not a git repository (so none is given);
#   pagerduty-mcp, postgres-mcp and mcp-server-docker require Python 3.12;
#   awslabs.amazon-sns-sqs-mcp-server exits without a [default] AWS profile (hence AWS_FILES).


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def venv_of(stem):
    return os.path.join(PREFIX, stem)


def venv_python(stem):
    return os.path.join(venv_of(stem), "bin", "python")


def installed_version(stem, pkg):
    if not os.path.exists(venv_python(stem)):
        return None
    code = "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))"
    try:
        r = subprocess.run([venv_python(stem), "-c", code, pkg], capture_output=True, text=True,
                           timeout=60)
    except subprocess.TimeoutExpired:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def venv_minor(stem):
    try:
        with open(os.path.join(venv_of(stem), "pyvenv.cfg")) as f:
            for line in f:
                key, _, value = line.partition("=")
                if key.strip() in ("version", "version_info"):
                    return ".".join(value.strip().split(".")[:2])
    except OSError:
        pass
    return None


def requirements(pkg, version, opts):
    return ["%s==%s" % (pkg, version)] + opts.get("pip", [])


def pip_install(stem, pkg, version, opts):
    stamp = os.path.join(venv_of(stem), "capture-pypi-requirements.txt")
    wanted = "\n".join(requirements(pkg, version, opts)) + "\n"
    try:
        with open(stamp) as f:
            same = f.read() == wanted
    except OSError:
        same = False
    if same and installed_version(stem, pkg) == version:
        return True
    minor = opts.get("python", "3.11")
    if os.path.exists(venv_python(stem)) and venv_minor(stem) != minor:
        log("rm -r %s (Python %s, not %s)" % (venv_of(stem), venv_minor(stem), minor))
        shutil.rmtree(venv_of(stem))
    if not os.path.exists(venv_python(stem)):
        os.makedirs(PREFIX, exist_ok=True)
        log("python -m venv %s" % venv_of(stem))
        try:
            rc = subprocess.run([base_python(opts.get("python")), "-m", "venv", venv_of(stem)],
                                timeout=VENV_TIMEOUT).returncode
        except subprocess.TimeoutExpired:
            log("  venv timed out after %ds" % VENV_TIMEOUT)
            return False
        if rc != 0:
            return False
    cmd = [venv_python(stem), "-m", "pip", "install", "--disable-pip-version-check",
           "--no-input", "--quiet"] + requirements(pkg, version, opts)
    log("pip install %s" % " ".join(requirements(pkg, version, opts)))
    try:
        rc = subprocess.run(cmd, timeout=PIP_TIMEOUT, stdout=subprocess.DEVNULL).returncode
    except subprocess.TimeoutExpired:
        log("  pip install timed out after %ds" % PIP_TIMEOUT)
        return False
    if rc == 0:
        with open(stamp, "w") as f:
            f.write(wanted)
    return rc == 0


def command_of(stem, pkg, opts):
    """(argv prefix, how it is shown in the _comment)"""
    if opts.get("module"):
        return [venv_python(stem), "-m", opts["module"]], ["python", "-m", opts["module"]]
    script = opts.get("script", pkg)
    path = os.path.join(venv_of(stem), "bin", script)
    if not os.path.exists(path):
        raise RuntimeError("%s has no console script %s" % (pkg, script))
    return [path], [script]


class Session(StdioSession):
    """capture.py's JSON-RPC session over stdio; closing it always ends the server's whole
    process group (some Python servers leave helpers behind even when they exit in time)."""

    def close(self):
        super().close()
        try:
            os.killpg(self.proc.pid, 9)
        except OSError:
            pass
        self.proc.wait()


def capture(stem, pkg, version, opts):
    tmp = tempfile.mkdtemp(prefix="findability-pypi-%s-" % stem)
    try:
        subst = lambda s: s.replace("{tmp}", tmp)
        for name, text in opts.get("files", {}).items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        argv0, shown = command_of(stem, pkg, opts)
        argv = argv0 + [subst(a) for a in opts.get("args", [])]
        env = dict(os.environ)
        env.pop("VIRTUAL_ENV", None)
        env["PATH"] = os.path.join(venv_of(stem), "bin") + os.pathsep + env.get("PATH", "")
        env.update({k: subst(v) for k, v in opts.get("env", {}).items()})
        env.setdefault("NO_COLOR", "1")
        env.setdefault("PYTHONUNBUFFERED", "1")
        # Some servers build schema defaults from sets: a fixed hash seed keeps their order stable.
        env["PYTHONHASHSEED"] = "0"
        deadline = time.monotonic() + opts.get("timeout", DEFAULT_TIMEOUT)
        init, tools, pages = Session(argv, env, tmp).list_tools(deadline)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if not tools:
        raise RuntimeError("tools/list returned no tools")
    info = init.get("serverInfo", {})
    command = " ".join(shown + opts.get("args", []))
    venv = "a Python %s venv with `pip install %s`" % (
        opts.get("python", "3.11"), " ".join(requirements(pkg, version, opts)))
    comment = ("PyPI %s==%s, captured by bench/findability/capture-pypi.py: `%s` (from %s) over "
               "stdio, initialize (protocolVersion %s) then tools/list (%d page%s): %d tool%s, as "
               "listed."
               % (pkg, version, command.replace("{tmp}", "<tmpdir>"), venv, PROTOCOL, pages,
                  "" if pages == 1 else "s", len(tools), "" if len(tools) == 1 else "s"))
    shown_env = dict(opts.get("env", {}), PYTHONHASHSEED="0")
    comment += " Environment: %s." % ", ".join(
        "%s=%s" % (k, v.replace("{tmp}", "<tmpdir>")) for k, v in shown_env.items())
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
    unknown = only - {s[0] for s in SERVERS}
    if unknown:
        log("unknown stems: %s" % ", ".join(sorted(unknown)))
        return 2
    chosen = [s for s in SERVERS if not only or s[0] in only]
    return capture_each(chosen, lambda pkg, ver: "%s==%s" % (pkg, ver), install, capture)


def install(stem, pkg, ver, opts):
    """The server's venv (None), or why there is none."""
    try:
        installed = pip_install(stem, pkg, ver, opts)
    except Exception as e:  # no interpreter for the venv, ...
        log("    %s" % e)
        installed = False
    return None if installed else "pip install"


if __name__ == "__main__":
    sys.exit(main())
