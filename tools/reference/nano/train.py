#!/usr/bin/env python3
"""Trains beam-nano with the reference modules (Numerics(exact=False): no explicit rounding, bf16
autocast on CUDA, fused attention, all-experts MoE GEMMs): AdamW, linear warm-up then cosine decay
to 10%, gradient clipping 1.0, and after every step the DeepSeek-V3 auxiliary-loss-free balancing
e_score_correction_bias += gamma * sign(mean_load - load_e) per MoE layer (no gradient). Training
stops at --total-steps or at the wall-clock --deadline; without --total-steps, the step count is
fixed after 30 timed steps from the measured step time so the cosine ends at the deadline.
Data: random non-overlapping windows of seq_len+1 tokens of train.npy, one fresh permutation per
epoch (seeded), so (epoch, cursor) is the data position.
Writes: the canonical export (--out-model), --state-json (step, data position, schedule, loss
history: enough to continue from the exported weights with fresh AdamW moments), and optionally
the full state (--state-out: fp32 weights, AdamW moments, RNG; ~12 bytes a parameter).
Usage: train.py --data DIR --tokenizer DIR --out-model DIR --state-json FILE
                [--deadline UNIX_S] [--total-steps N] [--state-out FILE.pt]
                [--resume FILE.pt | --resume MODEL_DIR --resume-state FILE] [--toy] [--device cuda]"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from beam_ref.checkpoint import load_model  # noqa: E402
from beam_ref.model import BeamForCausalLM  # noqa: E402
from beam_ref.numerics import Numerics  # noqa: E402
from export import export_model  # noqa: E402
from nano_config import SEQ_LEN, init_weights, nano_config, toy_config  # noqa: E402

CALIBRATION_STEPS = 30   # steps timed (after 5 warm-up steps) before the step count is fixed
VAL_WINDOWS = 32         # windows of the quick validation loss printed while training


class WindowSampler:
    """Non-overlapping windows of seq_len+1 tokens; a seeded permutation per epoch."""

    def __init__(self, tokens: torch.Tensor, seq_len: int, batch: int, seed: int, epoch=0, cursor=0):
        self.tokens, self.seq_len, self.batch, self.seed = tokens, seq_len, batch, seed
        self.num_windows = (tokens.numel() - 1) // seq_len
        if self.num_windows < batch:
            raise ValueError(f"train data has {self.num_windows} windows, fewer than batch {batch}")
        self.epoch, self.cursor = epoch, cursor
        self.offsets = torch.arange(seq_len + 1, device=tokens.device)
        self._perm = self._permutation(epoch)

    def _permutation(self, epoch: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        return torch.randperm(self.num_windows, generator=gen).to(self.tokens.device)

    def next(self) -> torch.Tensor:
        """[batch, seq_len+1] int64 on the tokens' device."""
        if self.cursor + self.batch > self.num_windows:
            self.epoch, self.cursor = self.epoch + 1, 0
            self._perm = self._permutation(self.epoch)
        starts = self._perm[self.cursor:self.cursor + self.batch] * self.seq_len
        self.cursor += self.batch
        return self.tokens[starts[:, None] + self.offsets].long()


def lr_at(step: int, peak: float, warmup: int, total: int, min_frac: float) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_frac + (1 - min_frac) * 0.5 * (1 + math.cos(math.pi * progress)))


def make_optimizer(model, lr: float, wd: float, device: str):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (decay if p.dim() == 2 and "embed_tokens" not in name else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]
    extra = {"fused": True} if device.startswith("cuda") else {}
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), eps=1e-8, **extra)


def sparse_gates(model: BeamForCausalLM):
    return [layer.mlp.gate for layer in model.model.layers if not layer.dense]


