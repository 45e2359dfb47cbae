"""Distil moniker's static embedding table from a BERT sentence-embedding model.

The approach is model2vec's (Tulkens and van Dongen, 2024), written here on numpy alone: pass
every token of the model's vocabulary through the model on its own (`[CLS] token [SEP]`,
mean-pooled as the model pools sentences), reduce the vectors to fewer dimensions with PCA,
and weight each by how rare its token is (the vocabulary is in frequency order, so a Zipf
law gives each rank a probability; the weight is `sif / (sif + p)`). A text's embedding is
then the mean of its tokens' vectors: no model runs when moniker searches.

    python distill.py MODEL_DIR OUT [--dims 256]

MODEL_DIR holds a BERT model as sentence-transformers saves it (`config.json`,
`model.safetensors`, `tokenizer.json`, `1_Pooling/config.json` with mean pooling). OUT is
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
import struct
from pathlib import Path

import numpy as np

MAGIC = b"moniker-static-embeddings 1\n"
SIF = 1e-4
BATCH = 2048


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--dims", type=int, default=256)
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

    centred = vectors - vectors.mean(0)
    _, _, components = np.linalg.svd(centred, full_matrices=False)
    reduced = centred @ components[: args.dims].T

    # Zipf: the token of rank r (vocabulary order) has probability 1/(r+1), normalised.
    ranks = np.arange(1, len(kept) + 1, dtype=np.float64)
    probability = (1.0 / ranks) / (1.0 / ranks).sum()
    reduced *= (SIF / (SIF + probability))[:, None].astype(np.float32)

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
