"""How far a static table is from the model it was distilled from, on the findability task sets.

Each tool is the text moniker's semantic half reads of it (its name, its server, its
description's first 40 words, its parameters' names); each request is embedded as it is. The
table embeds a text as the sum of its tokens' rows (as `semantic.rs` does); the model embeds
it whole (what the table was fitted to approach). Both rank every tool of the task set's
servers by cosine, with no lexical half, so the difference is what distilling loses: the
model's recall is the most any table distilled from it can reach this way.

    python ceiling.py MODEL_DIR TABLE [--livemcpbench PATH/tools.json]

MODEL_DIR and TABLE as `distill.py` takes and writes them. LiveMCPBench's inventory is
third-party data the repository does not hold: give its path to add its task set.
"""

import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

from distill import MAGIC, Bert, tokenize, vocabulary

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "findability"
FITTED_WORDS = 40


def read_table(path: Path) -> tuple[np.ndarray, dict[str, int]]:
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise SystemExit(f"{path}: not a moniker table")
    at = len(MAGIC)
    dims, count = struct.unpack_from("<II", data, at)
    at += 8
    scale = np.frombuffer(data, np.float32, count, at)
    at += 4 * count
    rows = np.frombuffer(data, np.int8, count * dims, at).reshape(count, dims) * scale[:, None]
    at += count * dims
    tokens = data[at:].decode().split("\n")[:count]
    return rows.astype(np.float32), {t: i for i, t in enumerate(tokens)}


def task_sets(livemcpbench: Path | None) -> list[tuple[str, list, list]]:
    inventories = {p.stem: json.loads(p.read_text())["tools"] for p in sorted((BENCH / "inventories").glob("*.json"))}
    for seed in ("contextgraph", "ctxsys", "bridge"):
        inventories[seed] = json.loads((ROOT / "fixtures" / f"{seed}.json").read_text())["tools"]
    tools = [(server, tool) for server, listed in inventories.items() for tool in listed]
    out = [(name, tools, json.loads((BENCH / name).read_text())) for name in ("tasks.json", "tasks-plain.json")]
    if livemcpbench:
        servers = json.loads(livemcpbench.read_text())
        tools = [
            (server["name"], tool)
            for server in servers
            for part in server["tools"].values()
            for tool in part["tools"]
        ]
        out.append(("tasks-livemcpbench.json", tools, json.loads((BENCH / "tasks-livemcpbench.json").read_text())))
    return out


def text(server: str, tool: dict) -> str:
    properties = (tool.get("inputSchema") or {}).get("properties") or {}
    description = " ".join((tool.get("description") or "").split()[:FITTED_WORDS])
    return "\n".join([tool["name"], server, description, *properties])


def recall(scores: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    rank = (scores > scores[np.arange(len(gold)), gold][:, None]).sum(1)
    return 100 * float((rank < 1).mean()), 100 * float((rank < 5).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("table", type=Path)
    parser.add_argument("--livemcpbench", type=Path)
    args = parser.parse_args()
    bert = Bert(args.model)
    tokens, ids = vocabulary(args.model)
    cls, sep = ids["[CLS]"], ids["[SEP]"]
    rows, row_of = read_table(args.table)

    def unit(vectors: list[np.ndarray]) -> np.ndarray:
        out = np.array(vectors)
        return out / (np.linalg.norm(out, axis=1, keepdims=True) + 1e-9)

    def by_table(texts: list[str]) -> np.ndarray:
        def one(t: str) -> np.ndarray:
            read = [row_of[tokens[i]] for i in tokenize(t, ids) if tokens[i] in row_of]
            return rows[read].sum(0) if read else np.zeros(rows.shape[1], np.float32)

        return unit([one(t) for t in texts])

    def by_model(texts: list[str]) -> np.ndarray:
        return unit([bert.forward(np.array([[cls, *tokenize(t, ids)[:510], sep]]))[0] for t in texts])

    print("| task set | tools | tasks | table recall@1 | recall@5 | model recall@1 | recall@5 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, tools, tasks in task_sets(args.livemcpbench):
        index = {(server, tool["name"]): n for n, (server, tool) in enumerate(tools)}
        tasks = [t for t in tasks if (t["server"], t["tool"]) in index]
        gold = np.array([index[(t["server"], t["tool"])] for t in tasks])
        documents = [text(server, tool) for server, tool in tools]
        requests = [t["request"] for t in tasks]
        table = recall(by_table(requests) @ by_table(documents).T, gold)
        model = recall(by_model(requests) @ by_model(documents).T, gold)
        print(f"| {name} | {len(tools)} | {len(tasks)} | {table[0]:.1f}% | {table[1]:.1f}% | {model[0]:.1f}% | {model[1]:.1f}% |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
