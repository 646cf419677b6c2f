#!/usr/bin/env python3
"""Writes a Beam-architecture checkpoint of any size for load benchmarks (docs/benchmarks.md,
"Loading weights"): config.json, one safetensors shard per layer plus one for the embedding and
head, and model.safetensors.index.json, in BEAM.md 0a's tensor names and dtypes (router weight and
correction bias F32, the rest BF16). Values are small finite numbers repeated from one random
block (they exercise the load, not the model), written as they are made, so a 24 GB checkpoint
needs no 24 GB of memory.

  tools/gpu/synthetic_checkpoint.py OUT_DIR [--layers 4] [--experts 64] [--hidden 5120]
      [--moe-width 2560] [--vocab 151936]

Beam's widths by default (hidden 5120, 48 / 8 heads of 128, expert width 2560, window 512); the
first layer is dense (width 17408) when --dense-first is given, the others routed; every fourth
layer and the last use full attention.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
from pathlib import Path

BLOCK_BYTES = 1 << 24  # the repeated block of values


def value_block() -> bytes:
    """Random little-endian bf16 / f32 bytes whose high byte keeps every value finite and small
    (|x| < 0.06): each 16-bit half's top byte is 0x3c or 0xbc."""
    rnd = bytearray(os.urandom(BLOCK_BYTES))
    rnd[1::2] = bytes(0x3C | (b & 0x80) for b in rnd[1::2])
    return bytes(rnd)


def config_json(args) -> dict:
    n = args.layers
    full = [(i + 1) % 4 == 0 or i == n - 1 for i in range(n)]
    kinds = ["full_attention" if f else "sliding_attention" for f in full]
    mlp = ["dense" if (i == 0 and args.dense_first) else "sparse" for i in range(n)]
    return {
        "architectures": ["BeamForCausalLM"], "model_type": "beam",
        "vocab_size": args.vocab, "hidden_size": args.hidden, "num_hidden_layers": n,
        "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
        "intermediate_size": 17408, "moe_intermediate_size": args.moe_width,
        "n_routed_experts": args.experts, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4,
        "routed_scaling_factor": 2.5, "norm_topk_prob": True, "rms_norm_eps": 1e-6,
        "sliding_window": 512, "layer_types": kinds, "mlp_layer_types": mlp,
        "final_logit_softcapping": 30.0, "max_position_embeddings": 1048576,
        "tie_word_embeddings": False, "eos_token_id": 2, "hidden_act": "silu",
        "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                            "full_attention": None},
        "torch_dtype": "bfloat16", "n_shared_experts": 0, "scoring_func": "sigmoid",
        "topk_method": "noaux_tc",
    }


def layer_tensors(cfg: dict, layer: int):
    """(name, dtype, shape) of one layer, in BEAM.md's names."""
    H, D = cfg["hidden_size"], cfg["head_dim"]
    QD, KVD = cfg["num_attention_heads"] * D, cfg["num_key_value_heads"] * D
    p = f"model.layers.{layer}."
    out = [(p + n, "BF16", [H]) for n in ("input_layernorm.weight", "post_attention_layernorm.weight",
                                          "pre_feedforward_layernorm.weight",
                                          "post_feedforward_layernorm.weight")]
    out += [(p + "self_attn.q_proj.weight", "BF16", [QD, H]),
            (p + "self_attn.k_proj.weight", "BF16", [KVD, H]),
            (p + "self_attn.v_proj.weight", "BF16", [KVD, H]),
            (p + "self_attn.gate_proj.weight", "BF16", [QD, H]),
            (p + "self_attn.gate_bias", "BF16", [cfg["num_attention_heads"]]),
            (p + "self_attn.o_proj.weight", "BF16", [H, QD]),
            (p + "self_attn.q_norm.weight", "BF16", [D]),
            (p + "self_attn.k_norm.weight", "BF16", [D])]
    if cfg["mlp_layer_types"][layer] == "dense":
        I = cfg["intermediate_size"]
        return out + [(p + "mlp.gate_proj.weight", "BF16", [I, H]),
                      (p + "mlp.up_proj.weight", "BF16", [I, H]),
                      (p + "mlp.down_proj.weight", "BF16", [H, I])]
    E, Im = cfg["n_routed_experts"], cfg["moe_intermediate_size"]
    out += [(p + "mlp.gate.weight", "F32", [E, H]), (p + "mlp.gate.e_score_correction_bias", "F32", [E])]
    for e in range(E):
        out += [(f"{p}mlp.experts.{e}.gate_proj.weight", "BF16", [Im, H]),
                (f"{p}mlp.experts.{e}.up_proj.weight", "BF16", [Im, H]),
                (f"{p}mlp.experts.{e}.down_proj.weight", "BF16", [H, Im])]
    return out


def write_shard(path: Path, tensors, block: bytes) -> int:
    """Writes tensors [(name, dtype, shape)] with values from `block`; returns the data bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape in tensors:
        n = (4 if dtype == "F32" else 2)
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        left, at = offset, 0
        while left > 0:
            take = min(left, len(block) - at)
            f.write(block[at:at + take])
            left -= take
            at = (at + take) % len(block)
    return offset


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--experts", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=5120)
    ap.add_argument("--moe-width", type=int, default=2560)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--dense-first", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = config_json(args)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    block = value_block()
    H, V = cfg["hidden_size"], cfg["vocab_size"]
    shards = [[("model.embed_tokens.weight", "BF16", [V, H]), ("model.norm.weight", "BF16", [H]),
               ("lm_head.weight", "BF16", [V, H])]]
    shards += [layer_tensors(cfg, layer) for layer in range(cfg["num_hidden_layers"])]
    weight_map, total = {}, 0
    for i, tensors in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_shard(out / fname, tensors, block)
        weight_map.update({name: fname for name, _, _ in tensors})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"{out}: {len(shards)} shards, {total / 2**30:.2f} GiB of tensors")
    return 0


if __name__ == "__main__":
    sys.exit(main())
