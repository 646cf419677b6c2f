#!/usr/bin/python3
"""Trains a DFlash2 drafter (docs/dflash2.md) for models/beam-nano and writes it to
models/beam-nano-dflash2 (config.json + model.safetensors, bf16), so that the engine can measure
speculative-decoding acceptance on real text. Reuses tools/reference/train_tiny_drafter.py's data
generation, batched drafter forward, loss and speculative decoding (imported, not copied).

1. Data: windows of .nano_data/dflash2_prompts.npy ([6000, 96] int32 Python source tokenized with
   beam-nano's tokenizer, tools/reference/nano/dflash2_prompts.py). Prompt = the first PROMPT_LEN
   tokens of a window, continued greedily by beam-nano for GEN_TOKENS tokens (eos ignored) with
   Numerics(exact=False), the KV cache and batches of 128; the residual stream after the drafter's
   target_layer_ids is captured at every position (rounded to bf16). Training windows 0..N-1,
   teacher-forced validation windows 5800.., evaluation windows 5900.. (never trained on).
2. Drafter (nano_drafter_config): 2 layers of hidden 256, 4 q / 2 kv heads of 64, MLP 768, window
   256, block 8, target_layer_ids [1, 4, 6], conv kernel 2 / group 16, selector rank 32 / top-k 8,
   no output multiplier, no softcap; rms_norm_eps and rope theta = beam-nano's (sliding layers).
   mask_token_id 5 = `<tool_call>`: one of beam-nano's special tokens (ids 0..6); the corpus filter
   drops every file containing a special-token string, so ids 1..6 never occur in the training text
   (or in any prompt window: their ids start at 7). 0 (`<|endoftext|>`, document separator and pad)
   and 2 (`<|im_end|>`, eos) are real tokens of the stream and `<|im_start|>` / `<think>` /
   `</think>` appear in chat renderings; `<tool_call>` is the least likely to be a real input.
   Fresh init (small std; convs start as the identity); embed and LM head are beam-nano's (frozen).
3. Training: train_tiny_drafter's objective (decay-weighted block CE over the full vocabulary +
   candidate-selector CE; anchors in the generated part), fp32, Adam, linear warm-up then cosine
   decay over a wall-clock budget (--train-seconds).
4. Saves with beam_ref's writer; evaluates the SAVED checkpoint with the exact (bf16) reference
   numerics of target and drafter: greedy speculative decoding (train_tiny_drafter.speculative_decode)
   of held-out windows 5900.. (prompt = first PROMPT_LEN tokens, GEN_TOKENS tokens each).

Result (torch 1.13 CPU, 2 threads, 2-core machine)
  (shipped models/beam-nano-dflash2; the CPU was shared with other jobs, load ~5, and no GPU could
  be started, so this is a weak drafter trained in two wall-clock stages)
  data: windows 0..511 (512 x (48 prompt + 48 generated) = 49,152 tokens, 21,504 anchors),
    generated in 323 s; validation windows 5800..5847.
  stage 1: --train-windows 512 --train-seconds 480 --cache /tmp/nd_cpu_data.pt --out /tmp/nd_cpu
    -> 51 steps of 8 sequences in 493 s (val top-1 of row 1: 0.07).
  stage 2: --init /tmp/nd_cpu --cache /tmp/nd_cpu_data.pt --train-windows 512 --train-seconds 420
    --batch-seqs 4 -> 414 steps of 4 sequences in 423 s. Training total 916 s (~15.3 min).
    Teacher-forced val: block CE 5.40, top-1 per row [0.28 0.18 0.13 0.12 0.11 0.09 0.09],
    selector pick [0.29 0.22 0.19 0.18 0.18 0.17 0.17], top-8 recall 0.37.
  evaluation (exact bf16 numerics, windows 5900..5919, 48 tokens each, 729 blocks):
    accepted-drafts histogram [610, 70, 26, 10, 3, 7, 0, 3]; mean accepted drafts per block
    0.302 (max 7); blocks with >= 1 accepted 0.163; 1.302 tokens per target forward; output equals
    plain greedy decoding on 3/3 checked windows. Still improving when stopped: more data/steps
    (--device cuda: generation batch 4096) would help.

Usage (repository root): tools/reference/nano/train_nano_drafter.py [--train-windows N]
    [--train-seconds S] [--eval-windows N] [--cache /tmp/nano_drafter_data.pt] [--eval-only]"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "reference"))
import train_tiny_drafter as ttd  # noqa: E402
from beam_ref.checkpoint import load_model  # noqa: E402
from beam_ref.config import load_config  # noqa: E402
from beam_ref.dflash2 import DFlash2Config, DFlash2Drafter, load_drafter, save_drafter  # noqa: E402
from beam_ref.numerics import Numerics  # noqa: E402

PROMPT_LEN = 48
GEN_TOKENS = 48
VAL_FIRST, VAL_WINDOWS = 5800, 48       # teacher-forced validation windows
EVAL_FIRST = 5900                       # held-out evaluation windows EVAL_FIRST ..
MASK_TOKEN_ID = 5                       # <tool_call>, see the docstring
TARGET_LAYER_IDS = [1, 4, 6]
INIT_SEED = 20261207
STD = 0.02                              # projections; o_proj / down_proj: STD / sqrt(2 * layers)
STD_CODEBOOK = 0.1
LR = 2e-3
WARMUP = 60
LR_FLOOR = 0.05
SEQS_PER_BATCH = 8


def nano_drafter_config(target_cfg) -> DFlash2Config:
    theta = target_cfg.rope_theta                  # rope_parameters.sliding_attention.rope_theta
    return DFlash2Config(
        hidden_size=256, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
        intermediate_size=768, rms_norm_eps=target_cfg.rms_norm_eps, vocab_size=8192, sliding_window=256,
        rope_theta=float(theta), target_layer_ids=list(TARGET_LAYER_IDS), block_size=8,
        mask_token_id=MASK_TOKEN_ID, conv_kernel_size=2, conv_group_size=16, selector_rank=32,
        selector_top_k=8, output_multiplier=1.0, final_logit_softcapping=None,
        extra={"model_type": "dflash2"})


def init_drafter(cfg: DFlash2Config, numerics: Numerics) -> DFlash2Drafter:
    dr = DFlash2Drafter(cfg, numerics)
    g = torch.Generator().manual_seed(INIT_SEED)
    resid_std = STD / math.sqrt(2 * cfg.num_hidden_layers)
    with torch.no_grad():
        for name, p in dr.named_parameters():
            if name.endswith("norm.weight"):
                p.fill_(1.0)
            elif name.endswith("base_kernel"):           # [side, tap, H]: y_t = x_t
                p.zero_()
                p[:, 0] = 1.0
            elif name.endswith("_codebook"):
                p.copy_(STD_CODEBOOK * torch.randn(p.shape, generator=g))
            elif name.endswith(("o_proj.weight", "down_proj.weight")):
                p.copy_(resid_std * torch.randn(p.shape, generator=g))
            else:
                p.copy_(STD * torch.randn(p.shape, generator=g))
    return dr


def windows(first: int, n: int) -> list:
    a = np.load(ROOT / ".nano_data" / "dflash2_prompts.npy")
    return [a[i, :PROMPT_LEN].astype(np.int64) for i in range(first, first + n)]


def make_data(target, prompts, capture):
    return ttd.generate(target, prompts, capture, gen_tokens=GEN_TOKENS)   # batch 128 (CPU) / 4096 (GPU)


def train(dr, target, data, val, seconds: float, seqs_per_batch: int, lr_max: float, log_every: int = 100):
    """Adam over batches of seqs_per_batch sequences (all their anchors), linear warm-up then cosine
    decay over the wall-clock budget (progress = elapsed / seconds); stops when the budget is spent."""
    cfg = dr.config
    window = min(cfg.sliding_window, max(data.lengths))    # every earlier position is in the window
    embed, lm_head = target.model.embed_tokens.weight.detach(), target.lm_head.weight.detach()
    dev = embed.device
    params = list(dr.parameters())
    opt = torch.optim.Adam(params, lr=lr_max)
    rng = np.random.default_rng(ttd.SHUFFLE_SEED)
    n_seq = len(data.lengths)
    order, cursor, step = rng.permutation(n_seq), 0, 0
    t0 = time.time()
    while True:
        frac = (time.time() - t0) / seconds
        if frac >= 1.0:
            break
        if cursor + seqs_per_batch > n_seq:
            order, cursor = rng.permutation(n_seq), 0
        seq_ids = order[cursor:cursor + seqs_per_batch]
        cursor += seqs_per_batch
        lr = lr_max * min(1.0, (step + 1) / WARMUP) * (LR_FLOOR + (1 - LR_FLOOR) * 0.5 * (1 + math.cos(math.pi * frac)))
        for group in opt.param_groups:
            group["lr"] = lr
        inputs, targets = data.batch(seq_ids, window)
        inputs, targets = [x.to(dev) for x in inputs], targets.to(dev)
        g, u = ttd.block_forward(dr, embed, lm_head, *inputs)
        loss, stats = ttd.dflash2_loss(dr, g, u, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, ttd.GRAD_CLIP)
        opt.step()
        if step % log_every == 0:
            v = validate(dr, target, val, window)
            print(f"  step {step:5d} lr {lr:.2e} loss {float(loss):.3f} (block CE {stats['base']:.3f}, "
                  f"selector {stats['selector']:.3f}); val: block CE {v['base']:.3f}, top-1 {ttd.fmt(v['top1_acc'])}, "
                  f"selector {ttd.fmt(v['selector_acc'])}, recall {v['recall']:.2f}  {time.time() - t0:.0f}s",
                  flush=True)
        step += 1
    v = validate(dr, target, val, window)
    print(f"  final step {step}: val block CE {v['base']:.3f}, top-1 {ttd.fmt(v['top1_acc'])}, "
          f"selector {ttd.fmt(v['selector_acc'])}, recall {v['recall']:.2f}  {time.time() - t0:.0f}s", flush=True)
    return step


@torch.no_grad()
def validate(dr, target, val, window: int) -> dict:
    dev = target.lm_head.weight.device
    inputs, targets = val.batch(range(len(val.lengths)), window)
    g, u = ttd.block_forward(dr, target.model.embed_tokens.weight, target.lm_head.weight,
                             *[x.to(dev) for x in inputs])
    return ttd.dflash2_loss(dr, g, u, targets.to(dev))[1]


_EVAL = {}


def _eval_one(i: int):
    """Speculative decoding of evaluation window i (and, for i < n_checked, plain greedy decoding)."""
    target, drafter, prompts, n_checked = _EVAL["args"]
    torch.set_num_threads(_EVAL.get("threads", 1))
    out, acc, ch, r = ttd.speculative_decode(target, drafter, prompts[i], GEN_TOKENS)
    eq = i < n_checked and out == ttd.greedy_decode(target, prompts[i], len(out))
    return acc, ch, r, int(eq)


def evaluate(target, drafter, prompts, n_checked: int, procs: int = 1) -> dict:
    """ttd.speculative_decode over the prompts (exact numerics; procs > 1: forked worker processes
    of one thread each, the same per-window computation); the first n_checked outputs are compared
    with plain greedy decoding."""
    _EVAL["args"] = (target, drafter, prompts, n_checked)
    if procs > 1:
        import multiprocessing
        _EVAL["threads"] = 1
        with multiprocessing.get_context("fork").Pool(procs) as pool:
            results = pool.map(_eval_one, range(len(prompts)), chunksize=1)
    else:
        _EVAL["threads"] = torch.get_num_threads()
        results = [_eval_one(i) for i in range(len(prompts))]
    accepted = [a for r in results for a in r[0]]
    changed, rows, equal = sum(r[1] for r in results), sum(r[2] for r in results), sum(r[3] for r in results)
    return ttd.acceptance_summary(accepted, changed, rows, equal, min(n_checked, len(prompts)),
                                  len(prompts), drafter.config.block_size)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", default=str(ROOT / "models" / "beam-nano"))
    ap.add_argument("--out", default=str(ROOT / "models" / "beam-nano-dflash2"))
    ap.add_argument("--train-windows", type=int, default=2560)
    ap.add_argument("--train-seconds", type=float, default=840.0)
    ap.add_argument("--batch-seqs", type=int, default=SEQS_PER_BATCH)
    ap.add_argument("--lr", type=float, default=LR)
    ap.add_argument("--eval-windows", type=int, default=20)
    ap.add_argument("--eval-checked", type=int, default=5, help="outputs compared with plain greedy decoding")
    ap.add_argument("--eval-procs", type=int, default=2, help="evaluation worker processes (one thread each)")
    ap.add_argument("--init", default="", help="drafter checkpoint to continue from (default: fresh init)")
    ap.add_argument("--cache", default="", help="torch file holding the generated data (written if absent)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-only", action="store_true", help="evaluate --out without training")
    ap.add_argument("--device", default="cpu", help="data generation and training (evaluation: CPU)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    t_start = time.time()
    out_dir = Path(args.out)
    if not args.eval_only:
        ftarget = ttd.fast_target(args.target).to(args.device)
        cfg = nano_drafter_config(load_config(args.target))
        if args.init:                                    # continue from a saved drafter (same config)
            dr = load_drafter(args.init, Numerics(exact=False)).train()
            cfg = dr.config
        else:
            dr = init_drafter(cfg, Numerics(exact=False)).train()
        cfg.check_target(ftarget.config)
        t0 = time.time()
        prompts, val_prompts = windows(0, args.train_windows), windows(VAL_FIRST, VAL_WINDOWS)
        if args.cache and Path(args.cache).exists():
            seqs, val_seqs = torch.load(args.cache)
        else:
            val_seqs = make_data(ftarget, val_prompts, cfg.target_layer_ids)
            seqs = make_data(ftarget, prompts, cfg.target_layer_ids)
            if args.cache:
                torch.save((seqs, val_seqs), args.cache)
        seqs, val_seqs = seqs[:args.train_windows], val_seqs
        data = ttd.Dataset(seqs, [PROMPT_LEN] * len(seqs), cfg.block_size)
        val = ttd.Dataset(val_seqs, [PROMPT_LEN] * len(val_seqs), cfg.block_size)
        print(f"data: {len(seqs)} windows x ({PROMPT_LEN} prompt + {GEN_TOKENS} generated), {len(data.tokens)} "
              f"tokens, {data.num_anchors} anchors; validation: windows {VAL_FIRST}..{VAL_FIRST + VAL_WINDOWS - 1} "
              f"({time.time() - t0:.0f}s)", flush=True)
        du = ttd.check_block_forward(dr, ttd.fast_target(args.target), data)   # CPU, before .to(device)
        print(f"block_forward vs DFlash2Drafter.context_kv + draft: max |du| {du:.2e}", flush=True)
        t0 = time.time()
        steps = train(dr.to(args.device), ftarget, data, val, args.train_seconds, args.batch_seqs, args.lr)
        t_train = time.time() - t0
        print(f"training: {steps} steps of {args.batch_seqs} sequences in {t_train:.0f}s "
              f"({steps * args.batch_seqs / len(seqs):.2f} epochs, {args.device})", flush=True)
        save_drafter(dr.cpu(), out_dir)
        print(f"wrote {out_dir}", flush=True)
    if args.eval_windows:
        target = load_model(args.target)                 # exact bf16 numerics
        drafter = load_drafter(out_dir)
        drafter.config.check_target(target.config)
        t0 = time.time()
        res = evaluate(target, drafter, windows(EVAL_FIRST, args.eval_windows), args.eval_checked,
                       args.eval_procs)
        print(f"evaluation ({time.time() - t0:.0f}s, exact bf16 numerics, {res['prompts']} held-out windows "
              f"{EVAL_FIRST}..{EVAL_FIRST + res['prompts'] - 1}, {res['blocks']} blocks): accepted drafts per block "
              f"histogram {res['accept_hist']}; selector walk != per-row argmax on {res['selector_changed_rows']:.1%} "
              f"of rows; output equals plain greedy decoding on {res['equal_to_greedy']} checked windows")
        print(f"mean accepted drafts per block {res['mean_accepted']:.3f} (max {drafter.config.block_size - 1}); "
              f"blocks with >= 1 accepted {res['frac_blocks_accepting']:.3f}; tokens per target forward "
              f"{res['tokens_per_block']:.3f}")
    print(f"total {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
