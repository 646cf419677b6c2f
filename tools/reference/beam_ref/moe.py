"""MLP sublayers (BEAM.md 3.9-3.10): SwiGLU (dense layers and each expert) and the grouped sigmoid
"noaux_tc" router + fp32 weighted combine of the sparse layers."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import BeamConfig
from .numerics import Numerics

NORM_EPS = 1e-20        # DeepSeek-V3 HF epsilon of the top-k renormalisation [I]
NO_MARGIN = 1e30        # margin reported when no competing choice exists


class SwiGLU(nn.Module):
    """down(bf16(silu(f32 gate) * f32 up)); gate/up/down GEMM outputs rounded to bf16."""

    def __init__(self, hidden: int, width: int, numerics: Numerics):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, width, bias=False)
        self.up_proj = nn.Linear(hidden, width, bias=False)
        self.down_proj = nn.Linear(width, hidden, bias=False)
        self.numerics = numerics

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., H] bf16-valued -> [..., H] bf16-valued."""
        nm = self.numerics
        gate = nm.gemm(x, self.gate_proj.weight).float()
        up = nm.gemm(x, self.up_proj.weight).float()
        act = nm.round(F.silu(gate) * up)
        return nm.gemm(act, self.down_proj.weight)


@dataclass
class Routing:
    experts: torch.Tensor  # [N, K] int64, descending `choice` order
    weights: torch.Tensor  # [N, K] fp32, renormalised unbiased scores * routed_scaling_factor
    margins: torch.Tensor  # [N] fp32, min(expert margin, group margin); see GroupedRouter


