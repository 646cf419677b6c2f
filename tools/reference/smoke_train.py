#!/usr/bin/python3
"""Smoke test of the training path (Numerics(exact=False)): a few AdamW steps on random tokens,
with bf16 autocast on CUDA, checking the loss falls and gradients reach every parameter kind.
Usage: smoke_train.py [--device cuda] [--model models/tiny-beam]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beam_ref.checkpoint import load_model  # noqa: E402
from beam_ref.numerics import Numerics  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--model", default=str(Path(__file__).resolve().parents[2] / "models" / "tiny-beam"))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=30)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = load_model(args.model, Numerics(exact=False), device=args.device).train()
    V = model.config.vocab_size
    data = torch.randint(0, V, (8, 33), device=args.device)  # one fixed batch: must be memorised
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    use_autocast = args.device.startswith("cuda")
    losses = []
    for _ in range(args.steps):
        with torch.autocast(device_type="cuda" if use_autocast else "cpu", dtype=torch.bfloat16,
                            enabled=use_autocast):
            out = model(data[:, :-1])
            loss = F.cross_entropy(out.logits.float().reshape(-1, V), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    grads = {n: p.grad is not None and bool(p.grad.abs().sum() > 0) for n, p in model.named_parameters()}
    kinds = ["gate_bias", "q_norm", "mlp.gate.weight", "experts", "embed_tokens", "lm_head"]
    reached = {k: any(v for n, v in grads.items() if k in n) for k in kinds}
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; gradients reach: {reached}")
    ok = losses[-1] < 0.7 * losses[0] and all(reached.values())
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
