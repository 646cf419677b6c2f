"""Model <-> checkpoint directory: canonical dtypes (router weight and correction bias F32, the rest
BF16), strict name matching in both directions, sharded writing with a chosen tensor order."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch

from .config import BeamConfig, load_config
from .model import BeamForCausalLM
from .numerics import Numerics
from .safetensors_io import Bf16Array, load_checkpoint, save_sharded
from .test_knobs import NO_MISTAKES, TestKnobs

FP32_SUFFIXES = ("mlp.gate.weight", "mlp.gate.e_score_correction_bias")


def is_fp32_tensor(name: str) -> bool:
    return name.endswith(FP32_SUFFIXES)


def model_tensors(model: BeamForCausalLM) -> Dict[str, object]:
    """state_dict -> {canonical name: numpy F32 array or Bf16Array (RNE-rounded)}."""
    out = {}
    for name, t in model.state_dict().items():
        a = t.detach().float().cpu().numpy()
        out[name] = a.astype(np.float32) if is_fp32_tensor(name) else Bf16Array.from_f32(a)
    return out


def save_model(model: BeamForCausalLM, out_dir, shards: List[List[str]], generation_config: Optional[dict] = None):
    """Writes config.json, generation_config.json and the sharded safetensors to out_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(model.config.to_dict(), indent=2) + "\n")
    if generation_config is not None:
        (out_dir / "generation_config.json").write_text(json.dumps(generation_config, indent=2) + "\n")
    save_sharded(model_tensors(model), out_dir, shards)


def load_model(model_dir, numerics: Numerics = Numerics(), test_knobs: TestKnobs = NO_MISTAKES,
               device: str = "cpu") -> BeamForCausalLM:
    """Builds the reference from config.json and loads every tensor; fails naming any missing,
    unexpected or mis-shaped tensor."""
    cfg: BeamConfig = load_config(model_dir)
    model = BeamForCausalLM(cfg, numerics, test_knobs)
    load_state_strict(model, load_checkpoint(model_dir), model_dir)
    return model.to(device).eval()


def load_state_strict(model: torch.nn.Module, tensors: dict, model_dir) -> None:
    """Loads `tensors` (name -> array) into `model` as fp32; fails naming any missing, unexpected
    or mis-shaped tensor."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise ValueError(f"{model_dir}: missing tensors {missing[:5]}, unexpected tensors {extra[:5]}")
    state = {}
    for name, ref in expected.items():
        t = tensors[name]
        a = t.to_f32() if isinstance(t, Bf16Array) else np.asarray(t, dtype=np.float32)
        if tuple(a.shape) != tuple(ref.shape):
            raise ValueError(f"{model_dir}: tensor {name} has shape {list(a.shape)}, expected {list(ref.shape)}")
        state[name] = torch.from_numpy(a.copy())
    model.load_state_dict(state, strict=True)
