"""Comparison metrics shared by the reference runner and the golden checks (numpy only, so the golden
CLI check runs on machines without torch)."""
from __future__ import annotations

import numpy as np


def rel_error(test: np.ndarray, ref: np.ndarray) -> float:
    """||test - ref|| / ||ref|| (Frobenius, fp64)."""
    ref64 = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(np.asarray(test, dtype=np.float64) - ref64) / max(np.linalg.norm(ref64), 1e-30))