@torch.no_grad()
def update_correction_bias(model, routed: torch.Tensor, gamma: float, counts_acc: torch.Tensor) -> None:
    """routed [num_sparse, B, T, K] -> per layer: bias += gamma * sign(mean_load - load)."""
    gates = sparse_gates(model)
    E = gates[0].e_score_correction_bias.numel()
    L = routed.shape[0]
    flat = routed.reshape(L, -1) + torch.arange(L, device=routed.device)[:, None] * E
    counts = torch.bincount(flat.reshape(-1), minlength=L * E).view(L, E).float()
    counts_acc += counts
    mean = counts.sum(dim=1, keepdim=True) / E
    delta = gamma * torch.sign(mean - counts)
    for i, g in enumerate(gates):
        g.e_score_correction_bias.add_(delta[i])


def autocast(device: str):
    """bf16 autocast on CUDA; plain fp32 elsewhere."""
    if device.startswith("cuda"):
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


@torch.no_grad()
def quick_val_loss(model, val: torch.Tensor, seq_len: int, device: str) -> float:
    n = min(VAL_WINDOWS, (val.numel() - 1) // seq_len)
    stride = max(1, ((val.numel() - 1) // seq_len) // max(n, 1))
    idx = torch.arange(n, device=val.device)[:, None] * stride * seq_len + torch.arange(seq_len + 1, device=val.device)
    batch = val[idx].long()
    model.eval()
    with autocast(device):
        logits = model(batch[:, :-1]).logits
    model.train()
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1)).item()


def build_model(args, vocab_size: int, device: str):
    """-> (model, resume dict or None)."""
    cfg = toy_config(vocab_size) if args.toy else nano_config(vocab_size)
    resume = None
    if args.resume and args.resume.endswith(".pt"):
        resume = torch.load(args.resume, map_location="cpu")
        model = BeamForCausalLM(cfg, Numerics(exact=False))
        model.load_state_dict(resume["model"])
    elif args.resume:
        if not args.resume_state:
            raise SystemExit("--resume MODEL_DIR needs --resume-state (the train_state json)")
        model = load_model(args.resume, Numerics(exact=False))
        resume = json.loads(Path(args.resume_state).read_text())
    else:
        model = BeamForCausalLM(cfg, Numerics(exact=False))
        init_weights(model, args.seed)
    return model.to(device).train(), resume


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, help="folder with train.npy / val.npy (encode_corpus.py)")
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--out-model", required=True)
    ap.add_argument("--state-out", default="", help="full training state (.pt), large")
    ap.add_argument("--state-json", required=True, help="small training state (json)")
    ap.add_argument("--resume", default="", help="full state .pt, or an exported model dir")
    ap.add_argument("--resume-state", default="", help="train_state json of --resume MODEL_DIR")
    ap.add_argument("--deadline", type=float, default=0.0, help="unix time to stop training at")
    ap.add_argument("--total-steps", type=int, default=0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=SEQ_LEN)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--gamma", type=float, default=1e-3, help="correction-bias update speed")
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--log-every-s", type=float, default=30.0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--toy", action="store_true", help="CPU pipeline test: toy_config()")
    args = ap.parse_args()
    if not args.deadline and not args.total_steps:
        ap.error("give --deadline or --total-steps")
    dev = args.device
    torch.manual_seed(args.seed)
    data = Path(args.data)
    train_tokens = torch.from_numpy(np.load(data / "train.npy").astype(np.int32)).to(dev)
    val_tokens = torch.from_numpy(np.load(data / "val.npy").astype(np.int32)).to(dev)
    tok_spec = json.loads((Path(args.tokenizer) / "tokenizer.json").read_text())
    vocab = max(len(tok_spec["model"]["vocab"]), max(t["id"] for t in tok_spec["added_tokens"]) + 1)
    model, resume = build_model(args, 8192 if not args.toy else vocab, dev)
    cfg = model.config
    V = cfg.vocab_size
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params:,} parameters, vocab {V}, device {dev}, train tokens {train_tokens.numel():,}",
          flush=True)
    opt = make_optimizer(model, args.lr, args.weight_decay, dev)
    step, total, tokens_seen, warmup = 0, args.total_steps, 0, args.warmup
    epoch = cursor = 0
    if resume is not None:
        step, epoch, cursor = resume["step"], resume["epoch"], resume["cursor"]
        tokens_seen = resume["tokens_seen"]
        total = args.total_steps or 0
        if "optimizer" in resume:
            opt.load_state_dict(resume["optimizer"])
        else:
            warmup = step + args.warmup  # fresh AdamW moments: warm up again from this step
    sampler = WindowSampler(train_tokens, args.seq_len, args.batch, args.seed, epoch, cursor)
    gates = sparse_gates(model)
    counts_acc = torch.zeros(len(gates), cfg.n_routed_experts, device=dev)
    loss_acc = torch.zeros((), device=dev)
    t_start = time.time()
    t_log, n_log, t_calib, first_step = t_start, 0, None, step
    history = []
    while True:
        if total and step >= total:
            break
        if args.deadline and time.time() >= args.deadline:
            break
        if not total and step - first_step == 5:
            if dev.startswith("cuda"):
                torch.cuda.synchronize()
            t_calib = time.time()
        if not total and step - first_step == 5 + CALIBRATION_STEPS:
            if dev.startswith("cuda"):
                torch.cuda.synchronize()
            per_step = (time.time() - t_calib) / CALIBRATION_STEPS
            total = step + int((args.deadline - time.time()) / per_step * 0.97)
            print(f"calibration: {per_step * 1000:.1f} ms/step -> total_steps {total}", flush=True)
        lr = lr_at(step, args.lr, warmup, total or 10 ** 9, args.min_lr_frac)
        for g in opt.param_groups:
            g["lr"] = lr
        batch = sampler.next()
        with autocast(dev):
            out = model(batch[:, :-1])
            loss = F.cross_entropy(out.logits.float().reshape(-1, V), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        update_correction_bias(model, out.routed_experts, args.gamma, counts_acc)
        loss_acc += loss.detach()
        n_log += 1
        step += 1
        tokens_seen += batch.shape[0] * (batch.shape[1] - 1)
        now = time.time()
        if now - t_log >= args.log_every_s or (total and step >= total):
            balance = counts_acc.max(dim=1).values / counts_acc.mean(dim=1)
            bias = torch.stack([g.e_score_correction_bias for g in gates])
            row = {"step": step, "total_steps": total, "elapsed_s": round(now - t_start, 1),
                   "train_loss": round(loss_acc.item() / n_log, 4), "lr": lr,
                   "tokens_per_s": round(n_log * batch.shape[0] * (batch.shape[1] - 1) / (now - t_log)),
                   "epoch": sampler.epoch + sampler.cursor / sampler.num_windows,
                   "max_over_mean_load": [round(x, 3) for x in balance.tolist()],
                   "bias_range": [round(bias.min().item(), 3), round(bias.max().item(), 3)],
                   "val_loss_quick": round(quick_val_loss(model, val_tokens, args.seq_len, dev), 4)}
            history.append(row)
            print("progress " + json.dumps(row), flush=True)
            counts_acc.zero_()
            loss_acc.zero_()
            t_log, n_log = time.time(), 0
    train_seconds = time.time() - t_start
    state = {"step": step, "total_steps": total, "epoch": sampler.epoch, "cursor": sampler.cursor,
             "tokens_seen": tokens_seen, "seed": args.seed, "batch": args.batch, "seq_len": args.seq_len,
             "lr": args.lr, "min_lr_frac": args.min_lr_frac, "warmup": warmup,
             "weight_decay": args.weight_decay, "gamma": args.gamma, "train_seconds": round(train_seconds, 1),
             "parameters": n_params, "history": history}
    print(f"trained {step} steps, {tokens_seen:,} tokens in {train_seconds:.0f}s", flush=True)
    export_model(model, args.out_model, args.tokenizer)
    Path(args.state_json).write_text(json.dumps(state, indent=1) + "\n")
    print(f"exported to {args.out_model}", flush=True)
    if args.state_out:
        torch.save({**state, "model": model.state_dict(), "optimizer": opt.state_dict(),
                    "torch_rng": torch.get_rng_state()}, args.state_out)
        print(f"full state saved to {args.state_out}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
