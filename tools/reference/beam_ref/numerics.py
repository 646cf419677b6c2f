"""bf16 emulation for the reference: activations live in fp32 tensors that hold bf16-representable
values; every rounding point of BEAM.md section 3 calls `Numerics.round`. GEMMs take bf16-valued
operands, accumulate in fp32 (or fp64 for the benign-variant test) and round once."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F


@dataclass(frozen=True)
class Numerics:
    """How the reference rounds.

    exact=True  (inference, goldens): bf16 round-to-nearest-even at every BEAM.md rounding point.
    exact=False (training speed): rounding is the identity; the caller may run under autocast;
        attention uses the fused SDPA kernel and the MoE runs every expert as wide GEMMs
        weighted by the routing (SparseMoe._combine_all_experts).
    accumulate_fp64: benign variant used only by test_sensitivity.py to measure how far a
        different (here: exact) accumulation order moves the logits. Never use it for goldens.
    """

    exact: bool = True
    accumulate_fp64: bool = False

    def round(self, x: torch.Tensor) -> torch.Tensor:
        """bf16(x) kept in fp32 (identity when not exact)."""
        if not self.exact:
            return x
        return x.to(torch.bfloat16).to(torch.float32)

    def matmul(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """a @ b with fp32 (or fp64) accumulation, result fp32, NOT rounded."""
        if self.accumulate_fp64:
            return (a.double() @ b.double()).float()
        return a @ b

    def linear(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """x · weightᵀ, fp32 accumulation, NOT rounded. x [..., in], weight [out, in]."""
        if self.accumulate_fp64:
            return F.linear(x.double(), weight.double()).float()
        return F.linear(x, weight)

    def gemm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """A bf16 GEMM: bf16 operands, fp32 accumulation, one rounding of the output."""
        return self.round(self.linear(x, weight))


def fp32(x: float) -> float:
    """The fp32 value nearest to x, as a Python float (scalars the spec computes in fp32)."""
    return float(np.float32(x))


def f32_to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """fp32 array -> uint16 bf16 bit patterns, round-to-nearest-even (NaN stays NaN)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    rounded = rounded.astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        rounded[nan] = np.uint16(0x7FC0)
    return rounded


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    """uint16 bf16 bit patterns -> fp32 array (exact widening)."""
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_bf16_np(a: np.ndarray) -> np.ndarray:
    """numpy bf16(x) kept in fp32."""
    return bf16_bits_to_f32(f32_to_bf16_bits(a))
