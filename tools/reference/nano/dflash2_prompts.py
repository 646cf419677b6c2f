#!/usr/bin/python3
"""Prompts for training beam-nano's DFlash2 drafter (train_nano_drafter.py): windows of Python
source from this machine's stdlib, tokenized by beamserve with beam-nano's tokenizer.
Deterministic (sorted files, numpy PCG64). Writes .nano_data/dflash2_prompts.npy [N, LEN] int32.
Usage (repository root): tools/reference/nano/dflash2_prompts.py [--windows 6000] [--len 96]"""
from __future__ import annotations

import argparse
import glob
import json
import subprocess
from pathlib import Path

import numpy as np

SEED = 20261207


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--windows", type=int, default=6000)
    ap.add_argument("--len", type=int, default=96)
    ap.add_argument("--beamserve", default="build/beamserve")
    ap.add_argument("--out", default=".nano_data/dflash2_prompts.npy")
    a = ap.parse_args()
    files = sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    files = [f for f in files if 2_000 <= Path(f).stat().st_size <= 200_000]
    rng = np.random.default_rng(SEED)
    picked = [files[i] for i in sorted(rng.choice(len(files), size=min(400, len(files)), replace=False))]
    docs = []
    for f in picked:
        out = subprocess.run([a.beamserve, "tokenize", "--model", "models/beam-nano", "--file", f],
                             capture_output=True, text=True, check=True).stdout
        ids = json.loads(out)
        if len(ids) > a.len + 1:
            docs.append(np.asarray(ids, dtype=np.int32))
    windows = np.empty((a.windows, a.len), dtype=np.int32)
    for w in range(a.windows):
        d = docs[rng.integers(len(docs))]
        start = rng.integers(len(d) - a.len)
        windows[w] = d[start:start + a.len]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    np.save(a.out, windows)
    print(f"{a.out}: {a.windows} windows of {a.len} tokens from {len(docs)} files")


if __name__ == "__main__":
    main()
