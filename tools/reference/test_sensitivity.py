#!/usr/bin/python3
"""ctest: (1) the reference reproduces models/tiny-beam's goldens (logits within tolerance, argmax
and confident expert selections identical); (2) a benign numeric variant (fp64 accumulation)
still passes; (3) each injected implementation mistake FAILS the golden check by a wide margin
(>= 3x tolerance on some sequence). Prints every rel error. Exit status 0 only if all hold."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beam_ref.checkpoint import load_model  # noqa: E402
from beam_ref.goldens import check, load_sequences  # noqa: E402
from beam_ref.numerics import Numerics  # noqa: E402
from beam_ref.runner import run_sequence  # noqa: E402
from beam_ref.test_knobs import TestKnobs  # noqa: E402

WIDE_MARGIN = 3.0  # a mistake must exceed this multiple of the tolerance on some sequence
MISTAKES = {
    "window_off_by_one (W+1 keys)": TestKnobs(mistake_window_off_by_one=True),
    "rope_interleaved (pairs, not rotate-half)": TestKnobs(mistake_rope_interleaved=True),
    "no_gate_bias (sigmoid(g))": TestKnobs(mistake_no_gate_bias=True),
}


def golden_results(model, sequences, with_experts: bool):
    results = []
    for seq in sequences:
        out = run_sequence(model, seq.tokens, seq.start_pos, chunk=seq.chunk)
        results.append(check(seq, out.logits, out.experts if with_experts else None))
    return results


def main() -> int:
    default_model = Path(__file__).resolve().parents[2] / "models" / "tiny-beam"
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=str(default_model))
    ap.add_argument("--device", default="cpu", help="torch device, e.g. cuda (goldens were made on the CPU)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.set_float32_matmul_precision("highest")  # no TF32: fp32 accumulation as the spec says
    sequences = load_sequences(Path(args.model) / "golden")
    failures = []

    for label, numerics in (("reference", Numerics()), ("benign: fp64 accumulation", Numerics(accumulate_fp64=True))):
        print(f"== {label}: must pass")
        results = golden_results(load_model(args.model, numerics, device=args.device), sequences, with_experts=True)
        for r in results:
            print("  " + r.line())
        if not all(r.ok for r in results):
            failures.append(label)

    for label, knobs in MISTAKES.items():
        print(f"== mistake {label}: must fail by >= {WIDE_MARGIN}x tolerance")
        results = golden_results(load_model(args.model, test_knobs=knobs, device=args.device), sequences,
                                  with_experts=False)
        for r in results:
            print("  " + r.line())
        worst = max(r.rel_error / r.tolerance for r in results)
        print(f"  worst: {worst:.1f}x tolerance -> {'caught' if worst >= WIDE_MARGIN else 'NOT CAUGHT'}")
        if worst < WIDE_MARGIN:
            failures.append(label)

    print("FAILED: " + "; ".join(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
