#!/usr/bin/env python3
"""Search on every task set, from one run: the findability benchmark over each set at each of
its sizes with each semantic half (the shipped table, a model run whole, a second model), and
what `moniker serve` costs with each (bench/search-memory.py), as one markdown section.

    cargo build --release -p moniker-findability -p moniker-mcp -p moniker-fixture
    python3 bench/search-sets.py --model DIR [--mpnet DIR] [--livemcpbench PATH/tools.json]
        [--write BENCHMARKS.md]

--model DIR: all-MiniLM-L6-v2's folder (crates/surface/model/fetch.sh DIR); --mpnet DIR:
all-mpnet-base-v2's (fetch.sh DIR all-mpnet-base-v2). --livemcpbench: LiveMCPBench's inventory,
third-party data the repository does not hold; without it its two sets are left out.
--write FILE: the section replaces the one of the same heading there (or is appended).
Prints the section. Takes about 15 minutes on 2 cores with both models.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FINDABILITY = ROOT / "target" / "release" / "moniker-findability"
HEADING = "## Search on every task set"
DATA = ROOT / "bench" / "findability"

# The sets over the benchmark's own servers reach past 527 tools with another set's servers,
# which none of their requests names, after theirs.
DISTRACTORS = ["--distractors", str(DATA / "inventories-heldout")]
# (file, what it is to the ranker, its pool's arguments: "lmb" stands for the --livemcpbench path)
SETS = [
    ("tasks.json", "the fusion was chosen on it", DISTRACTORS),
    ("tasks-plain.json", "written before, in sight when choices were made", DISTRACTORS),
    ("tasks-livemcpbench.json", "written before, in sight when choices were made", ["--livemcpbench", "lmb"]),
    ("tasks-heldout.json", "**held out**", ["--inventories", str(DATA / "inventories-heldout")]),
    ("tasks-pypi.json", "**held out**", ["--inventories", str(DATA / "inventories-pypi")]),
    ("tasks-livemcpbench-2.json", "**held out**", ["--livemcpbench", "lmb"]),
    ("tasks-fixture.json", "**held out**", DISTRACTORS),
]

GOALS = {"index": "5 s", "cached": "100 ms", "query": "10 ms", "rss": "100 MB (60 with the table)"}


def findability(tasks: str, pool: list[str], model: str | None, livemcpbench: str) -> list[dict]:
    args = [str(FINDABILITY), "--tasks", str(DATA / tasks), "--json"]
    args += [livemcpbench if a == "lmb" else a for a in pool]
    if model:
        args += ["--model", model]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)}:\n{done.stderr}")
    return json.loads(done.stdout)


def memory(model: str | None, cached: bool) -> dict:
    args = [sys.executable, str(ROOT / "bench" / "search-memory.py"), "--tools", "527"]
    args += ["--model", model] if model else []
    args += ["--cached"] if cached else []
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)}:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def pct(recall: dict) -> str:
    tasks = recall["tasks"] or 1
    return f"{100 * recall['at1'] / tasks:.1f} / {100 * recall['at5'] / tasks:.1f}"


def recall_table(results: dict, halves: list[str]) -> list[str]:
    head = ["set", "", "tools", "tasks", "plain BM25", "lexical alone"]
    for half in halves:
        head += [f"{half}: fused", f"{half} alone"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for tasks, role, _ in SETS:
        runs = results.get(tasks)
        if not runs:
            continue
        for i, row in enumerate(runs[halves[0]]):
            cells = [f"`{tasks}`" if i == 0 else "", role if i == 0 else "", str(row["size"])]
            cells += [str(row["moniker"]["tasks"]), pct(row["raw"]), pct(row["lexical"])]
            for half in halves:
                same = runs[half][i]
                cells += [pct(same["moniker"]), pct(same["semantic"])]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def cost_table(results: dict, costs: dict, halves: list[str]) -> list[str]:
    lines = ["| | " + " | ".join(halves) + " | goal |", "|---|" + "---:|" * (len(halves) + 1)]

    def line(name: str, goal: str, cell) -> None:
        lines.append(f"| {name} | " + " | ".join(cell(h) for h in halves) + f" | {goal} |")

    lmb = results.get("tasks-livemcpbench-2.json") or results.get("tasks-pypi.json")
    last = {h: lmb[h][-1] for h in halves}
    size = last[halves[0]]["size"]
    line(f"index built, {size} tools (findability)", GOALS["index"], lambda h: f"{last[h]['build_us'] / 1e6:.2f} s")
    line(f"index from the cache, {size} tools", GOALS["cached"], lambda h: f"{last[h]['cached_us'] / 1e3:.1f} ms")
    queries = {h: [r["query_p50_us"] for runs in results.values() for r in runs[h] if r["moniker"]["tasks"]] for h in halves}
    line("query p50, every set and size (lowest–highest)", GOALS["query"],
         lambda h: f"{min(queries[h]) / 1e3:.2f}–{max(queries[h]) / 1e3:.2f} ms")
    built, cached = ({h: costs[h][c] for h in halves} for c in ("built", "cached"))
    line(f"`moniker serve`, {built[halves[0]]['tools']} tools: resident after 20 searches", GOALS["rss"],
         lambda h: f"{built[h]['rss_mb']} MB ({cached[h]['rss_mb']} from the cache)")
    line("its peak", "—", lambda h: f"{built[h]['peak_mb']} MB ({cached[h]['peak_mb']} from the cache)")
    line("its first search after it starts: index built / from the cache", "—",
         lambda h: f"{built[h]['first_search_after_s']} s / {cached[h]['first_search_after_s']} s")
    line("a search's round trip through it (stdio), p50", GOALS["query"],
         lambda h: f"{built[h]['search_p50_ms']} ms")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--mpnet")
    parser.add_argument("--livemcpbench", default="")
    parser.add_argument("--write")
    args = parser.parse_args()
    if not FINDABILITY.exists():
        sys.exit("build it first: cargo build --release -p moniker-findability -p moniker-mcp -p moniker-fixture")
    halves = {"table": None, "all-MiniLM-L6-v2": args.model}
    if args.mpnet:
        halves["all-mpnet-base-v2"] = args.mpnet
    load = os.getloadavg()[0]
    results: dict = {}
    for tasks, _, pool in SETS:
        if "lmb" in pool and not args.livemcpbench:
            continue
        results[tasks] = {h: findability(tasks, pool, m, args.livemcpbench) for h, m in halves.items()}
    costs = {h: {"built": memory(m, False), "cached": memory(m, True)} for h, m in halves.items()}
    names = list(halves)
    text = "\n".join([
        HEADING,
        "",
        "Made by `python3 bench/search-sets.py` (release build, "
        f"{os.cpu_count()} cores, load {load:.2f} at the run's start), one run: the findability "
        "benchmark (`bench/findability`) over each task set at each of its sizes, with each "
        "semantic half, and `bench/search-memory.py` for what `moniker serve` holds. Each cell "
        "is recall@1 / recall@5 (%). *fused* is moniker's `search_tools`; *alone*, the semantic "
        "half by itself; *lexical alone*, its BM25 half; *plain BM25*, the lexical ranker over "
        "the servers' own names and descriptions. The model run whole is the ceiling of the "
        "semantic half. Held-out sets were written by someone who had not seen the ranker, and "
        "nothing was chosen on them (`bench/findability/TASKS.md`).",
        "",
        *recall_table(results, names),
        "",
        "Costs, this run:",
        "",
        *cost_table(results, costs, names),
        "",
    ])
    print(text)
    if args.write:
        path = Path(args.write)
        before = path.read_text() if path.exists() else ""
        at = before.find("\n" + HEADING)
        if at < 0:
            after, kept = "", before
        else:
            rest = before[at + 1 :]
            nxt = rest.find("\n## ", 1)
            after, kept = ("" if nxt < 0 else rest[nxt + 1 :]), before[:at]
        path.write_text(kept.rstrip() + "\n\n" + text + ("\n" + after if after else ""))


if __name__ == "__main__":
    main()
