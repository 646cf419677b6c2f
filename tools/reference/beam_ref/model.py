"""The Beam decoder (BEAM.md 3.1, 3.8, 3.11): embedding, decoder layers with sandwich norms and the
depth-scaled residual, final norm, LM head and fp32 softcap. Parameter names equal the canonical
checkpoint names of BEAM.md 0a, so state_dict() is the checkpoint."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

import torch
from torch import nn

from .attention import BeamAttention
from .config import DENSE, BeamConfig
from .kv_cache import KVCache
from .moe import SparseMoe, SwiGLU
from .norm import RMSNorm
from .numerics import Numerics, fp32
from .test_knobs import NO_MISTAKES, TestKnobs


def depth_coefficients(idx: int):
    """(r, c) fp32 scalars of the depth-scaled residual: r = sqrt((idx-1)/idx), c = 1/sqrt(idx),
    each computed in fp64 and rounded once to fp32. Attention of layer L: idx 2L+2; MLP: 2L+3."""
    return fp32(math.sqrt((idx - 1) / idx)), fp32(1.0 / math.sqrt(idx))


@dataclass
class BeamOutput:
    logits: torch.Tensor           # [B, T, V] fp32, soft-capped
    routed_experts: torch.Tensor   # [num_sparse_layers, B, T, K] int64, descending choice order
    router_margins: torch.Tensor   # [num_sparse_layers, B, T] fp32
    # [B, T, n * H] fp32 holding bf16 values: the residual stream after each of forward's
    # capture_layers (post-MLP norm + depth-scaled add done; before the final norm), concatenated
    # in the order given. None unless capture_layers was passed (DFlash2 features, docs/dflash2.md).
    captured_hidden: Optional[torch.Tensor] = None


class DecoderLayer(nn.Module):
    def __init__(self, cfg: BeamConfig, layer_idx: int, numerics: Numerics, knobs: TestKnobs):
        super().__init__()
        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.numerics = numerics
        self.input_layernorm = RMSNorm(H, eps, numerics)
        self.self_attn = BeamAttention(cfg, layer_idx, numerics, knobs)
        self.post_attention_layernorm = RMSNorm(H, eps, numerics)
        self.pre_feedforward_layernorm = RMSNorm(H, eps, numerics)
        self.dense = cfg.mlp_layer_types[layer_idx] == DENSE
        self.mlp = (SwiGLU(H, cfg.intermediate_size, numerics) if self.dense else SparseMoe(cfg, numerics))
        self.post_feedforward_layernorm = RMSNorm(H, eps, numerics)
        self.attn_coeffs = depth_coefficients(2 * layer_idx + 2)
        self.mlp_coeffs = depth_coefficients(2 * layer_idx + 3)

    def _depth_add(self, residual, y, coeffs):
        """bf16(bf16(residual * r) + bf16(y * c))."""
        r_coef, c_coef = coeffs
        rnd = self.numerics.round
        return rnd(rnd(residual * r_coef) + rnd(y * c_coef))

    def forward(self, residual, positions, kv, forced_experts=None):
        """residual [B, T, H] bf16-valued -> (residual, Routing or None); forced_experts
        [B, T, K] replays an expert selection on a sparse layer."""
        a = self.self_attn(self.input_layernorm(residual), positions, kv)
        residual = self._depth_add(residual, self.post_attention_layernorm(a), self.attn_coeffs)
        x = self.pre_feedforward_layernorm(residual)
        if self.dense:
            m, routing = self.mlp(x), None
        else:
            m, routing = self.mlp(x, forced_experts)
        residual = self._depth_add(residual, self.post_feedforward_layernorm(m), self.mlp_coeffs)
        return residual, routing


class BeamModel(nn.Module):
    def __init__(self, cfg: BeamConfig, numerics: Numerics, knobs: TestKnobs):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i, numerics, knobs) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, numerics)


class BeamForCausalLM(nn.Module):
    """Beam with an incremental KV cache. numerics=Numerics(exact=False) switches the explicit bf16
    rounding off (training); test_knobs inject mistakes (tests only)."""

    def __init__(self, cfg: BeamConfig, numerics: Numerics = Numerics(), test_knobs: TestKnobs = NO_MISTAKES):
        super().__init__()
        cfg.validate()
        self.config, self.numerics = cfg, numerics
        self.model = BeamModel(cfg, numerics, test_knobs)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)

    def new_cache(self) -> KVCache:
        return KVCache(self.config.num_hidden_layers)

    def forward(self, input_ids: torch.Tensor, positions: Optional[torch.Tensor] = None,
                cache: Optional[KVCache] = None, replay_experts: Optional[torch.Tensor] = None,
                capture_layers: Optional[Sequence[int]] = None) -> BeamOutput:
        """input_ids [B, T] int64; positions [B, T] int64 absolute (default 0..T-1); cache, when
        given, holds the earlier tokens of each row and receives these ones; replay_experts
        [num_sparse_layers, B, T, K] forces the expert selection (routed-experts replay);
        capture_layers (0-based layer ids, repeats allowed) fills BeamOutput.captured_hidden."""
        B, T = input_ids.shape
        n_layers = self.config.num_hidden_layers
        for i in capture_layers or ():
            if not 0 <= int(i) < n_layers:
                raise ValueError(f"capture_layers: layer {i} is outside [0, {n_layers})")
        captured = {}
        if positions is None:
            positions = torch.arange(T, device=input_ids.device).expand(B, T)
        h = self.model.embed_tokens(input_ids).float()
        routings = []
        for i, layer in enumerate(self.model.layers):
            forced = None
            if replay_experts is not None and not layer.dense:
                forced = replay_experts[len(routings)]
            h, routing = layer(h, positions, cache[i] if cache is not None else None, forced)
            if routing is not None:
                routings.append(routing)
            if capture_layers is not None:
                captured[i] = h
        z = self.numerics.gemm(self.model.norm(h), self.lm_head.weight).float()
        cap = self.config.final_logit_softcapping
        logits = cap * torch.tanh(z / cap) if cap else z
        K = self.config.num_experts_per_tok
        experts = torch.stack([r.experts.view(B, T, K) for r in routings]) if routings else \
            torch.zeros(0, B, T, K, dtype=torch.int64)
        margins = torch.stack([r.margins.view(B, T) for r in routings]) if routings else \
            torch.zeros(0, B, T)
        capture = None
        if capture_layers is not None:
            parts = [captured[int(i)] for i in capture_layers]
            capture = torch.cat(parts, dim=-1) if parts else h.new_zeros(B, T, 0)
        return BeamOutput(logits, experts, margins, capture)
