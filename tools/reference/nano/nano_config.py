"""beam-nano's architecture (every Beam feature at ~18M parameters) and its initialisation.
`nano_config()` is the shipped size; `toy_config()` the CPU pipeline test's."""
from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from beam_ref.config import DENSE, FULL, SLIDING, SPARSE, BeamConfig  # noqa: E402
from beam_ref.model import BeamForCausalLM  # noqa: E402

from tokenizer_spec import ENDOFTEXT, IM_END, SPECIAL_TOKENS, VOCAB_SIZE  # noqa: E402

SEQ_LEN = 1024          # training sequence length (> sliding window)
STD_WEIGHT = 0.02
STD_EMBED = 1.0         # the residual stream is RMS ~1 (sandwich norms + depth-scaled average)


def _extra() -> dict:
    return {"n_shared_experts": 0, "scoring_func": "sigmoid", "topk_method": "noaux_tc",
            "pad_token_id": SPECIAL_TOKENS.index(ENDOFTEXT)}


def nano_config(vocab_size: int = VOCAB_SIZE) -> BeamConfig:
    eos = [SPECIAL_TOKENS.index(IM_END), SPECIAL_TOKENS.index(ENDOFTEXT)]
    return BeamConfig(
        vocab_size=vocab_size, hidden_size=256, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        intermediate_size=768, moe_intermediate_size=128,
        n_routed_experts=16, num_experts_per_tok=4, n_group=4, topk_group=2,
        routed_scaling_factor=2.5, norm_topk_prob=True, rms_norm_eps=1e-6, sliding_window=128,
        layer_types=[SLIDING, SLIDING, SLIDING, FULL] * 2,
        mlp_layer_types=[DENSE] + [SPARSE] * 7,
        rope_theta=10000.0, final_logit_softcapping=30.0, max_position_embeddings=4096,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=eos, extra=_extra())


def toy_config(vocab_size: int) -> BeamConfig:
    """CPU pipeline test: every feature, tiny widths, window 16 < toy sequence length 64."""
    cfg = nano_config(vocab_size)
    cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim = 32, 4, 16
    cfg.intermediate_size, cfg.moe_intermediate_size, cfg.sliding_window = 64, 16, 16
    cfg.layer_types = [SLIDING, FULL, SLIDING, FULL]
    cfg.mlp_layer_types = [DENSE] + [SPARSE] * 3
    cfg.validate()
    return cfg


@torch.no_grad()
def init_weights(model: BeamForCausalLM, seed: int) -> None:
    """Norm weights 1, gate bias 0, correction bias 0, embeddings N(0, 1), every matrix (router
    included, fp32) N(0, 0.02)."""
    gen = torch.Generator().manual_seed(seed)
    for name, p in sorted(model.named_parameters()):
        if name.endswith("norm.weight"):
            p.fill_(1.0)
        elif name.endswith("gate_bias"):
            p.zero_()
        elif name == "model.embed_tokens.weight":
            p.copy_(torch.randn(p.shape, generator=gen) * STD_EMBED)
        else:
            p.copy_(torch.randn(p.shape, generator=gen) * STD_WEIGHT)
    for layer in model.model.layers:
        if not layer.dense:
            layer.mlp.gate.e_score_correction_bias.zero_()
