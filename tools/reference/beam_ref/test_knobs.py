"""TEST-ONLY knobs that inject known implementation mistakes into the reference, so that
test_sensitivity.py can prove the golden check catches them. Never set them for goldens."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TestKnobs:
    # Sliding window admits W+1 keys (p - p' <= W) instead of W (p - p' < W).
    mistake_window_off_by_one: bool = False
    # RoPE rotates adjacent pairs (2i, 2i+1) (GPT-J layout) instead of rotate-half (NeoX/HF).
    mistake_rope_interleaved: bool = False
    # Output gate ignores the per-head bias: sigmoid(g) instead of sigmoid(g + b).
    mistake_no_gate_bias: bool = False

    def any(self) -> bool:
        return self.mistake_window_off_by_one or self.mistake_rope_interleaved or self.mistake_no_gate_bias


NO_MISTAKES = TestKnobs()
