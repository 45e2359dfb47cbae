"""Distil moniker's static embedding table from a BERT sentence-embedding model.

Two steps, both model2vec's (Tulkens and van Dongen, 2024), written here on numpy alone:

1. Distil: pass every token of the model's vocabulary through the model on its own
   (`[CLS] token [SEP]`, mean-pooled as the model pools sentences), take out the mean, and
   weight each vector by how rare its token is (the vocabulary is in frequency order, so a
   Zipf law gives each rank a probability; the weight is `sif / (sif + p)`).
2. Fit (tokenlearn's idea; with `--corpus`): a text's vector is the sum of its tokens'
   vectors, and a token alone says less than the same token in a sentence. So the model
   embeds each sentence of a corpus whole, and the table is fitted (Adam, cosine loss, a
   few passes) so that each sentence's sum points where the model's embedding of it points.
   One sentence in twenty is held out and its agreement printed before and after.

Then the vectors are projected on their `--dims` principal axes (an SVD of the table as it
is: centring it again would move every text's sum by a vector that grows with its length),
and quantised to 8 bits a value. A text's embedding is then the sum of its tokens' vectors: no model runs when moniker
searches.

    python distill.py MODEL_DIR OUT [--dims 256] [--corpus FILE ...] [--epochs 4]

MODEL_DIR holds a BERT model as sentence-transformers saves it (`config.json`,
`model.safetensors`, `tokenizer.json`, `1_Pooling/config.json` with mean pooling). A corpus
file has a sentence a line (`corpus.py` makes the one the shipped table was fitted on). OUT is
written in moniker's format (read by `crates/surface/src/search/semantic.rs`):

    b"moniker-static-embeddings 1\\n"
    u32 dims, u32 count                  little-endian
    count x f32 scale                    row i is scale[i] * the row's i8 values
    count x dims x i8
    the count tokens, each followed by b"\\n"  (WordPiece: `##` marks a continuation)

`distill.sh` beside this file makes the shipped table from the model the README names.
"""

import argparse
import json
import math
import re
import struct
import unicodedata
from pathlib import Path

import numpy as np

MAGIC = b"moniker-static-embeddings 1\n"
SIF = 1e-4
BATCH = 2048
# A sentence's tokens beyond this many are not read (the corpus's sentences are shorter).
LONGEST = 48


