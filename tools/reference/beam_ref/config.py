"""BeamConfig for the reference: the numbers of a Beam-architecture model, read from / written to
config.json with the key names of BEAM.md sections 0a, 1 and 7 (one alias table below)."""
from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Optional

SLIDING = "sliding_attention"
FULL = "full_attention"
DENSE = "dense"
SPARSE = "sparse"

# Alternative key names accepted on read (canonical name -> aliases). One place to extend.
KEY_ALIASES = {
    "n_routed_experts": ["num_experts", "num_local_experts"],
    "num_experts_per_tok": ["moe_top_k"],
}


@dataclass
class BeamConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    moe_intermediate_size: int
    n_routed_experts: int
    num_experts_per_tok: int
    n_group: int
    topk_group: int
    routed_scaling_factor: float
    norm_topk_prob: bool
    rms_norm_eps: float
    sliding_window: int
    layer_types: list
    mlp_layer_types: list
    rope_theta: float
    final_logit_softcapping: Optional[float]
    max_position_embeddings: int = 1048576
    tie_word_embeddings: bool = False
    bos_token_id: Optional[int] = None
    eos_token_id: Optional[int] = None
    extra: dict = field(default_factory=dict)  # keys this reference does not interpret

    def validate(self) -> None:
        """Raises ValueError naming the key on any inconsistency."""
        n = self.num_hidden_layers
        if len(self.layer_types) != n:
            raise ValueError(f"config: layer_types has {len(self.layer_types)} entries, expected {n}")
        if len(self.mlp_layer_types) != n:
            raise ValueError(f"config: mlp_layer_types has {len(self.mlp_layer_types)} entries, expected {n}")
        for t in self.layer_types:
            if t not in (SLIDING, FULL):
                raise ValueError(f"config: layer_types has unknown value {t!r}")
        for t in self.mlp_layer_types:
            if t not in (DENSE, SPARSE):
                raise ValueError(f"config: mlp_layer_types has unknown value {t!r}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("config: num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            raise ValueError("config: head_dim must be even (RoPE)")
        if self.n_routed_experts % self.n_group:
            raise ValueError("config: n_routed_experts must be a multiple of n_group")
        if not 1 <= self.topk_group <= self.n_group:
            raise ValueError("config: topk_group must be in [1, n_group]")
        if self.num_experts_per_tok > self.topk_group * (self.n_routed_experts // self.n_group):
            raise ValueError("config: num_experts_per_tok exceeds the experts of the kept groups")
        if self.sliding_window < 1:
            raise ValueError("config: sliding_window must be >= 1")

    @property
    def sparse_layer_ids(self) -> list:
        return [i for i, t in enumerate(self.mlp_layer_types) if t == SPARSE]

    @staticmethod
    def from_dict(d: dict) -> "BeamConfig":
        d = dict(d)
        for canonical, aliases in KEY_ALIASES.items():
            for a in aliases:
                if canonical not in d and a in d:
                    d[canonical] = d.pop(a)
        rope = d.pop("rope_parameters", None)
        if rope is not None:
            sliding = rope.get(SLIDING)
            if rope.get(FULL) is not None:
                raise ValueError("config: rope_parameters.full_attention must be null (NoPE)")
            if sliding is None or sliding.get("rope_type", "default") != "default":
                raise ValueError("config: rope_parameters.sliding_attention must be rope_type 'default'")
            theta = float(sliding["rope_theta"])
        else:
            theta = float(d.pop("rope_theta"))
        d.pop("rope_theta", None)
        fields = BeamConfig.__dataclass_fields__
        known = set(fields) - {"extra", "rope_theta"}
        required = [k for k in known if fields[k].default is MISSING
                    and fields[k].default_factory is MISSING and k != "final_logit_softcapping"]
        missing = [k for k in required if k not in d]
        if missing:
            raise ValueError(f"config: missing keys {sorted(missing)}")
        kwargs = {k: d.pop(k) for k in list(d) if k in known}
        kwargs.setdefault("final_logit_softcapping", None)
        cfg = BeamConfig(rope_theta=theta, extra=d, **kwargs)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict:
        out = {"architectures": ["BeamForCausalLM"], "model_type": "beam"}
        for k in BeamConfig.__dataclass_fields__:
            if k in ("extra", "rope_theta"):
                continue
            v = getattr(self, k)
            if v is not None:
                out[k] = v
        out["hidden_act"] = "silu"
        out["rope_parameters"] = {SLIDING: {"rope_type": "default", "rope_theta": self.rope_theta},
                                  FULL: None}
        out["torch_dtype"] = "bfloat16"
        out.update(self.extra)
        return out


def load_config(model_dir) -> BeamConfig:
    path = Path(model_dir) / "config.json"
    with open(path) as f:
        try:
            return BeamConfig.from_dict(json.load(f))
        except (KeyError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from e
