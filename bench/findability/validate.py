#!/usr/bin/env python3
"""Checks the findability benchmark's data: inventories/*.json, the seed fixtures and tasks.json.

- every task names an existing server (an inventory here, or a seed fixture in ../../fixtures)
  and a tool that server lists;
- no duplicate requests; no tool is the answer of more than two tasks;
- at least 180 tasks; at least 330 distinct tools (server, name) across inventories and seeds;
- every inventory here has at least min(4, 2 x its tool count) tasks; the seeds at least 20 together;
- every inventory is shaped {_comment, serverInfo {name, version}, tools [{name, description,
  inputSchema}]} with unique tool names.

Prints a summary (tools per inventory, tasks per server, how many requests share no content word
with the tool's name) and exits non-zero on any failure. Stdlib only.
"""
import collections
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
INVENTORIES = os.path.join(HERE, "inventories")
SEEDS_DIR = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures"))
SEEDS = ["contextgraph", "ctxsys", "bridge"]
TASKS = os.path.join(HERE, "tasks.json")

MIN_TASKS = 180
MIN_TOOLS = 330
MIN_SEED_TASKS = 20
MAX_PER_TOOL = 2

# Words too generic to count as shared content between a request and a tool name.
STOP = set("""a an the to of in on for by at from with and or is are be it me my our us we you your i
this that these those what which who how do does can could please just all any get set api
""".split())

errors = []


def fail(msg):
    errors.append(msg)


def stem(w):
    for suf in ("ing", "ies", "es", "ed", "s"):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)] + ("y" if suf == "ies" else "")
    return w


def words(text):
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", text)
    return {stem(w) for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in STOP and len(w) > 1}


def load(path, stem_name, seed):
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail("%s: cannot load: %s" % (path, e))
        return None
    if not seed:
        for key in ("_comment", "serverInfo", "tools"):
            if key not in doc:
                fail("%s: missing %r" % (stem_name, key))
        info = doc.get("serverInfo") or {}
        if not isinstance(info, dict) or "name" not in info or "version" not in info:
            fail("%s: serverInfo needs name and version" % stem_name)
    tools = doc.get("tools") or []
    names = [t.get("name") for t in tools]
    for t in tools:
        for key in ("name", "inputSchema"):
            if key not in t:
                fail("%s: a tool lacks %r: %s" % (stem_name, key, t.get("name")))
        if not seed and "description" not in t:
            fail("%s: tool %s has no description" % (stem_name, t.get("name")))
    dup = [n for n, c in collections.Counter(names).items() if c > 1]
    if dup:
        fail("%s: duplicate tool names %s" % (stem_name, dup))
    if not tools:
        fail("%s: no tools" % stem_name)
    return names


def main():
    servers = {}  # stem -> (tool names, is seed)
    for path in sorted(glob.glob(os.path.join(INVENTORIES, "*.json"))):
        stem_name = os.path.basename(path)[:-5]
        names = load(path, stem_name, seed=False)
        if names is not None:
            servers[stem_name] = (names, False)
    for s in SEEDS:
        if s in servers:
            fail("inventory %s shadows a seed fixture" % s)
        names = load(os.path.join(SEEDS_DIR, s + ".json"), s, seed=True)
        if names is not None:
            servers[s] = (names, True)

    try:
        with open(TASKS) as f:
            tasks = json.load(f)
    except (OSError, ValueError) as e:
        print("FAIL: cannot load tasks.json: %s" % e)
        return 1

    per_server = collections.Counter()
    per_tool = collections.Counter()
    requests = collections.Counter()
    disjoint = 0
    for i, t in enumerate(tasks):
        if set(t) != {"request", "server", "tool"}:
            fail("task %d: keys must be request, server, tool: %s" % (i, sorted(t)))
            continue
        req, server, tool = t["request"], t["server"], t["tool"]
        requests[req.strip().lower()] += 1
        if server not in servers:
            fail("task %d: unknown server %r" % (i, server))
            continue
        if tool not in servers[server][0]:
            fail("task %d: %s has no tool %r" % (i, server, tool))
            continue
        per_server[server] += 1
        per_tool[(server, tool)] += 1
        if not (words(req) & words(tool)):
            disjoint += 1

    for req, c in requests.items():
        if c > 1:
            fail("duplicate request (%dx): %s" % (c, req))
    for (server, tool), c in per_tool.items():
        if c > MAX_PER_TOOL:
            fail("%s/%s is the answer of %d tasks (max %d)" % (server, tool, c, MAX_PER_TOOL))
    if len(tasks) < MIN_TASKS:
        fail("%d tasks (need >= %d)" % (len(tasks), MIN_TASKS))
    total_tools = sum(len(names) for names, _ in servers.values())
    if total_tools < MIN_TOOLS:
        fail("%d distinct tools (need >= %d)" % (total_tools, MIN_TOOLS))
    for s, (names, seed) in servers.items():
        if not seed:
            need = min(4, 2 * len(names))
            if per_server[s] < need:
                fail("%s: %d tasks (need >= %d)" % (s, per_server[s], need))
    seed_tasks = sum(per_server[s] for s in SEEDS)
    if seed_tasks < MIN_SEED_TASKS:
        fail("seed fixtures: %d tasks (need >= %d)" % (seed_tasks, MIN_SEED_TASKS))

    print("%-22s %6s %6s %8s" % ("server", "tools", "tasks", "tools hit"))
    for s in sorted(servers, key=lambda s: (servers[s][1], -len(servers[s][0]), s)):
        names, seed = servers[s]
        hit = sum(1 for (srv, _) in per_tool if srv == s)
        print("%-22s %6d %6d %8d%s" % (s, len(names), per_server[s], hit, "  (seed)" if seed else ""))
    print("inventories: %d here + %d seeds; distinct tools: %d"
          % (sum(1 for v in servers.values() if not v[1]), len(SEEDS), total_tools))
    print("tasks: %d over %d distinct tools; %d (%.0f%%) share no content word with the tool name"
          % (len(tasks), len(per_tool), disjoint, 100.0 * disjoint / max(1, len(tasks))))
    if errors:
        for e in errors:
            print("FAIL:", e)
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
