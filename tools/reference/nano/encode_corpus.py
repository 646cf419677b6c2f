#!/usr/bin/env python3
"""Encodes the corpus with tokenizer.json into flat token streams: each file's ids followed by
<|endoftext|> (id 0), for train.jsonl and val.jsonl, saved as uint16 .npy (vocab <= 65536) plus
stats.json (files, bytes, tokens per split). Uses the `tokenizers` library (parallel
encode_batch); --toy uses the CPU-test byte tokenizer instead (toy_tokenizer.py).
Usage: encode_corpus.py --corpus DIR --tokenizer DIR --out DIR [--toy]"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tokenizer_spec import ENDOFTEXT, SPECIAL_TOKENS  # noqa: E402

EOT_ID = SPECIAL_TOKENS.index(ENDOFTEXT)
BATCH_FILES = 2048


def read_texts(path: Path):
    with open(path) as f:
        return [json.loads(line)["text"] for line in f]


def make_encoder(tokenizer_dir: Path, toy: bool):
    """-> function(list of str) -> list of id lists."""
    if toy:
        from toy_tokenizer import toy_encode
        return lambda texts: [toy_encode(t) for t in texts]
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    return lambda texts: [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def encode_split(texts, encode) -> np.ndarray:
    parts = []
    for s in range(0, len(texts), BATCH_FILES):
        for ids in encode(texts[s:s + BATCH_FILES]):
            parts.append(np.asarray(ids + [EOT_ID], dtype=np.uint16))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--toy", action="store_true", help="CPU test: byte tokenizer of toy_tokenizer.py")
    args = ap.parse_args()
    t0 = time.time()
    encode = make_encoder(Path(args.tokenizer), args.toy)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stats = {}
    for split in ("train", "val"):
        texts = read_texts(Path(args.corpus) / f"{split}.jsonl")
        ids = encode_split(texts, encode)
        np.save(out / f"{split}.npy", ids)
        stats[split] = {"files": len(texts), "bytes": sum(len(t.encode()) for t in texts), "tokens": int(ids.size)}
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    tr = stats["train"]
    print(f"encode: train {tr['tokens']} tokens ({tr['bytes'] / max(tr['tokens'], 1):.2f} bytes/token), "
          f"val {stats['val']['tokens']} tokens, {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
