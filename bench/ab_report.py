#!/usr/bin/env python3
"""The report of bench/ab.sh: from its JSON lines (one per round, build, path and size), each
figure's median over the rounds with its spread, moniker's added latency over the echo server
alone, and B against A: a difference is told from noise only when the two builds' rounds do not
overlap (every round of one is below every round of the other).

    python3 bench/ab_report.py RESULTS.jsonl A B LOAD_BEFORE LOAD_AFTER ROUNDS CALLS
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def verdict(a: list[float], b: list[float]) -> str:
    delta = statistics.median(b) - statistics.median(a)
    if max(b) < min(a):
        return f"B faster by {-delta:.1f} us"
    if min(b) > max(a):
        return f"B slower by {delta:.1f} us"
    return f"noise ({delta:+.1f} us)"


def main(argv: list[str]) -> None:
    path, rev_a, rev_b, load_before, load_after, rounds, calls = argv[1:8]
    runs: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    direct: dict[int, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    with open(path) as lines:
        for line in lines:
            row = json.loads(line)
            call = row["report"]["call_us"]
            if row["build"] == "direct":
                direct[row["tools"]][row["round"]].append(call["p50"])
                continue
            key = (row["path"], row["tools"], row["servers"], row["build"])
            runs[key]["p50"].append(call["p50"])
            runs[key]["p99"].append(call["p99"])
            runs[key]["round"].append(row["round"])
    print("# A/B of two builds (bench/ab.sh)\n")
    print(f"A = `{rev_a}`, B = `{rev_b}`; {rounds} rounds, {calls} sequential `tools/call` a run, the builds")
    print(f"alternated each round; load average {load_before} before, {load_after} after. Figures in µs:")
    print("the median over the rounds of each round's p50 (or p99), and in brackets the lowest and")
    print("highest round. *Added* is the p50 less the echo server's own (direct) in the same round.\n")
    print("| path | tools | servers | A p50 | B p50 | B vs A (p50) | A p99 | B p99 | B vs A (p99) | A added | B added |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:3] for k in runs}, key=lambda k: (k[0], k[1], k[2]))
    for path_, tools, servers in keys:
        a, b = runs.get((path_, tools, servers, "A")), runs.get((path_, tools, servers, "B"))
        if not a or not b:
            continue

        def added(r: dict[str, list[float]]) -> str:
            own = [p - statistics.median(direct[tools][rnd]) for p, rnd in zip(r["p50"], r["round"]) if direct[tools].get(rnd)]
            return spread(own) if own else "-"

        print(
            f"| {path_} | {tools} | {servers} | {spread(a['p50'])} | {spread(b['p50'])} | {verdict(a['p50'], b['p50'])} "
            f"| {spread(a['p99'])} | {spread(b['p99'])} | {verdict(a['p99'], b['p99'])} | {added(a)} | {added(b)} |"
        )
    for tools, by_round in sorted(direct.items()):
        values = [statistics.median(v) for v in by_round.values()]
        print(f"\nDirect (the echo server alone) at {tools} tools: p50 {spread(values)} µs.")


if __name__ == "__main__":
    main(sys.argv)
