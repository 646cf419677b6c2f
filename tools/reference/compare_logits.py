#!/usr/bin/python3
"""Compares engine logits (.npy f32 [T, V], e.g. from `beamserve forward --logits-out`) with the
reference's goldens: relative error ||Δ||/||ref||, max |Δ|, argmax agreement on rows whose
reference top-1/top-2 margin is >= 0.5. Exit status 1 if any comparison fails its tolerance.

  compare_logits.py --golden-dir models/tiny-beam/golden --name len40 engine.npy
  compare_logits.py --ref golden.npy engine.npy [--tol 0.02]
  compare_logits.py --golden-dir models/tiny-beam/golden --engine build/beamserve   # runs every sequence
  compare_logits.py --golden-dir models/tiny-beam/golden --engine build/beamserve --engine-args="--device cuda"

Needs numpy only (no torch), so it also runs on the GPU machine.
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beam_ref.goldens import ARGMAX_MARGIN, REL_TOL, load_sequences  # noqa: E402
from beam_ref.metrics import rel_error  # noqa: E402


def describe(name: str, test: np.ndarray, ref: np.ndarray, tol: float) -> bool:
    if test.shape != ref.shape:
        print(f"{name}: shape {test.shape} != reference {ref.shape}  FAIL")
        return False
    rel = rel_error(test, ref)
    top2 = np.sort(ref, axis=-1)[:, -2:]
    confident = (top2[:, 1] - top2[:, 0]) >= ARGMAX_MARGIN
    bad = int(np.sum(confident & (test.argmax(-1) != ref.argmax(-1))))
    ok = rel <= tol and bad == 0
    print(f"{name:12s} rel {rel:.4e} (tol {tol:g})  max|Δ| {np.abs(test - ref).max():.4f}  "
          f"argmax mismatches {bad}/{int(confident.sum())} confident rows  {'ok' if ok else 'FAIL'}")
    return ok


def run_engine(engine: str, model_dir: Path, seq, out: Path, extra_args: list[str]) -> np.ndarray:
    cmd = [engine, "forward", "--model", str(model_dir), "--tokens", ",".join(map(str, seq.tokens.tolist())),
           "--start-pos", str(seq.start_pos), "--logits-out", str(out), *extra_args]
    subprocess.run(cmd, check=True)
    return np.load(out)


def main() -> int:
    try:
        return compare(sys.argv[1:])
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        print(f"compare_logits: {e}", file=sys.stderr)
        return 2


def compare(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("test", nargs="?", help="engine logits .npy [T, V]")
    ap.add_argument("--golden-dir", help="MODEL/golden with manifest.json")
    ap.add_argument("--name", help="sequence name in the manifest")
    ap.add_argument("--ref", help="reference logits .npy (instead of --golden-dir/--name)")
    ap.add_argument("--tol", type=float, help=f"rel tolerance (default: manifest's, or {REL_TOL})")
    ap.add_argument("--engine", help="beamserve binary: run `forward` on every golden sequence")
    ap.add_argument("--engine-args", default="",
                    help='extra flags for `beamserve forward`, one shell-quoted string (--engine-args="--device cuda")')
    args = ap.parse_args(argv)

    if args.ref:
        if not args.test:
            ap.error("--ref needs the engine logits file")
        ok = describe(Path(args.test).stem, np.load(args.test), np.load(args.ref), args.tol or REL_TOL)
        return 0 if ok else 1
    if not args.golden_dir:
        ap.error("give --ref or --golden-dir")
    sequences = load_sequences(args.golden_dir)
    if args.engine:
        model_dir = Path(args.golden_dir).resolve().parent
        ok = True
        with tempfile.TemporaryDirectory() as tmp:
            for seq in sequences:
                logits = run_engine(args.engine, model_dir, seq, Path(tmp) / f"{seq.name}.npy",
                                    shlex.split(args.engine_args))
                ok &= describe(seq.name, logits, seq.logits, args.tol or seq.tolerance)
        return 0 if ok else 1
    if not (args.name and args.test):
        ap.error("give --name and the engine logits file (or --engine)")
    by_name = {s.name: s for s in sequences}
    if args.name not in by_name:
        ap.error(f"no sequence {args.name!r}; manifest has {sorted(by_name)}")
    seq = by_name[args.name]
    ok = describe(seq.name, np.load(args.test), seq.logits, args.tol or seq.tolerance)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
