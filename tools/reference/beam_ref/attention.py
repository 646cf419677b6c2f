"""Beam attention sublayer (BEAM.md 3.3-3.7): q/k/v/gate projections of the same normed input,
per-head q/k RMSNorm, RoPE + sliding window (sliding layers) or NoPE + SSMax (full layers), GQA,
fp32 softmax and accumulation, sigmoid output gate with per-head bias, o_proj."""
from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import SLIDING, BeamConfig
from .kv_cache import LayerKV
from .norm import RMSNorm
from .numerics import Numerics, fp32
from .rope import RotaryEmbedding
from .test_knobs import TestKnobs

SSMAX_BASE = 2048.0
SSMAX_EXPONENT = 0.1


def ssmax_scale(positions: torch.Tensor) -> torch.Tensor:
    """s(p) = (1 + (p+1)/2048) ** 0.1 in fp32; positions [B, T] int64 -> [B, T] fp32."""
    return torch.pow(1.0 + (positions.float() + 1.0) / SSMAX_BASE, SSMAX_EXPONENT)


def visibility_mask(q_pos: torch.Tensor, k_pos: torch.Tensor, window: Optional[int],
                    off_by_one: bool = False) -> torch.Tensor:
    """[B, T] query and [B, S] key positions -> bool [B, T, S]: causal, and for sliding layers
    p - p' < W (W keys including the query's own). off_by_one (TEST-ONLY) admits W+1 keys."""
    diff = q_pos[:, :, None] - k_pos[:, None, :]
    visible = diff >= 0
    if window is not None:
        limit = window + 1 if off_by_one else window
        visible &= diff < limit
    return visible


class BeamAttention(nn.Module):
    def __init__(self, cfg: BeamConfig, layer_idx: int, numerics: Numerics, knobs: TestKnobs):
        super().__init__()
        H, D = cfg.hidden_size, cfg.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, D
        self.sliding = cfg.layer_types[layer_idx] == SLIDING
        self.window = cfg.sliding_window if self.sliding else None
        self.numerics, self.knobs = numerics, knobs
        self.q_proj = nn.Linear(H, self.num_heads * D, bias=False)
        self.k_proj = nn.Linear(H, self.num_kv_heads * D, bias=False)
        self.v_proj = nn.Linear(H, self.num_kv_heads * D, bias=False)
        self.gate_proj = nn.Linear(H, self.num_heads * D, bias=False)
        self.gate_bias = nn.Parameter(torch.zeros(self.num_heads))
        self.o_proj = nn.Linear(self.num_heads * D, H, bias=False)
        self.q_norm = RMSNorm(D, cfg.rms_norm_eps, numerics)
        self.k_norm = RMSNorm(D, cfg.rms_norm_eps, numerics)
        self.rotary = (RotaryEmbedding(cfg.rope_theta, D, numerics, knobs.mistake_rope_interleaved)
                       if self.sliding else None)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kv: Optional[LayerKV]) -> torch.Tensor:
        """x [B, T, H] bf16-valued normed input, positions [B, T] int64 absolute -> [B, T, H]."""
        B, T, _ = x.shape
        nm, D = self.numerics, self.head_dim
        q = self.q_norm(nm.gemm(x, self.q_proj.weight).view(B, T, self.num_heads, D))
        k = self.k_norm(nm.gemm(x, self.k_proj.weight).view(B, T, self.num_kv_heads, D))
        v = nm.gemm(x, self.v_proj.weight).view(B, T, self.num_kv_heads, D)
        g = nm.gemm(x, self.gate_proj.weight).view(B, T, self.num_heads, D)
        if self.sliding:
            cos, sin = self.rotary.cos_sin(positions)
            q, k = self.rotary.apply(q, cos, sin), self.rotary.apply(k, cos, sin)
        else:
            q = nm.round(q * ssmax_scale(positions)[:, :, None, None])
        k_all, v_all, k_pos = kv.append(k, v, positions) if kv is not None else (k, v, positions)
        mask = visibility_mask(positions, k_pos, self.window, self.knobs.mistake_window_off_by_one)
        o = self._attend(q, k_all, v_all, mask)
        o = self._gate(o, g)
        return nm.gemm(o.reshape(B, T, self.num_heads * D), self.o_proj.weight)

    def _attend(self, q, k, v, mask) -> torch.Tensor:
        """q [B,T,Nq,D], k/v [B,S,Nkv,D], mask [B,T,S] -> [B,T,Nq,D] bf16-valued.
        GQA: query head h reads kv head h // (Nq/Nkv). fp32 scores, softmax and accumulation."""
        group = self.num_heads // self.num_kv_heads
        qh = q.transpose(1, 2)
        kh = k.repeat_interleave(group, dim=2).transpose(1, 2)
        vh = v.repeat_interleave(group, dim=2).transpose(1, 2)
        scale = fp32(1.0 / math.sqrt(self.head_dim))
        if not self.numerics.exact and hasattr(F, "scaled_dot_product_attention"):
            dtype = qh.dtype  # training path: fused kernel, same mask semantics
            o = F.scaled_dot_product_attention(qh, kh.to(dtype), vh.to(dtype), attn_mask=mask[:, None])
            return o.transpose(1, 2)
        nm = self.numerics
        scores = nm.matmul(qh, kh.transpose(-1, -2)) * scale
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        return nm.round(nm.matmul(probs, vh).transpose(1, 2))

    def _gate(self, o: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
        """o, g [B,T,Nq,D]: t = bf16(g + b[head]); s = bf16(sigmoid(t)); bf16(o * s)."""
        r = self.numerics.round
        t = r(g) if self.knobs.mistake_no_gate_bias else r(g + self.gate_bias[None, None, :, None])
        return r(o * r(torch.sigmoid(t)))
