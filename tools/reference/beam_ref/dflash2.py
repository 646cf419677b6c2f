"""DFlash2 drafter reference (docs/dflash2.md, the contract): context K/V from the target's tapped
hidden states, one non-causal forward over the block [anchor, mask x (B-1)] with the two-tap
dynamic convolutions around every sublayer, the read-out through the target's LM head and the
greedy pairwise selector walk. Every bf16 rounding point of docs/dflash2.md is a
`Numerics.round` (or a `Numerics.gemm`, or the RMSNorm's one rounding) here, in the same order.

Parameter names equal the checkpoint tensor names of docs/dflash2.md (no `model.` prefix; the
codebooks without `.weight`), so `state_dict()` is the checkpoint. The drafter owns no embedding
and no LM head: `draft` takes the target's (`target.model.embed_tokens.weight`,
`target.lm_head.weight`)."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .checkpoint import load_state_strict
from .moe import SwiGLU
from .norm import RMSNorm
from .numerics import Numerics, fp32
from .rope import RotaryEmbedding
from .safetensors_io import SINGLE_NAME, Bf16Array, load_checkpoint, save_file

ARCHITECTURE = "DFlash2DraftModel"
DEFAULT_ROPE_THETA = 10000.0
SIDES = 2        # side 0: the conv before a sublayer, side 1: the conv after it
TAPS = 2         # conv_kernel_size: tap 0 reads x_t, tap 1 reads x_{t-1}


@dataclass
class DFlash2Config:
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    rms_norm_eps: float
    vocab_size: int
    target_layer_ids: List[int]
    block_size: int
    mask_token_id: int
    sliding_window: Optional[int] = None          # None: every context key is visible
    rope_theta: float = DEFAULT_ROPE_THETA
    conv_kernel_size: int = TAPS
    conv_group_size: int = 16
    selector_rank: int = 256
    selector_top_k: int = 16
    output_multiplier: float = 1.0
    final_logit_softcapping: Optional[float] = None
    extra: dict = field(default_factory=dict)           # top-level keys not interpreted here
    extra_dflash: dict = field(default_factory=dict)    # dflash_config keys not interpreted here

    @property
    def num_taps(self) -> int:
        return len(self.target_layer_ids)

    @property
    def conv_groups(self) -> int:
        return self.hidden_size // self.conv_group_size

    def validate(self) -> None:
        """Raises ValueError naming the key on any inconsistency."""
        def need(cond, msg):
            if not cond:
                raise ValueError(f"dflash2 config: {msg}")
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                  "head_dim", "intermediate_size", "vocab_size"):
            need(isinstance(getattr(self, k), int) and getattr(self, k) >= 1, f"{k} must be a positive integer")
        need(self.num_attention_heads % self.num_key_value_heads == 0,
             "num_attention_heads must be a multiple of num_key_value_heads")
        need(self.head_dim % 2 == 0, "head_dim must be even (RoPE)")
        need(self.rms_norm_eps > 0, "rms_norm_eps must be > 0")
        need(self.rope_theta > 0, "rope_theta must be > 0")
        need(self.sliding_window is None or self.sliding_window >= 1, "sliding_window must be >= 1 (or absent)")
        need(len(self.target_layer_ids) >= 1, "dflash_config.target_layer_ids must not be empty")
        need(all(isinstance(i, int) and i >= 0 for i in self.target_layer_ids),
             "dflash_config.target_layer_ids must be non-negative integers")
        need(self.block_size >= 2, "dflash_config.block_size must be >= 2 (the anchor plus drafts)")
        need(0 <= self.mask_token_id < self.vocab_size, "dflash_config.mask_token_id must be in [0, vocab_size)")
        need(self.conv_kernel_size == TAPS, f"dflash_config.conv_kernel_size {self.conv_kernel_size} "
                                            f"is not supported (only {TAPS})")
        need(self.conv_group_size >= 1 and self.hidden_size % self.conv_group_size == 0,
             "dflash_config.conv_group_size must divide hidden_size")
        need(self.selector_rank >= 1, "dflash_config.selector_rank must be >= 1")
        need(1 <= self.selector_top_k <= self.vocab_size,
             "dflash_config.selector_top_k must be in [1, vocab_size]")
        need(math.isfinite(self.output_multiplier), "dflash_config.output_multiplier must be finite")
        need(self.final_logit_softcapping is None or self.final_logit_softcapping > 0,
             "dflash_config.final_logit_softcapping must be > 0 (or absent)")

    def check_target(self, target_cfg) -> None:
        """Raises ValueError if this drafter cannot serve the given target BeamConfig."""
        if self.hidden_size != target_cfg.hidden_size:
            raise ValueError(f"dflash2 config: hidden_size {self.hidden_size} != target hidden_size "
                             f"{target_cfg.hidden_size}")
        if self.vocab_size != target_cfg.vocab_size:
            raise ValueError(f"dflash2 config: vocab_size {self.vocab_size} != target vocab_size "
                             f"{target_cfg.vocab_size}")
        bad = [i for i in self.target_layer_ids if i >= target_cfg.num_hidden_layers]
        if bad:
            raise ValueError(f"dflash2 config: target_layer_ids {bad} exceed the target's "
                             f"{target_cfg.num_hidden_layers} layers")

    @staticmethod
    def from_dict(d: dict) -> "DFlash2Config":
        d = dict(d)
        dfl = dict(d.pop("dflash_config", None) or {})
        # The rotary base: rope_parameters.rope_theta, rope_theta or rope_scaling.rope_theta; all
        # that are present must agree.
        thetas = {}
        for key in ("rope_parameters", "rope_scaling"):
            sub = d.get(key)
            if isinstance(sub, dict):
                if sub.get("rope_type", "default") != "default":
                    raise ValueError(f"dflash2 config: {key}.rope_type {sub.get('rope_type')!r} is not supported")
                if "rope_theta" in sub:
                    thetas[f"{key}.rope_theta"] = float(sub["rope_theta"])
        if "rope_theta" in d:
            thetas["rope_theta"] = float(d["rope_theta"])
        if len(set(thetas.values())) > 1:
            raise ValueError(f"dflash2 config: conflicting rotary bases {thetas}")
        theta = next(iter(thetas.values()), DEFAULT_ROPE_THETA)
        for key in ("rope_parameters", "rope_scaling", "rope_theta", "architectures", "torch_dtype"):
            d.pop(key, None)
        if d.pop("hidden_act", "silu") != "silu":
            raise ValueError("dflash2 config: hidden_act must be 'silu' (SwiGLU)")
        required = ["hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "head_dim", "intermediate_size", "rms_norm_eps", "vocab_size"]
        missing = [k for k in required if k not in d]
        missing += [f"dflash_config.{k}" for k in ("target_layer_ids", "block_size", "mask_token_id")
                    if k not in dfl]
        if missing:
            raise ValueError(f"dflash2 config: missing keys {missing}")
        kw = {k: d.pop(k) for k in required}
        kw["rms_norm_eps"] = float(kw["rms_norm_eps"])
        window = d.pop("sliding_window", None)
        opt_ints = {k: int(dfl.pop(k)) for k in ("conv_kernel_size", "conv_group_size", "selector_rank",
                                                  "selector_top_k") if k in dfl}
        multiplier = dfl.pop("output_multiplier", None)
        cap = dfl.pop("final_logit_softcapping", None)
        cfg = DFlash2Config(
            **kw, **opt_ints, sliding_window=None if window is None else int(window), rope_theta=theta,
            target_layer_ids=[int(i) for i in dfl.pop("target_layer_ids")],
            block_size=int(dfl.pop("block_size")), mask_token_id=int(dfl.pop("mask_token_id")),
            output_multiplier=1.0 if multiplier is None else float(multiplier),
            final_logit_softcapping=None if cap is None else float(cap),
            extra=d, extra_dflash=dfl)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict:
        out = {"architectures": [ARCHITECTURE]}
        for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                  "head_dim", "intermediate_size", "rms_norm_eps", "vocab_size"):
            out[k] = getattr(self, k)
        if self.sliding_window is not None:
            out["sliding_window"] = self.sliding_window
        out["hidden_act"] = "silu"
        out["rope_parameters"] = {"rope_type": "default", "rope_theta": self.rope_theta}
        out["torch_dtype"] = "bfloat16"
        dfl = {"target_layer_ids": list(self.target_layer_ids), "block_size": self.block_size,
               "mask_token_id": self.mask_token_id, "conv_kernel_size": self.conv_kernel_size,
               "conv_group_size": self.conv_group_size, "selector_rank": self.selector_rank,
               "selector_top_k": self.selector_top_k, "output_multiplier": self.output_multiplier}
        if self.final_logit_softcapping is not None:
            dfl["final_logit_softcapping"] = self.final_logit_softcapping
        dfl.update(self.extra_dflash)
        out["dflash_config"] = dfl
        out.update(self.extra)
        return out


def load_drafter_config(model_dir) -> DFlash2Config:
    path = Path(model_dir) / "config.json"
    try:
        return DFlash2Config.from_dict(json.loads(path.read_text()))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: {e}") from e


# ----------------------------------------------------------------------------------------------
# modules


class DynamicConv(nn.Module):
    """`layers.L.{attention,mlp}_conv`: base_kernel [side, tap, H] and kernel_projection
    [side * tap * groups, H]. d = bf16 GEMM of the sublayer's normed input, viewed [t, side, tap,
    group]; side 0 convolves the sublayer's input, side 1 its output (same d)."""

    def __init__(self, hidden: int, group_size: int, numerics: Numerics):
        super().__init__()
        self.group_size, self.numerics = group_size, numerics
        self.groups = hidden // group_size
        self.base_kernel = nn.Parameter(torch.zeros(SIDES, TAPS, hidden))
        self.kernel_projection = nn.Linear(hidden, SIDES * TAPS * self.groups, bias=False)

    def coefficients(self, a: torch.Tensor) -> torch.Tensor:
        """a [B, H] (the normed sublayer input) -> d [B, side, tap, group] bf16-valued."""
        return self.numerics.gemm(a, self.kernel_projection.weight).view(a.shape[0], SIDES, TAPS, self.groups)

    def forward(self, x: torch.Tensor, d: torch.Tensor, side: int) -> torch.Tensor:
        """y_t[c] = bf16(k0 * x_t[c] + k1 * x_{t-1}[c]), k_j = f32(base[side, j, c]) +
        f32(d_t[side, j, c // group_size]), fp32 products and fp32 sum; no tap-1 term at t = 0.
        x [B, H] bf16-valued (rows = block positions) -> [B, H] bf16-valued."""
        dk = d[:, side].float().repeat_interleave(self.group_size, dim=-1)   # [B, tap, H]
        k = self.base_kernel[side].float()[None] + dk                        # fp32 sums
        p0 = k[:, 0] * x                                                     # fp32 products
        p1 = k[1:, 1] * x[:-1]
        y = torch.cat((p0[:1], p0[1:] + p1), dim=0)                          # fp32 sum of the two
        return self.numerics.round(y)


