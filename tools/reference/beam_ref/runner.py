"""Single-sequence drivers of the reference: full prefill, or chunked prefill through the KV cache
(chunk 1 = token-by-token decode). Results are numpy arrays for golden files and comparisons."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from .metrics import rel_error  # noqa: F401  (re-exported for golden.py)
from .model import BeamForCausalLM


@dataclass
class SequenceResult:
    logits: np.ndarray    # [T, V] fp32
    experts: np.ndarray   # [num_sparse_layers, T, K] int32, descending choice order
    margins: np.ndarray   # [num_sparse_layers, T] fp32


@torch.no_grad()
def run_sequence(model: BeamForCausalLM, tokens, start_pos: int = 0, chunk: Optional[int] = None,
                 replay_experts: Optional[np.ndarray] = None) -> SequenceResult:
    """Logits of every position of `tokens` placed at absolute positions start_pos.. ; chunk=None is
    one prefill, otherwise chunked prefill of `chunk` tokens at a time through one KV cache.
    replay_experts [num_sparse_layers, T, K] forces the expert selection."""
    device = next(model.parameters()).device
    ids = torch.as_tensor(np.asarray(tokens), dtype=torch.int64, device=device)[None, :]
    T = ids.shape[1]
    pos = torch.arange(start_pos, start_pos + T, dtype=torch.int64, device=device)[None, :]
    step = T if chunk is None else chunk
    cache = model.new_cache()
    forced = None if replay_experts is None else \
        torch.as_tensor(np.asarray(replay_experts), dtype=torch.int64, device=device)[:, None]
    parts = [model(ids[:, s:s + step], pos[:, s:s + step], cache,
                   None if forced is None else forced[:, :, s:s + step]) for s in range(0, T, step)]
    logits = torch.cat([p.logits for p in parts], dim=1)[0]
    experts = torch.cat([p.routed_experts for p in parts], dim=2)[:, 0]
    margins = torch.cat([p.router_margins for p in parts], dim=2)[:, 0]
    return SequenceResult(logits.float().cpu().numpy(), experts.to(torch.int32).cpu().numpy(),
                          margins.float().cpu().numpy())
