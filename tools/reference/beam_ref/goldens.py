"""Golden files of a model directory (golden/manifest.json + .npy per sequence) and the checks
against them: relative logits error, argmax agreement where the reference's top-1/top-2 margin is
large, expert-selection agreement where the reference's routing margin is large."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from .metrics import rel_error

MANIFEST = "manifest.json"
REL_TOL = 2e-2            # per sequence ||Δ||/||ref||
REL_TOL_FAR = 0.1         # sequences starting at position >= FAR_POSITION (RoPE angle sensitivity)
FAR_POSITION = 1_000_000
ARGMAX_MARGIN = 0.5       # top-1/top-2 logit margin above which argmax must agree
# Routing margin above which expert selections must agree. Measured bf16 noise moves tiny-beam's
# scores by up to ~4e-3 (median ~1e-3) in the deepest layers, so 1e-3 would flag benign flips.
SELECTION_MARGIN = 5e-3


def tolerance_for(start_pos: int) -> float:
    return REL_TOL_FAR if start_pos >= FAR_POSITION else REL_TOL


@dataclass
class GoldenSequence:
    name: str
    start_pos: int
    tolerance: float
    chunk: Optional[int]       # None: golden is one prefill; else chunked prefill of this size
    tokens: np.ndarray         # [T] int32
    logits: np.ndarray         # [T, V] f32
    experts: np.ndarray        # [num_sparse_layers, T, K] int32
    margins: np.ndarray        # [num_sparse_layers, T] f32


def load_manifest(golden_dir) -> dict:
    return json.loads((Path(golden_dir) / MANIFEST).read_text())


def load_sequences(golden_dir):
    """All sequences of golden_dir/manifest.json, in manifest order."""
    golden_dir = Path(golden_dir)
    out = []
    for s in load_manifest(golden_dir)["sequences"]:
        f = s["files"]
        out.append(GoldenSequence(
            s["name"], int(s["start_pos"]), float(s["tolerance"]), s.get("chunk"),
            np.load(golden_dir / f["tokens"]), np.load(golden_dir / f["logits"]),
            np.load(golden_dir / f["experts"]), np.load(golden_dir / f["margins"])))
    return out


def argmax_disagreements(test: np.ndarray, ref: np.ndarray, margin: float = ARGMAX_MARGIN) -> int:
    """Positions where ref's top-1/top-2 margin >= margin and argmax(test) != argmax(ref)."""
    top2 = np.sort(ref, axis=-1)[:, -2:]
    confident = (top2[:, 1] - top2[:, 0]) >= margin
    return int(np.sum(confident & (test.argmax(-1) != ref.argmax(-1))))


def selection_disagreements(test_experts: np.ndarray, ref: GoldenSequence, margin: float = SELECTION_MARGIN):
    """(#decisions with ref margin > margin whose expert SET differs, first differing position
    over all decisions or None). Experts [num_sparse_layers, T, K]; order inside a set ignored."""
    differ = (np.sort(test_experts, -1) != np.sort(ref.experts, -1)).any(-1)
    confident = ref.margins > margin
    positions = np.nonzero(differ.any(0))[0]
    return int(np.sum(differ & confident)), (int(positions[0]) if len(positions) else None)


@dataclass
class CheckResult:
    name: str
    rel_error: float
    tolerance: float
    argmax_bad: int
    selection_bad: Optional[int] = None

    @property
    def ok(self) -> bool:
        return self.rel_error <= self.tolerance and self.argmax_bad == 0 and not self.selection_bad

    def line(self) -> str:
        sel = "" if self.selection_bad is None else f"  selection mismatches {self.selection_bad}"
        return (f"{self.name:12s} rel {self.rel_error:.4e} (tol {self.tolerance:g}, x{self.rel_error / self.tolerance:.2f})"
                f"  argmax mismatches {self.argmax_bad}{sel}  {'ok' if self.ok else 'FAIL'}")


def check(seq: GoldenSequence, logits: np.ndarray, experts: Optional[np.ndarray] = None) -> CheckResult:
    """Compares test logits [T, V] (and optionally experts) against one golden sequence."""
    if logits.shape != seq.logits.shape:
        raise ValueError(f"{seq.name}: logits shape {logits.shape}, golden {seq.logits.shape}")
    sel = None if experts is None else selection_disagreements(experts, seq)[0]
    return CheckResult(seq.name, rel_error(logits, seq.logits), seq.tolerance,
                       argmax_disagreements(logits, seq.logits), sel)