class DraftAttention(nn.Module):
    """q/k/v/o projections and per-head q/k norms (`layers.L.self_attn.*`)."""

    def __init__(self, cfg: DFlash2Config, numerics: Numerics):
        super().__init__()
        H, D = cfg.hidden_size, cfg.head_dim
        self.num_heads, self.num_kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, D
        self.window, self.numerics = cfg.sliding_window, numerics
        self.q_proj = nn.Linear(H, self.num_heads * D, bias=False)
        self.k_proj = nn.Linear(H, self.num_kv_heads * D, bias=False)
        self.v_proj = nn.Linear(H, self.num_kv_heads * D, bias=False)
        self.o_proj = nn.Linear(self.num_heads * D, H, bias=False)
        self.q_norm = RMSNorm(D, cfg.rms_norm_eps, numerics)
        self.k_norm = RMSNorm(D, cfg.rms_norm_eps, numerics)

    def context_kv(self, c: torch.Tensor, positions: torch.Tensor, rotary: RotaryEmbedding):
        """c [T, H] projected context -> (K [T, Nkv, D] after k_norm + RoPE, V [T, Nkv, D])."""
        nm, T, D = self.numerics, c.shape[0], self.head_dim
        k = self.k_norm(nm.gemm(c, self.k_proj.weight).view(T, self.num_kv_heads, D))
        v = nm.gemm(c, self.v_proj.weight).view(T, self.num_kv_heads, D)
        return _rope(rotary, k, positions), v

    def forward(self, a: torch.Tensor, positions: torch.Tensor, rotary: RotaryEmbedding,
                ctx_k: torch.Tensor, ctx_v: torch.Tensor, ctx_pos: torch.Tensor) -> torch.Tensor:
        """a [B, H] (conv'd normed block), positions [B]; context ctx_k/ctx_v [S, Nkv, D] at
        ctx_pos [S] -> the attention output BEFORE o_proj, [B, Nq * D] bf16-valued."""
        nm, B, D = self.numerics, a.shape[0], self.head_dim
        q = self.q_norm(nm.gemm(a, self.q_proj.weight).view(B, self.num_heads, D))
        k = self.k_norm(nm.gemm(a, self.k_proj.weight).view(B, self.num_kv_heads, D))
        v = nm.gemm(a, self.v_proj.weight).view(B, self.num_kv_heads, D)
        q, k = _rope(rotary, q, positions), _rope(rotary, k, positions)
        # keys: the context (in the given order), then the B block keys (all visible, non-causal)
        keys, values = torch.cat((ctx_k, k), dim=0), torch.cat((ctx_v, v), dim=0)
        visible = torch.ones(B, keys.shape[0], dtype=torch.bool)
        if self.window is not None:
            visible[:, :ctx_k.shape[0]] = (positions[:, None] - ctx_pos[None, :]) < self.window
        group = self.num_heads // self.num_kv_heads
        kh = keys.repeat_interleave(group, dim=1).transpose(0, 1)       # [Nq, S+B, D]
        vh = values.repeat_interleave(group, dim=1).transpose(0, 1)
        qh = q.transpose(0, 1)                                          # [Nq, B, D]
        scores = nm.matmul(qh, kh.transpose(-1, -2)) * fp32(1.0 / math.sqrt(D))
        scores = scores.masked_fill(~visible[None], float("-inf"))
        probs = torch.softmax(scores, dim=-1)                           # fp32
        o = nm.round(nm.matmul(probs, vh)).transpose(0, 1)              # [B, Nq, D]
        return o.reshape(B, self.num_heads * D)


