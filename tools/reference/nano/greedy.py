"""Greedy decoding with the reference's KV cache (prefill the prompt, then one token a step), the
way an engine runs it, recording per step the top-1 minus top-2 logit margin and the smallest
routing margin, so fixtures can avoid near-ties that benign numeric noise could flip."""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence

import torch

from beam_ref.model import BeamForCausalLM


@dataclass
class GreedyResult:
    generated: List[int]
    logit_margins: List[float]     # per generated token: top1 - top2 of the fp32 soft-capped logits
    routing_margin_min: float      # smallest routing margin over prompt and generated tokens


@torch.no_grad()
def greedy(model: BeamForCausalLM, prompt: Sequence[int], max_new: int, stop_ids=()) -> GreedyResult:
    """Greedy continuation of `prompt` (ties: lowest id, as torch.argmax); stops after a stop id."""
    device = next(model.parameters()).device
    cache = model.new_cache()
    ids = torch.tensor([list(prompt)], dtype=torch.int64, device=device)
    pos = torch.arange(len(prompt), dtype=torch.int64, device=device)[None]
    generated, margins, routing_min = [], [], float("inf")
    for _ in range(max_new):
        out = model(ids, pos, cache)
        last = out.logits[0, -1].float()
        top2 = last.topk(2)
        nxt = int(torch.argmax(last))
        generated.append(nxt)
        margins.append(float(top2.values[0] - top2.values[1]))
        if out.router_margins.numel():
            routing_min = min(routing_min, float(out.router_margins.min()))
        if nxt in stop_ids:
            break
        p = int(pos[0, -1]) + 1
        ids = torch.tensor([[nxt]], dtype=torch.int64, device=device)
        pos = torch.tensor([[p]], dtype=torch.int64, device=device)
    return GreedyResult(generated, margins, routing_min)