def safetensors(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + size])
    body = memoryview(data)[8 + size :]
    dtypes = {"F32": np.float32, "F16": np.float16, "I64": np.int64}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        out[name] = np.frombuffer(body[start:end], dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


def layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def gelu(x: np.ndarray) -> np.ndarray:
    # The tanh form; the exact (erf) one differs by less than 1e-3 anywhere.
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class Bert:
    def __init__(self, directory: Path):
        self.config = json.loads((directory / "config.json").read_text())
        pooling = directory / "1_Pooling" / "config.json"
        if pooling.exists() and not json.loads(pooling.read_text()).get("pooling_mode_mean_tokens"):
            raise SystemExit(f"{directory}: this recipe is for mean-pooled models")
        w = safetensors(directory / "model.safetensors")
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in w.items()}

    def forward(self, ids: np.ndarray) -> np.ndarray:
        """ids: (batch, length) token ids, no padding. Returns the mean-pooled outputs."""
        c, w = self.config, self.w
        eps = c["layer_norm_eps"]
        heads = c["num_attention_heads"]
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        x = layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        hidden = x.shape[-1]
        size = hidden // heads
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def dense(t, name):
                return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

            def split(t):
                return t.reshape(batch, length, heads, size).transpose(0, 2, 1, 3)

            q = split(dense(x, "attention.self.query"))
            k = split(dense(x, "attention.self.key"))
            v = split(dense(x, "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            attended = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = layer_norm(
                x + dense(attended, "attention.output.dense"),
                w[p + "attention.output.LayerNorm.weight"],
                w[p + "attention.output.LayerNorm.bias"],
                eps,
            )
            x = layer_norm(
                x + dense(gelu(dense(x, "intermediate.dense")), "output.dense"),
                w[p + "output.LayerNorm.weight"],
                w[p + "output.LayerNorm.bias"],
                eps,
            )
        return x.mean(1)


def vocabulary(directory: Path) -> tuple[list[str], dict[str, int]]:
    tokenizer = json.loads((directory / "tokenizer.json").read_text())
    model = tokenizer["model"]
    if model["type"] != "WordPiece" or model.get("continuing_subword_prefix") != "##":
        raise SystemExit(f"{directory}: this recipe is for WordPiece (BERT) vocabularies")
    if not tokenizer["normalizer"].get("lowercase", False):
        raise SystemExit(f"{directory}: moniker's tokenizer lowercases; the model must be uncased")
    by_id = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    return [t for t, _ in by_id], model["vocab"]


def humps(run: str) -> list[str]:
    """A run of letters and digits cut between the humps of camelCase (`humps` in search.rs)."""
    cuts = [0]
    for i in range(1, len(run)):
        c, before = run[i], run[i - 1]
        next_lower = i + 1 < len(run) and run[i + 1].islower()
        if c.isupper() and (before.islower() or (before.isupper() and next_lower)):
            cuts.append(i)
    cuts.append(len(run))
    return [run[a:b] for a, b in zip(cuts, cuts[1:]) if a < b]


def tokenize(text: str, vocab: dict[str, int]) -> list[int]:
    """The token ids moniker reads in `text` (`Model::each_token` in semantic.rs): words of
    letters and digits, cut at camelCase humps, lowercased without accents, each cut into the
    longest pieces the vocabulary has; a word with a piece it lacks is left out. (CJK
    characters, each a word in moniker, are not in this recipe's corpus.)"""
    ids = []
    for run in re.split(r"[\W_]+", text):
        for word in humps(run):
            word = unicodedata.normalize("NFD", word)
            word = "".join(c for c in word if not unicodedata.combining(c)).lower()
            if not word or len(word) > 100:
                continue
            pieces, start = [], 0
            while start < len(word):
                end = len(word)
                while end > start and ("##" if start else "") + word[start:end] not in vocab:
                    end -= 1
                if end == start:
                    break
                pieces.append(vocab[("##" if start else "") + word[start:end]])
                start = end
            else:
                ids.extend(pieces)
    return ids


def embed_sentences(bert: Bert, sentences: list[list[int]], cls: int, sep: int) -> np.ndarray:
    """The model's embedding of each sentence (token ids), in batches of equal length."""
    out = np.empty((len(sentences), bert.config["hidden_size"]), dtype=np.float32)
    by_length: dict[int, list[int]] = {}
    for n, ids in enumerate(sentences):
        by_length.setdefault(len(ids), []).append(n)
    done = 0
    for _, rows in sorted(by_length.items()):
        for start in range(0, len(rows), 64):
            chunk = rows[start : start + 64]
            out[chunk] = bert.forward(np.array([[cls, *sentences[r], sep] for r in chunk]))
            done += len(chunk)
        print(f"\r{done}/{len(sentences)} sentences", end="", flush=True)
    print()
    return out


def fit(table: np.ndarray, sentences: list[np.ndarray], targets: np.ndarray, epochs: int) -> None:
    """Fits `table` in place so that each sentence's sum of rows points along its target."""
    rng = np.random.default_rng(0)
    order = rng.permutation(len(sentences))
    held, train = order[: len(order) // 20], order[len(order) // 20 :]
    targets = targets - targets.mean(0)
    targets /= np.linalg.norm(targets, axis=1, keepdims=True)
    # A row moves by about this share of its own size a step at most (Adam's step is ~1).
    step_size = 0.01 * np.linalg.norm(table, axis=1, keepdims=True) / math.sqrt(table.shape[1])

    def agreement() -> float:
        sums = np.stack([table[sentences[i]].sum(0) for i in held])
        sums /= np.linalg.norm(sums, axis=1, keepdims=True) + 1e-9
        return float((sums * targets[held]).sum(1).mean())

    print(f"held-out agreement (cosine) before fitting: {agreement():.4f}")
    m, v, t = np.zeros_like(table), np.zeros_like(table), 0
    for epoch in range(epochs):
        rng.shuffle(train)
        for start in range(0, len(train), 128):
            batch = train[start : start + 128]
            sums = np.stack([table[sentences[i]].sum(0) for i in batch])
            norms = np.linalg.norm(sums, axis=1, keepdims=True) + 1e-9
            unit = sums / norms
            y = targets[batch]
            # d(-cos(sum, y))/d(sum); each token of the sentence gets it whole.
            grad = -(y - (unit * y).sum(1, keepdims=True) * unit) / norms
            rows = np.concatenate([sentences[i] for i in batch])
            per_row = np.repeat(grad, [len(sentences[i]) for i in batch], axis=0)
            g = np.zeros_like(table)
            np.add.at(g, rows, per_row)
            touched = np.unique(rows)
            t += 1
            m[touched] = 0.9 * m[touched] + 0.1 * g[touched]
            v[touched] = 0.999 * v[touched] + 0.001 * g[touched] ** 2
            correction = math.sqrt(1 - 0.999**t) / (1 - 0.9**t)
            table[touched] -= (
                correction * step_size[touched] * m[touched] / (np.sqrt(v[touched]) + 1e-8)
            )
        print(f"pass {epoch + 1}/{epochs}: held-out agreement {agreement():.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dims", type=int, default=256)
    parser.add_argument("--corpus", type=Path, nargs="*", default=[])
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()

    bert = Bert(args.model)
    tokens, ids = vocabulary(args.model)
    cls, sep = ids["[CLS]"], ids["[SEP]"]
    # Special and unused slots never come out of moniker's tokenizer.
    kept = [(i, t) for i, t in enumerate(tokens) if not (t.startswith("[") and t.endswith("]"))]
    vectors = np.empty((len(kept), bert.config["hidden_size"]), dtype=np.float32)
    for start in range(0, len(kept), BATCH):
        chunk = kept[start : start + BATCH]
        batch = np.array([[cls, i, sep] for i, _ in chunk], dtype=np.int64)
        vectors[start : start + len(chunk)] = bert.forward(batch)
        print(f"\r{start + len(chunk)}/{len(kept)} tokens", end="", flush=True)
    print()

    # Zipf: the token of rank r (vocabulary order) has probability 1/(r+1), normalised.
    ranks = np.arange(1, len(kept) + 1, dtype=np.float64)
    probability = (1.0 / ranks) / (1.0 / ranks).sum()
    table = (vectors - vectors.mean(0)) * (SIF / (SIF + probability))[:, None].astype(np.float32)

    if args.corpus:
        row = {i: r for r, (i, _) in enumerate(kept)}
        sentences = []
        for path in args.corpus:
            for line in path.read_text(encoding="utf-8").splitlines():
                read = tokenize(line, ids)[:LONGEST]
                if len(read) >= 3:
                    sentences.append(read)
        print(f"{len(sentences)} sentences in {len(args.corpus)} corpus files")
        targets = embed_sentences(bert, sentences, cls, sep)
        rows = [np.array([row[i] for i in s]) for s in sentences]
        fit(table, rows, targets, args.epochs)

    _, _, components = np.linalg.svd(table, full_matrices=False)
    reduced = table @ components[: args.dims].T

    scale = np.abs(reduced).max(1) / 127.0
    scale[scale == 0] = 1.0
    quantised = np.round(reduced / scale[:, None]).astype(np.int8)

    with args.out.open("wb") as out:
        out.write(MAGIC)
        out.write(struct.pack("<II", args.dims, len(kept)))
        out.write(scale.astype("<f4").tobytes())
        out.write(quantised.tobytes())
        for _, token in kept:
            out.write(token.encode() + b"\n")
    print(f"{args.out}: {len(kept)} tokens x {args.dims} dims, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