class GroupedRouter(nn.Module):
    """Sigmoid scores from fp32 logits; selection by score + e_score_correction_bias over the
    topk_group best groups (group score = sum of its top-2 choices). Experts of excluded groups
    are masked to -inf, so they can never be selected (BEAM.md open question 5: vLLM's choice)."""

    def __init__(self, cfg: BeamConfig, numerics: Numerics):
        super().__init__()
        E, H = cfg.n_routed_experts, cfg.hidden_size
        self.weight = nn.Parameter(torch.zeros(E, H, dtype=torch.float32))
        # Fixed for inference; the beam-nano trainer updates it with the aux-loss-free rule.
        self.register_buffer("e_score_correction_bias", torch.zeros(E, dtype=torch.float32))
        self.num_groups, self.topk_group = cfg.n_group, cfg.topk_group
        self.top_k, self.norm_topk_prob = cfg.num_experts_per_tok, cfg.norm_topk_prob
        self.scaling = float(cfg.routed_scaling_factor)
        self.numerics = numerics

    def forward(self, x: torch.Tensor, forced_experts: Optional[torch.Tensor] = None) -> Routing:
        """x [N, H] bf16-valued -> Routing. Logits are fp32 x · fp32 Wᵀ, never autocast.
        forced_experts [N, K] (routed-experts replay): use this selection instead of the router's
        own; weights still come from this router's unbiased scores, margins from its choices."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            logits = self.numerics.linear(x.float(), self.weight.float())
            scores = torch.sigmoid(logits)
            choice = scores.detach() + self.e_score_correction_bias.float()
            kept, group_margin = self._kept_experts(choice)
            masked = choice.masked_fill(~kept, float("-inf"))
            k = self.top_k
            ranked = masked.topk(min(k + 1, masked.shape[-1]), dim=-1, sorted=True)
            experts = ranked.indices[:, :k] if forced_experts is None else forced_experts.to(ranked.indices)
            if ranked.values.shape[-1] > k:
                expert_margin = ranked.values[:, k - 1] - ranked.values[:, k]
                expert_margin = torch.nan_to_num(expert_margin, posinf=NO_MARGIN)
            else:
                expert_margin = torch.full_like(group_margin, NO_MARGIN)
            weights = scores.gather(1, experts)
            if self.norm_topk_prob:
                weights = weights / (weights.sum(dim=-1, keepdim=True) + NORM_EPS)
            weights = weights * self.scaling
        return Routing(experts, weights, torch.minimum(expert_margin, group_margin))

    def _kept_experts(self, choice: torch.Tensor):
        """choice [N, E] -> (bool [N, E] experts of the topk_group best groups, group margin [N]:
        score of the last kept group minus the best excluded group, NO_MARGIN if none excluded)."""
        N, E = choice.shape
        grouped = choice.view(N, self.num_groups, E // self.num_groups)
        top2 = grouped.topk(min(2, grouped.shape[-1]), dim=-1).values
        group_scores = top2[..., 0] + top2[..., 1] if top2.shape[-1] == 2 else top2[..., 0]
        ranked = group_scores.topk(self.num_groups, dim=-1, sorted=True)
        kept_groups = ranked.indices[:, : self.topk_group]
        group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter(1, kept_groups, True)
        if self.topk_group < self.num_groups:
            margin = ranked.values[:, self.topk_group - 1] - ranked.values[:, self.topk_group]
        else:
            margin = torch.full((N,), NO_MARGIN, device=choice.device)
        kept = group_mask[:, :, None].expand(N, self.num_groups, E // self.num_groups).reshape(N, E)
        return kept, margin


class SparseMoe(nn.Module):
    """Routed experts, no shared expert. Each expert's down output is bf16; the combine is
    Σ_k w_k · f32(out_k) in fp32 in descending-choice order, then ONE bf16 rounding."""

    def __init__(self, cfg: BeamConfig, numerics: Numerics):
        super().__init__()
        self.gate = GroupedRouter(cfg, numerics)
        self.experts = nn.ModuleList(
            SwiGLU(cfg.hidden_size, cfg.moe_intermediate_size, numerics) for _ in range(cfg.n_routed_experts))
        self.numerics = numerics

    def forward(self, x: torch.Tensor, forced_experts: Optional[torch.Tensor] = None):
        """x [B, T, H] bf16-valued -> ([B, T, H] bf16-valued, Routing over the B*T rows).
        forced_experts [B, T, K]: replay this selection (see GroupedRouter.forward)."""
        B, T, H = x.shape
        flat = x.reshape(B * T, H)
        routing = self.gate(flat, None if forced_experts is None else forced_experts.reshape(B * T, -1))
        if not self.numerics.exact:
            return self._combine_all_experts(flat, routing).view(B, T, H), routing
        N, K = routing.experts.shape
        outs = flat.new_zeros(N, K, H, dtype=torch.float32)
        for e in torch.unique(routing.experts).tolist():
            rows, slots = (routing.experts == e).nonzero(as_tuple=True)
            outs = outs.index_put((rows, slots), self.experts[e](flat[rows]).float())
        acc = routing.weights[:, 0, None] * outs[:, 0]
        for k in range(1, K):
            acc = acc + routing.weights[:, k, None] * outs[:, k]
        return self.numerics.round(acc).view(B, T, H), routing

    def _combine_all_experts(self, flat: torch.Tensor, routing: Routing) -> torch.Tensor:
        """Training path (Numerics(exact=False), rounding off): every expert runs on every row as
        two wide GEMMs over the concatenated expert weights, and each expert's activations are
        scaled by its routing weight (0 where not selected) before the concatenated down
        projection. Equals Σ_k w_k · expert_k(x) without the bf16 roundings, with static shapes
        and no host syncs (autograd- and CUDA-friendly). flat [N, H] -> [N, H]."""
        N = flat.shape[0]
        E, width = len(self.experts), self.experts[0].gate_proj.weight.shape[0]
        dense_w = torch.zeros(N, E, dtype=torch.float32, device=flat.device).scatter(
            1, routing.experts, routing.weights.float())
        gate_w = torch.cat([e.gate_proj.weight for e in self.experts])        # [E*I, H]
        up_w = torch.cat([e.up_proj.weight for e in self.experts])            # [E*I, H]
        down_w = torch.cat([e.down_proj.weight for e in self.experts], dim=1)  # [H, E*I]
        gate = F.linear(flat, gate_w).float().view(N, E, width)
        up = F.linear(flat, up_w).float().view(N, E, width)
        act = F.silu(gate) * up * dense_w[:, :, None]
        return F.linear(act.view(N, E * width).to(flat.dtype), down_w).float()