def _rope(rotary: RotaryEmbedding, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """x [T, N, D], positions [T] -> the target's rotate-half RoPE (bf16 cos/sin, bf16 products,
    bf16 sum), through beam_ref.rope exactly as attention.py applies it."""
    cos, sin = rotary.cos_sin(positions[None].long())
    return rotary.apply(x[None], cos, sin)[0]


class DraftLayer(nn.Module):
    def __init__(self, cfg: DFlash2Config, numerics: Numerics):
        super().__init__()
        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.numerics = numerics
        self.input_layernorm = RMSNorm(H, eps, numerics)
        self.self_attn = DraftAttention(cfg, numerics)
        self.post_attention_layernorm = RMSNorm(H, eps, numerics)
        self.mlp = SwiGLU(H, cfg.intermediate_size, numerics)
        self.attention_conv = DynamicConv(H, cfg.conv_group_size, numerics)
        self.mlp_conv = DynamicConv(H, cfg.conv_group_size, numerics)

    def forward(self, h, positions, rotary, ctx_k, ctx_v, ctx_pos):
        """h [B, H] bf16-valued block residual -> the next layer's residual (docs/dflash2.md 4)."""
        r = self.numerics.round
        a = self.input_layernorm(h)
        d = self.attention_conv.coefficients(a)
        a = self.attention_conv(a, d, 0)
        o = self.self_attn(a, positions, rotary, ctx_k, ctx_v, ctx_pos)
        o = self.numerics.gemm(o, self.self_attn.o_proj.weight)
        o = self.attention_conv(o, d, 1)
        h = r(h + o)
        a = self.post_attention_layernorm(h)
        d = self.mlp_conv.coefficients(a)
        m = self.mlp(self.mlp_conv(a, d, 0))
        m = self.mlp_conv(m, d, 1)
        return r(h + m)


class CandidateSelector(nn.Module):
    """`candidate_selector.*`: hidden_projection [R, H], predecessor/successor codebooks [V, R]."""

    def __init__(self, cfg: DFlash2Config, numerics: Numerics):
        super().__init__()
        self.top_k, self.rank, self.numerics = cfg.selector_top_k, cfg.selector_rank, numerics
        self.hidden_projection = nn.Linear(cfg.hidden_size, cfg.selector_rank, bias=False)
        self.predecessor_codebook = nn.Parameter(torch.zeros(cfg.vocab_size, cfg.selector_rank))
        self.successor_codebook = nn.Parameter(torch.zeros(cfg.vocab_size, cfg.selector_rank))

    def candidates(self, u: torch.Tensor) -> torch.Tensor:
        """u [N, V] fp32 -> [N, K] int64: the K largest per row, ties to the lower token id (a
        stable ascending sort of -u keeps equal values in id order)."""
        return torch.sort(-u, dim=-1, stable=True).indices[:, :self.top_k]

    def walk(self, g: torch.Tensor, u: torch.Tensor, anchor_id: int):
        """g [N, H], u [N, V] -> (candidates [N, K] int64, S [N, K] fp32, drafts [N] int64)."""
        nm = self.numerics
        cand = self.candidates(u)
        hp = nm.gemm(g, self.hidden_projection.weight)                   # [N, R] bf16-valued
        P, Sc = self.predecessor_codebook.float(), self.successor_codebook.float()
        scores, drafts, prev = [], [], int(anchor_id)
        for j in range(g.shape[0]):
            gate = nm.round(P[prev] * hp[j])                             # [R] bf16-valued
            cb = Sc[cand[j]]                                             # [K, R]
            pair = torch.zeros(cand.shape[1], dtype=torch.float32)
            for r in range(self.rank):                                   # fp32, r ascending
                pair = pair + gate[r] * cb[:, r]
            s = u[j, cand[j]] + pair
            best = 0
            for k in range(1, s.shape[0]):                               # first on ties
                if s[k] > s[best]:
                    best = k
            prev = int(cand[j, best])
            scores.append(s)
            drafts.append(prev)
        return cand, torch.stack(scores), torch.tensor(drafts, dtype=torch.int64)


class DFlash2Drafter(nn.Module):
    """The DFlash2 drafter. Parameter names = checkpoint tensor names (docs/dflash2.md)."""

    def __init__(self, cfg: DFlash2Config, numerics: Numerics = Numerics()):
        super().__init__()
        cfg.validate()
        self.config, self.numerics = cfg, numerics
        H = cfg.hidden_size
        self.fc = nn.Linear(cfg.num_taps * H, H, bias=False)
        self.hidden_norm = RMSNorm(H, cfg.rms_norm_eps, numerics)
        self.layers = nn.ModuleList(DraftLayer(cfg, numerics) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(H, cfg.rms_norm_eps, numerics)
        self.candidate_selector = CandidateSelector(cfg, numerics)
        self.rotary = RotaryEmbedding(cfg.rope_theta, cfg.head_dim, numerics)

    @torch.no_grad()
    def context_kv(self, features: torch.Tensor,
                   positions: torch.Tensor) -> List[Tuple[torch.Tensor, torch.Tensor]]:
        """features F [T, n_taps * H] (bf16-valued), positions [T] -> per drafter layer
        (Kc [T, Nkv, D] after k_norm + RoPE, Vc [T, Nkv, D]), bf16-valued fp32."""
        cfg = self.config
        if features.dim() != 2 or features.shape[1] != cfg.num_taps * cfg.hidden_size:
            raise ValueError(f"context_kv: features must be [T, {cfg.num_taps * cfg.hidden_size}], "
                             f"got {list(features.shape)}")
        if positions.shape != features.shape[:1]:
            raise ValueError("context_kv: positions must be [T]")
        c = self.hidden_norm(self.numerics.gemm(features.float(), self.fc.weight))
        return [layer.self_attn.context_kv(c, positions.long(), self.rotary) for layer in self.layers]

    @torch.no_grad()
    def draft(self, target_embed: torch.Tensor, target_lm_head: torch.Tensor, anchor_id: int,
              anchor_pos: int, context: Sequence[Tuple[torch.Tensor, torch.Tensor]],
              context_positions: torch.Tensor) -> Dict[str, torch.Tensor]:
        """One block: target_embed / target_lm_head [V, H] (the target's bf16 tables), the anchor
        token and its position p, per layer (Kc, Vc) [S, Nkv, D] from context_kv at
        context_positions [S] (all < p; absent positions are simply not listed).

        Returns {ids [B], positions [B], hidden [L, B, H] (block residual after each layer),
        g [B-1, H], u [B-1, V] fp32, candidates [B-1, K], S [B-1, K] fp32, drafts [B-1],
        top1 [B-1] (the per-row argmax, = candidates[:, 0])}."""
        cfg, nm = self.config, self.numerics
        B = cfg.block_size
        ctx_pos = context_positions.long()
        if len(context) != cfg.num_hidden_layers:
            raise ValueError(f"draft: context has {len(context)} layers, expected {cfg.num_hidden_layers}")
        if ctx_pos.numel() and int(ctx_pos.max()) >= anchor_pos:
            raise ValueError("draft: every context position must precede the anchor")
        if not 0 <= anchor_id < cfg.vocab_size:
            raise ValueError(f"draft: anchor id {anchor_id} outside the vocabulary")
        ids = torch.tensor([anchor_id] + [cfg.mask_token_id] * (B - 1), dtype=torch.int64)
        positions = torch.arange(anchor_pos, anchor_pos + B, dtype=torch.int64)
        h = target_embed.float()[ids]
        hidden = []
        for layer, (ck, cv) in zip(self.layers, context):
            h = layer(h, positions, self.rotary, ck.float(), cv.float(), ctx_pos)
            hidden.append(h)
        g = self.norm(h[1:])
        z = nm.gemm(g, target_lm_head.float())
        u = z * fp32(cfg.output_multiplier)
        cap = cfg.final_logit_softcapping
        if cap:
            u = cap * torch.tanh(u / cap)
        cand, S, drafts = self.candidate_selector.walk(g, u, anchor_id)
        return {"ids": ids, "positions": positions, "hidden": torch.stack(hidden), "g": g, "u": u,
                "candidates": cand, "S": S, "drafts": drafts, "top1": cand[:, 0].clone()}


# ----------------------------------------------------------------------------------------------
# checkpoint I/O


def canonical_name(name: str) -> str:
    """Drops a `model.` prefix and the codebooks' optional `.weight` suffix."""
    if name.startswith("model."):
        name = name[len("model."):]
    for cb in ("predecessor_codebook", "successor_codebook"):
        if name == f"candidate_selector.{cb}.weight":
            name = f"candidate_selector.{cb}"
    return name


def drafter_tensors(model: DFlash2Drafter) -> Dict[str, Bf16Array]:
    return {name: Bf16Array.from_f32(t.detach().float().cpu().numpy()) for name, t in model.state_dict().items()}


def save_drafter(model: DFlash2Drafter, out_dir) -> None:
    """config.json + one model.safetensors (bf16, canonical names, sorted)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(model.config.to_dict(), indent=2) + "\n")
    tensors = drafter_tensors(model)
    save_file(tensors, out_dir / SINGLE_NAME, {"format": "pt"}, order=sorted(tensors))


def load_drafter(model_dir, numerics: Numerics = Numerics()) -> DFlash2Drafter:
    """Builds the drafter from config.json and loads every tensor (single file or sharded);
    fails naming any missing, unexpected, duplicate or mis-shaped tensor."""
    cfg = load_drafter_config(model_dir)
    model = DFlash2Drafter(cfg, numerics)
    tensors = {}
    for name, t in load_checkpoint(model_dir).items():
        cname = canonical_name(name)
        if cname in tensors:
            raise ValueError(f"{model_dir}: tensor {cname} appears twice (as {name})")
        tensors[cname] = t
    load_state_strict(model, tensors, model_dir)
    return model.eval()
