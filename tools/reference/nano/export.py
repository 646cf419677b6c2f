"""Writes a trained beam-nano to a canonical Beam checkpoint directory (BEAM.md 0a names, router
weight and correction bias fp32, everything else bf16 RNE), sharded so that no file exceeds
--shard-cap bytes, with config.json, generation_config.json and the tokenizer files."""
from __future__ import annotations

import math
import shutil
import sys
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from beam_ref.checkpoint import is_fp32_tensor, save_model  # noqa: E402
from beam_ref.model import BeamForCausalLM  # noqa: E402

from tokenizer_spec import ENDOFTEXT, IM_END, SPECIAL_TOKENS  # noqa: E402

SHARD_CAP_BYTES = 15 * 2 ** 20   # files come back from the GPU machine only up to 16 MiB each
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


def generation_config() -> dict:
    return {"eos_token_id": [SPECIAL_TOKENS.index(IM_END), SPECIAL_TOKENS.index(ENDOFTEXT)],
            "pad_token_id": SPECIAL_TOKENS.index(ENDOFTEXT),
            "do_sample": True, "temperature": 0.7, "top_p": 0.99}


def balanced_shards(model: BeamForCausalLM, cap_bytes: int) -> List[List[str]]:
    """Tensors in state_dict order, cut into the fewest shards of <= cap_bytes, sizes balanced."""
    sizes = [(name, t.numel() * (4 if is_fp32_tensor(name) else 2)) for name, t in model.state_dict().items()]
    total = sum(s for _, s in sizes)
    n = max(1, math.ceil(total / cap_bytes))
    target = math.ceil(total / n)
    shards, current, used = [], [], 0
    for name, size in sizes:
        if current and (used + size > cap_bytes or (used >= target and len(shards) < n - 1)):
            shards.append(current)
            current, used = [], 0
        current.append(name)
        used += size
    shards.append(current)
    return shards


def export_model(model: BeamForCausalLM, out_dir, tokenizer_dir, cap_bytes: int = SHARD_CAP_BYTES) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("model*.safetensors*"):
        old.unlink()
    save_model(model, out, balanced_shards(model, cap_bytes), generation_config())
    for name in TOKENIZER_FILES:
        shutil.copyfile(Path(tokenizer_dir) / name, out / name)
