#!/usr/bin/env python3
"""The report of bench/ab.sh: from its JSON lines (one per round, build, path and size), each
figure's median over the rounds with its spread, moniker's added latency over the echo server
alone and over the floor (the same server behind moniker-relay, which passes each message on
unread: what any process in between costs here), and B against A: a difference is told from
noise only when the two builds' rounds do not overlap (every round of one is below every round
of the other).

    python3 bench/ab_report.py RESULTS.jsonl A B LOAD_BEFORE LOAD_AFTER ROUNDS CALLS
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import defaultdict


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def verdict(a: list[float], b: list[float], unit: str = "us", less: str = "faster", more: str = "slower") -> str:
    delta = statistics.median(b) - statistics.median(a)
    if max(b) < min(a):
        return f"B {less} by {-delta:.1f} {unit}"
    if min(b) > max(a):
        return f"B {more} by {delta:.1f} {unit}"
    return f"noise ({delta:+.1f} {unit})"


def less(r: dict[str, list[float]], figure: str, reference: dict[int, list[float]]) -> str:
    """Each round's `figure` of a build less the reference's (direct, or the floor) in the
    same round, with its spread."""
    own = [p - statistics.median(reference[rnd]) for p, rnd in zip(r[figure], r["round"]) if reference.get(rnd)]
    return spread(own) if own else "-"


def floor_of(path: str) -> str:
    """The floor a path is measured against: the relay over the same transport."""
    return "floor-http" if path.startswith("http") else "floor-stdio"


def main(argv: list[str]) -> None:
    path, rev_a, rev_b, load_before, load_after, rounds, calls = argv[1:8]
    runs: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    # The echo server alone: tools -> figure (p50, p99) -> round -> its values.
    direct: dict[int, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    # The floor: (path, tools) -> figure (p50, p99, cpu) -> round -> its values.
    floor: dict[tuple, dict[str, dict[int, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    with open(path) as lines:
        for line in lines:
            row = json.loads(line)
            call = row["report"]["call_us"]
            if row["build"] == "direct":
                for figure in ("p50", "p99"):
                    direct[row["tools"]][figure][row["round"]].append(call[figure])
                continue
            if row["build"] == "floor":
                for figure in ("p50", "p99"):
                    floor[(row["path"], row["tools"])][figure][row["round"]].append(call[figure])
                if row["report"].get("cpu_us_per_call") is not None:
                    floor[(row["path"], row["tools"])]["cpu"][row["round"]].append(row["report"]["cpu_us_per_call"])
                continue
            key = (row["path"], row["tools"], row["servers"], row["build"])
            runs[key]["p50"].append(call["p50"])
            runs[key]["p99"].append(call["p99"])
            runs[key]["round"].append(row["round"])
            # What moniker's own process spent a call (none where the calls are served by
            # another process: the shared gateway).
            if row["path"] != "shared" and row["report"].get("cpu_us_per_call") is not None:
                runs[key]["cpu"].append(row["report"]["cpu_us_per_call"])
                runs[key]["switches"].append(row["report"]["switches_per_call"])
    print("# A/B of two builds (bench/ab.sh)\n")
    print(f"A = `{rev_a}`, B = `{rev_b}`; {rounds} rounds, {calls} sequential `tools/call` a run, the builds")
    print(f"alternated each round; load average {load_before} before, {load_after} after. Figures in µs:")
    print("the median over the rounds of each round's p50 (or p99), and in brackets the lowest and")
    print("highest round. *Added* is the p50 (or p99) less the echo server's own (direct) in the same")
    print("round; *over the floor* is the p50 less the floor's (moniker-relay's, over stdio for the")
    print("stdio paths and over HTTP/1.1 for the HTTP ones) in the same round: moniker's own.\n")
    print("| path | tools | servers | A p50 | B p50 | B vs A (p50) | A p99 | B p99 | B vs A (p99) | A added | B added | A added p99 | B added p99 | A over the floor | B over the floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({k[:3] for k in runs}, key=lambda k: (k[0], k[1], k[2]))
    for path_, tools, servers in keys:
        a, b = runs.get((path_, tools, servers, "A")), runs.get((path_, tools, servers, "B"))
        if not a or not b:
            continue

        def added(r: dict[str, list[float]], figure: str = "p50") -> str:
            return less(r, figure, direct[tools][figure])

        def over_floor(r: dict[str, list[float]]) -> str:
            return less(r, "p50", floor.get((floor_of(path_), tools), {}).get("p50", {}))

        print(
            f"| {path_} | {tools} | {servers} | {spread(a['p50'])} | {spread(b['p50'])} | {verdict(a['p50'], b['p50'])} "
            f"| {spread(a['p99'])} | {spread(b['p99'])} | {verdict(a['p99'], b['p99'])} | {added(a)} | {added(b)} "
            f"| {added(a, 'p99')} | {added(b, 'p99')} | {over_floor(a)} | {over_floor(b)} |"
        )
    cpu_keys = [k for k in keys if runs[(*k, "A")].get("cpu") and runs[(*k, "B")].get("cpu")]
    if cpu_keys:
        print("\nWhat moniker's process spent a call (its threads' CPU time, µs, and context switches,")
        print("counted by the scheduler over the sequential calls; the median over the rounds and in")
        print("brackets the lowest and highest round):\n")
        print("| path | tools | servers | A CPU | B CPU | B vs A (CPU) | A switches | B switches |")
        print("|---|---|---|---|---|---|---|---|")
        for k in cpu_keys:
            a, b = runs[(*k, "A")], runs[(*k, "B")]
            print(
                f"| {k[0]} | {k[1]} | {k[2]} | {spread(a['cpu'])} | {spread(b['cpu'])} "
                f"| {verdict(a['cpu'], b['cpu'], 'us', 'cheaper', 'dearer')} "
                f"| {statistics.median(a['switches']):.2f} | {statistics.median(b['switches']):.2f} |"
            )
    for tools, figures in sorted(direct.items()):
        p50, p99 = ([statistics.median(v) for v in figures[f].values()] for f in ("p50", "p99"))
        print(f"\nDirect (the echo server alone) at {tools} tools: p50 {spread(p50)} µs, p99 {spread(p99)} µs.")
        for path_ in ("floor-stdio", "floor-http"):
            relay = floor.get((path_, tools))
            if not relay or not relay.get("p50"):
                continue
            over = [statistics.median(v) - statistics.median(figures["p50"][rnd]) for rnd, v in relay["p50"].items() if figures["p50"].get(rnd)]
            cpu = [statistics.median(v) for v in relay["cpu"].values()]
            print(
                f"The floor ({path_}: moniker-relay) at {tools} tools: p50 {spread([statistics.median(v) for v in relay['p50'].values()])} µs, "
                f"added over direct {spread(over) if over else '-'} µs; the relay's CPU a call {spread(cpu) if cpu else '-'} µs."
            )


if __name__ == "__main__":
    main(sys.argv)
