"""Incremental KV cache of the reference: per layer, the bf16-valued K and V (after k_norm and RoPE)
of every token seen so far with their absolute positions. Nothing is evicted; the sliding window
is applied by the attention mask, so prefill, chunked prefill and decode share one code path."""
from __future__ import annotations

from typing import List, Optional

import torch


class LayerKV:
    def __init__(self):
        self.k: Optional[torch.Tensor] = None  # [B, S, Nkv, D]
        self.v: Optional[torch.Tensor] = None  # [B, S, Nkv, D]
        self.positions: Optional[torch.Tensor] = None  # [B, S] int64

    def append(self, k: torch.Tensor, v: torch.Tensor, positions: torch.Tensor):
        """Adds [B, T, Nkv, D] keys/values at positions [B, T]; returns all cached (k, v, positions)."""
        if self.k is None:
            self.k, self.v, self.positions = k, v, positions
        else:
            self.k = torch.cat((self.k, k), dim=1)
            self.v = torch.cat((self.v, v), dim=1)
            self.positions = torch.cat((self.positions, positions), dim=1)
        return self.k, self.v, self.positions

    @property
    def num_tokens(self) -> int:
        return 0 if self.k is None else self.k.shape[1]


class KVCache:
    """One LayerKV per decoder layer. Owned by one caller; not thread-safe."""

    def __init__(self, num_layers: int):
        self.layers: List[LayerKV] = [LayerKV() for _ in range(num_layers)]

    def __getitem__(self, layer: int) -> LayerKV:
        return self.layers[layer]

    @property
    def num_tokens(self) -> int:
        return self.layers[0].num_tokens
