"""RoPE for sliding-window layers (BEAM.md 3.4): HF default rotary embedding, rotate-half (NeoX)
layout, full rotary dim. inv_freq = 1/θ^(2i/D) in fp32, angle = fp32(p)·inv_freq (one fp32
rounding), cos/sin in fp32 then rounded to bf16, applied as bf16 ops (each product and the sum
rounded). Also the interleaved-pair layout, used only as an injected mistake by the tests."""
from __future__ import annotations

import torch
from torch import nn

from .numerics import Numerics


def rope_inv_freq(theta: float, head_dim: int) -> torch.Tensor:
    """[D/2] fp32, computed on the CPU exactly as Hugging Face's default rotary init does."""
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    return 1.0 / (theta ** exponents)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    """[x1, x2] -> [-x2, x1] over the last axis (halves of the head)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RotaryEmbedding(nn.Module):
    """Holds inv_freq (non-persistent buffer, CPU-computed then moved with the module)."""

    def __init__(self, theta: float, head_dim: int, numerics: Numerics, interleaved: bool = False):
        super().__init__()
        self.register_buffer("inv_freq", rope_inv_freq(theta, head_dim), persistent=False)
        self.numerics = numerics
        self.interleaved = interleaved  # TEST-ONLY mistake: rotate pairs (2i, 2i+1) instead

    def cos_sin(self, positions: torch.Tensor):
        """positions [B, T] int64 -> (cos, sin) [B, T, 1, D] bf16-valued (duplicated-half form)."""
        angles = positions.float()[..., None] * self.inv_freq.float()  # fp32 product, [B, T, D/2]
        emb = torch.cat((angles, angles), dim=-1)
        r = self.numerics.round
        return r(emb.cos())[:, :, None, :], r(emb.sin())[:, :, None, :]

    def apply(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """x [B, T, N, D] bf16-valued -> rotated x, same shape: x*cos + rotate_half(x)*sin."""
        r = self.numerics.round
        if self.interleaved:
            return self._apply_interleaved(x, cos, sin)
        return r(r(x * cos) + r(rotate_half(x) * sin))

    def _apply_interleaved(self, x, cos, sin):
        """GPT-J layout (pairs of adjacent elements) — WRONG for Beam; mistake injection only."""
        r = self.numerics.round
        half = x.shape[-1] // 2
        c, s = cos[..., :half], sin[..., :half]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out0 = r(r(x0 * c) - r(x1 * s))
        out1 = r(r(x1 * c) + r(x0 * s))
        return torch.stack((out0, out1), dim=-1).flatten(-2)
