"""RMSNorm as BEAM.md 3.2: fp32 normalisation and fp32 weight multiply, ONE bf16 rounding after the
weight multiply (plain weight, not 1 + w). Used for the 4 layer norms, per-head q/k norms and the
final norm."""
from __future__ import annotations

import torch
from torch import nn

from .numerics import Numerics


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, numerics: Numerics):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps
        self.numerics = numerics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., dim] (bf16-valued) -> [..., dim] bf16-valued; normalises over the last axis."""
        xf = x.float()
        inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.numerics.round(xf * inv_rms * self.weight.float())
