#!/usr/bin/python3
"""Trains a small DFlash2 drafter for the random-weight target models/tiny-beam and writes it to
models/tiny-beam-dflash2-trained (config.json + model.safetensors, bf16; the same config as
models/tiny-beam-dflash2), so that speculative decoding with it accepts drafts.

1. Data: N random prompts (prompt i: numpy PCG64 seed TRAIN_SEED + i, length 8..40, ids in
   [4, 512)), each continued greedily by the target for GEN_TOKENS tokens (eos ignored) with
   Numerics(exact=False) and the KV cache; the target's residual stream after the drafter's
   target_layer_ids is captured at every position (rounded to bf16, as the engine captures it).
2. Training (DFlash's objective, NeMo Automodel's DFlash2 recipe): anchors p in the generated part
   of each sequence (p >= prompt length - 1, so every target is a token the target generated);
   the block [x_p, mask x 3] at positions p..p+3 attends to the captured features of positions < p
   (within the drafter's window); row j's target is x_{p+j}. Loss = decay-weighted block CE over the
   full vocabulary of u (target LM head -> output_multiplier -> softcap) + the candidate-selector CE:
   the top-k candidates of u scored by the pair scores S against the ground-truth predecessor
   x_{p+j-1}, target = the true token's index, rows whose true token is not a candidate excluded.
   fp32 throughout (Numerics(exact=False): every bf16 rounding is the identity), Adam, cosine lr;
   initialised from models/tiny-beam-dflash2.
3. Saves the weights rounded to bf16 with the drafter config of models/tiny-beam-dflash2.
4. Evaluates the SAVED checkpoint with the exact (bf16) reference numerics of target and drafter on
   held-out prompts (seed EVAL_SEED + i): greedy speculative decoding as docs/dflash2.md and NeMo's
   spec_generate (drafts from the context features of the committed tokens, the target verifies
   the block [anchor, d1, d2, d3] greedily, accepted prefix + bonus) for GEN_TOKENS tokens each.

Result of the default run (torch 1.13 CPU, one thread; numbers printed at the end):
  RESULTS_PLACEHOLDER

Usage: train_tiny_drafter.py [--out models/tiny-beam-dflash2-trained] [--train-prompts N]
                             [--steps N] [--eval-prompts N] [--eval-only]"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beam_ref.checkpoint import load_model  # noqa: E402
from beam_ref.dflash2 import DFlash2Drafter, load_drafter, save_drafter  # noqa: E402
from beam_ref.numerics import Numerics, fp32, round_bf16_np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRAIN_SEED = 20261210      # training prompt i: numpy PCG64 seed TRAIN_SEED + i
EVAL_SEED = 20271210       # held-out prompt i: seed EVAL_SEED + i (far from the training seeds)
SHUFFLE_SEED = 20261211    # anchor order of the training batches
PROMPT_LEN = (8, 40)       # inclusive
TOKEN_RANGE = (4, 512)     # prompt ids in [4, 512)
GEN_TOKENS = 48

# Training (fp32, Adam). DECAY_GAMMA: DFlash's position weights exp(-(j - 1) / gamma) of block
# row j; the acceptance is a prefix, so the first drafts count most.
LR = 3e-3
LR_FLOOR = 0.05            # cosine decay to LR * LR_FLOOR
WARMUP = 100
BATCH = 256                # blocks per step
DECAY_GAMMA = 3.0
SELECTOR_LOSS_WEIGHT = 1.0
GRAD_CLIP = 1.0


def prompt(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(PROMPT_LEN[0], PROMPT_LEN[1] + 1))
    return rng.integers(TOKEN_RANGE[0], TOKEN_RANGE[1], n).astype(np.int64)


# ----------------------------------------------------------------------------------------------
# data


@torch.no_grad()
def generate(target, prompts, capture, gen_tokens: int = GEN_TOKENS, batch: int = 128):
    """Greedy continuation of every prompt by the target (KV cache, eos ignored), batched over
    prompts of equal length. -> list of (tokens [L + gen] int64, features [L + gen - 1, n*H]
    float32 with bf16 values: the captured layers at every position the target computed)."""
    out = [None] * len(prompts)
    by_len = {}
    for i, p in enumerate(prompts):
        by_len.setdefault(len(p), []).append(i)
    for L, idx in sorted(by_len.items()):
        for s in range(0, len(idx), batch):
            rows = idx[s:s + batch]
            B = len(rows)
            ids = torch.as_tensor(np.stack([prompts[i] for i in rows]))
            cache = target.new_cache()
            o = target(ids, torch.arange(L).expand(B, L), cache, capture_layers=capture)
            toks, feats = [ids], [o.captured_hidden]
            nxt = o.logits[:, -1].argmax(-1)
            for t in range(gen_tokens - 1):
                toks.append(nxt[:, None])
                o = target(nxt[:, None], torch.full((B, 1), L + t, dtype=torch.int64), cache,
                           capture_layers=capture)
                feats.append(o.captured_hidden)
                nxt = o.logits[:, -1].argmax(-1)
            toks.append(nxt[:, None])
            T = torch.cat(toks, 1).numpy()
            Fe = round_bf16_np(torch.cat(feats, 1).float().numpy())
            for j, i in enumerate(rows):
                out[i] = (T[j], Fe[j])
    return out


class Dataset:
    """All sequences laid end to end: tokens [N_tok], features [N_tok, n*H] (the last position of
    each sequence, never computed by the target, holds zeros), and the anchors: global index of
    every p in [prompt_len - 1, T - block_size] of every sequence, with its sequence start."""

    def __init__(self, seqs, prompt_lens, block_size: int):
        toks, feats, anchors, starts, pos = [], [], [], [], []
        off = 0
        for (t, f), L in zip(seqs, prompt_lens):
            T = len(t)
            toks.append(t)
            feats.append(np.concatenate([f, np.zeros((T - len(f), f.shape[1]), np.float32)]))
            ps = np.arange(L - 1, T - block_size + 1)
            anchors.append(off + ps)
            starts.append(np.full(len(ps), off))
            off += T
        self.tokens = torch.as_tensor(np.concatenate(toks))
        self.features = torch.as_tensor(np.concatenate(feats))
        self.anchors = np.concatenate(anchors)
        self.starts = np.concatenate(starts)

    def batch(self, sel: np.ndarray, window: int, block_size: int):
        """sel: indices into self.anchors -> the batched block inputs (see block_forward) and the
        targets [n, block_size] (x_p .. x_{p+B-1})."""
        g = torch.as_tensor(self.anchors[sel])
        start = torch.as_tensor(self.starts[sel])
        C = window - 1                                   # row 0 at p sees keys p - C .. p - 1
        back = torch.arange(C, 0, -1)                    # C .. 1
        ctx = g[:, None] - back[None]                    # global ids of p - C .. p - 1
        valid = ctx >= start[:, None]
        ctx_c = torch.where(valid, ctx, g[:, None])      # any in-range row; masked out anyway
        anchor_pos = g - start
        targets = self.tokens[g[:, None] + torch.arange(block_size)[None]]
        return (targets[:, 0], anchor_pos, self.features[ctx_c], anchor_pos[:, None] - back[None],
                valid), targets


# ----------------------------------------------------------------------------------------------
# batched, differentiable drafter forward (the math of DFlash2Drafter.context_kv + draft with
# Numerics(exact=False); checked against them by check_block_forward)


def _expand_groups(x: torch.Tensor, group: int, dim: int) -> torch.Tensor:
    """repeat_interleave(group, dim) as an expand (index i of the result reads i // group)."""
    shape = list(x.shape)
    x = x.unsqueeze(dim + 1)
    expanded = shape[:dim + 1] + [group] + shape[dim + 1:]
    shape[dim] *= group
    return x.expand(*expanded).reshape(shape)


def _conv(x, d, base, side: int, group_size: int):
    """DynamicConv.forward over [N, B, H] blocks; d [N, B, side, tap, groups], base [side, tap, H]."""
    k = base[side][None, None] + _expand_groups(d[:, :, side], group_size, 3)   # [N, B, tap, H]
    p0 = k[:, :, 0] * x
    p1 = k[:, 1:, 1] * x[:, :-1]
    return torch.cat((p0[:, :1], p0[:, 1:] + p1), dim=1)


def _rope(rotary, x, positions):
    cos, sin = rotary.cos_sin(positions)
    return rotary.apply(x, cos, sin)


def block_forward(dr: DFlash2Drafter, embed: torch.Tensor, lm_head: torch.Tensor, anchor_ids, anchor_pos,
                  ctx_feat, ctx_pos, ctx_valid):
    """N blocks at once. anchor_ids / anchor_pos [N]; context features [N, C, n*H] at positions
    ctx_pos [N, C] (ctx_valid [N, C] marks the present ones) -> (g [N, B-1, H], u [N, B-1, V])."""
    cfg = dr.config
    N, C = ctx_pos.shape
    B, Nq, Nkv, D = cfg.block_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    group = Nq // Nkv
    c = dr.hidden_norm(F.linear(ctx_feat, dr.fc.weight))                          # [N, C, H]
    ids = torch.full((N, B), cfg.mask_token_id, dtype=torch.int64)
    ids[:, 0] = anchor_ids
    pos = anchor_pos[:, None] + torch.arange(B)[None]                             # [N, B]
    visible = torch.ones(N, B, C + B, dtype=torch.bool)
    visible[:, :, :C] = ctx_valid[:, None, :]
    if cfg.sliding_window is not None:
        visible[:, :, :C] &= (pos[:, :, None] - ctx_pos[:, None, :]) < cfg.sliding_window
    scale = fp32(1.0 / math.sqrt(D))
    h = embed[ids]
    for layer in dr.layers:
        at = layer.self_attn
        kc = _rope(dr.rotary, at.k_norm(F.linear(c, at.k_proj.weight).view(N, C, Nkv, D)), ctx_pos)
        vc = F.linear(c, at.v_proj.weight).view(N, C, Nkv, D)
        a = layer.input_layernorm(h)
        d = F.linear(a, layer.attention_conv.kernel_projection.weight).view(N, B, 2, 2, -1)
        a = _conv(a, d, layer.attention_conv.base_kernel, 0, cfg.conv_group_size)
        q = _rope(dr.rotary, at.q_norm(F.linear(a, at.q_proj.weight).view(N, B, Nq, D)), pos)
        k = _rope(dr.rotary, at.k_norm(F.linear(a, at.k_proj.weight).view(N, B, Nkv, D)), pos)
        v = F.linear(a, at.v_proj.weight).view(N, B, Nkv, D)
        keys = _expand_groups(torch.cat((kc, k), 1), group, 2)                     # [N, S, Nq, D]
        values = _expand_groups(torch.cat((vc, v), 1), group, 2)
        scores = torch.einsum("nqhd,nshd->nhqs", q, keys) * scale
        scores = scores.masked_fill(~visible[:, None], float("-inf"))
        o = torch.einsum("nhqs,nshd->nqhd", torch.softmax(scores, -1), values).reshape(N, B, Nq * D)
        o = _conv(F.linear(o, at.o_proj.weight), d, layer.attention_conv.base_kernel, 1, cfg.conv_group_size)
        h = h + o
        a = layer.post_attention_layernorm(h)
        d = F.linear(a, layer.mlp_conv.kernel_projection.weight).view(N, B, 2, 2, -1)
        m = layer.mlp(_conv(a, d, layer.mlp_conv.base_kernel, 0, cfg.conv_group_size))
        h = h + _conv(m, d, layer.mlp_conv.base_kernel, 1, cfg.conv_group_size)
    g = dr.norm(h[:, 1:])
    u = F.linear(g, lm_head) * fp32(cfg.output_multiplier)
    cap = cfg.final_logit_softcapping
    if cap:
        u = cap * torch.tanh(u / cap)
    return g, u


def pair_scores(dr: DFlash2Drafter, g, unary, cand, prev):
    """NeMo CandidateSelector.pair_scores: S = U + <P[prev] * (g Wh^T), S_cb[cand]>.
    g [..., H], unary / cand [..., K], prev [...] -> [..., K]."""
    sel = dr.candidate_selector
    gate = sel.predecessor_codebook[prev] * F.linear(g, sel.hidden_projection.weight)
    return unary + torch.einsum("...r,...kr->...k", gate, sel.successor_codebook[cand])


def dflash2_loss(dr, g, u, targets):
    """targets [N, B] (x_p .. x_{p+B-1}) -> (loss, stats). Block CE (decay-weighted) + selector CE
    over the top-k candidates scored against the ground-truth predecessor (NeMo's
    DFlash2TrainerModule; rows whose true token is not a candidate carry no selector loss)."""
    N, R, V = u.shape
    truth, prev = targets[:, 1:], targets[:, :-1]
    w = torch.exp(-torch.arange(R, dtype=torch.float32) / DECAY_GAMMA)[None].expand(N, R)
    ce = F.cross_entropy(u.reshape(-1, V), truth.reshape(-1), reduction="none").view(N, R)
    base = (ce * w).sum() / w.sum()
    unary, cand = torch.topk(u, dr.config.selector_top_k, dim=-1)
    S = pair_scores(dr, g, unary, cand, prev)
    hit = cand == truth[..., None]
    has = hit.any(-1)
    sel_ce = F.cross_entropy(S.reshape(-1, S.shape[-1]), hit.to(torch.int64).argmax(-1).reshape(-1),
                             reduction="none").view(N, R)
    ws = w * has
    selector = (sel_ce * ws).sum() / ws.sum().clamp_min(1e-6)
    with torch.no_grad():
        top1 = u.argmax(-1) == truth
        picked = cand.gather(-1, S.argmax(-1, keepdim=True))[..., 0] == truth
    stats = {"base": float(base), "selector": float(selector), "top1_acc": top1.float().mean(0).tolist(),
             "recall": has.float().mean().item(), "selector_acc": picked.float().mean(0).tolist()}
    return base + SELECTOR_LOSS_WEIGHT * selector, stats


@torch.no_grad()
def check_block_forward(dr, target, data: Dataset, n: int = 6) -> float:
    """Max |u| difference between block_forward and DFlash2Drafter.context_kv + draft (same
    fp32 numerics) over n anchors; they must agree to fp32 rounding."""
    cfg = dr.config
    sel = np.linspace(0, len(data.anchors) - 1, n).astype(np.int64)
    (aid, apos, cf, cp, cv), _ = data.batch(sel, cfg.sliding_window, cfg.block_size)
    _, u = block_forward(dr, target.model.embed_tokens.weight, target.lm_head.weight, aid, apos, cf, cp, cv)
    worst = 0.0
    for i in range(n):
        keep = cv[i]
        ctx = dr.context_kv(cf[i][keep], cp[i][keep])
        ref = dr.draft(target.model.embed_tokens.weight, target.lm_head.weight, int(aid[i]), int(apos[i]), ctx,
                       cp[i][keep])["u"]
        worst = max(worst, float((ref - u[i]).abs().max()))
    return worst


def train(dr, target, data: Dataset, steps: int, log_every: int = 100):
    cfg = dr.config
    embed, lm_head = target.model.embed_tokens.weight.detach(), target.lm_head.weight.detach()
    params = [p for p in dr.parameters()]
    opt = torch.optim.Adam(params, lr=LR)
    rng = np.random.default_rng(SHUFFLE_SEED)
    order, cursor = rng.permutation(len(data.anchors)), 0
    t0 = time.time()
    for step in range(steps):
        if cursor + BATCH > len(order):
            order, cursor = rng.permutation(len(data.anchors)), 0
        sel = order[cursor:cursor + BATCH]
        cursor += BATCH
        lr = LR * (min(1.0, (step + 1) / WARMUP) *
                   (LR_FLOOR + (1 - LR_FLOOR) * 0.5 * (1 + math.cos(math.pi * step / steps))))
        for group in opt.param_groups:
            group["lr"] = lr
        inputs, targets = data.batch(sel, cfg.sliding_window, cfg.block_size)
        g, u = block_forward(dr, embed, lm_head, *inputs)
        loss, stats = dflash2_loss(dr, g, u, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
        opt.step()
        if step % log_every == 0 or step == steps - 1:
            print(f"  step {step:5d} lr {lr:.2e} loss {float(loss):.3f} (block CE {stats['base']:.3f}, "
                  f"selector {stats['selector']:.3f}) top1 acc {fmt(stats['top1_acc'])} selector acc "
                  f"{fmt(stats['selector_acc'])} recall {stats['recall']:.2f}  {time.time() - t0:.0f}s",
                  flush=True)


def fmt(xs):
    return "[" + " ".join(f"{x:.2f}" for x in xs) + "]"


# ----------------------------------------------------------------------------------------------
# evaluation: greedy speculative decoding with the exact (bf16) reference numerics


def crop_cache(cache, n: int) -> None:
    """Keeps the first n tokens of every layer's KV (the committed ones)."""
    for layer in cache.layers:
        layer.k, layer.v, layer.positions = layer.k[:, :n], layer.v[:, :n], layer.positions[:, :n]


@torch.no_grad()
def speculative_decode(target, drafter, tokens: np.ndarray, gen_tokens: int):
    """Greedy speculative decoding of one prompt (docs/dflash2.md; NeMo spec_generate): the
    drafter drafts B-1 tokens from the context features of the committed tokens before the
    anchor; the target verifies [anchor, drafts] in one forward; the longest prefix of drafts equal
    to the target's argmax is accepted, plus the bonus. -> (generated tokens, accepted per block,
    walk != per-row argmax count, rows)."""
    cfg = drafter.config
    B, W = cfg.block_size, cfg.sliding_window
    embed, lm_head = target.model.embed_tokens.weight, target.lm_head.weight
    L = len(tokens)
    cache = target.new_cache()
    o = target(torch.as_tensor(tokens)[None], torch.arange(L)[None], cache, capture_layers=cfg.target_layer_ids)
    feats = [o.captured_hidden[0]]
    anchor, p = int(o.logits[0, -1].argmax()), L
    out, accepted, changed, rows = [anchor], [], 0, 0
    while len(out) < gen_tokens:
        Fall = torch.cat(feats)                              # features of positions 0 .. p-1
        lo = max(0, p - W)
        pos = torch.arange(lo, p)
        d = drafter.draft(embed, lm_head, anchor, p, drafter.context_kv(Fall[lo:p], pos), pos)
        drafts = d["drafts"]
        changed += int((drafts != d["top1"]).sum())
        rows += len(drafts)
        block = torch.cat((torch.tensor([anchor]), drafts))[None]
        o = target(block, torch.arange(p, p + B)[None], cache, capture_layers=cfg.target_layer_ids)
        post = o.logits[0].argmax(-1)
        acc = 0
        while acc < B - 1 and int(drafts[acc]) == int(post[acc]):
            acc += 1
        accepted.append(acc)
        out += drafts[:acc].tolist() + [int(post[acc])]
        feats.append(o.captured_hidden[0, :acc + 1])
        crop_cache(cache, p + acc + 1)
        anchor, p = int(post[acc]), p + acc + 1
    return out, accepted, changed, rows


def evaluate(target, drafter, n_prompts: int, gen_tokens: int = GEN_TOKENS) -> dict:
    accepted, changed, rows = [], 0, 0
    for i in range(n_prompts):
        _, acc, ch, r = speculative_decode(target, drafter, prompt(EVAL_SEED + i), gen_tokens)
        accepted += acc
        changed += ch
        rows += r
    a = np.asarray(accepted)
    B = drafter.config.block_size
    return {"prompts": n_prompts, "blocks": len(a), "mean_accepted": float(a.mean()),
            "frac_blocks_accepting": float((a >= 1).mean()),
            "accept_hist": np.bincount(a, minlength=B).tolist(),
            "tokens_per_target_forward": float(a.mean() + 1),
            "selector_changed_rows": changed / max(rows, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "models" / "tiny-beam-dflash2-trained"))
    ap.add_argument("--target", default=str(ROOT / "models" / "tiny-beam"))
    ap.add_argument("--init", default=str(ROOT / "models" / "tiny-beam-dflash2"),
                    help="drafter checkpoint to start from (its config is the trained drafter's)")
    ap.add_argument("--train-prompts", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--eval-prompts", type=int, default=100)
    ap.add_argument("--eval-only", action="store_true", help="evaluate --out without training")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    t_start = time.time()
    out_dir = Path(args.out)
    if not args.eval_only:
        fast_target = load_model(args.target, Numerics(exact=False))
        dr = load_drafter(args.init, Numerics(exact=False)).train()
        dr.config.check_target(fast_target.config)
        for p in fast_target.parameters():
            p.requires_grad_(False)
        t0 = time.time()
        prompts = [prompt(TRAIN_SEED + i) for i in range(args.train_prompts)]
        seqs = generate(fast_target, prompts, dr.config.target_layer_ids)
        data = Dataset(seqs, [len(p) for p in prompts], dr.config.block_size)
        print(f"data: {len(prompts)} prompts, {len(data.tokens)} tokens, {len(data.anchors)} anchors "
              f"({time.time() - t0:.0f}s)", flush=True)
        print(f"block_forward vs DFlash2Drafter.draft: max |du| {check_block_forward(dr, fast_target, data):.2e}")
        t0 = time.time()
        train(dr, fast_target, data, args.steps)
        t_train = time.time() - t0
        print(f"training: {args.steps} steps of {BATCH} blocks in {t_train:.0f}s")
        save_drafter(dr, out_dir)
        print(f"wrote {out_dir}")
    target = load_model(args.target)                 # exact bf16 numerics
    drafter = load_drafter(out_dir)
    drafter.config.check_target(target.config)
    t0 = time.time()
    res = evaluate(target, drafter, args.eval_prompts)
    print(f"evaluation ({time.time() - t0:.0f}s, exact bf16 numerics, {res['prompts']} held-out prompts, "
          f"{res['blocks']} blocks): accepted drafts per block histogram {res['accept_hist']}; "
          f"selector walk != per-row argmax on {res['selector_changed_rows']:.1%} of rows")
    print(f"mean accepted drafts per block {res['mean_accepted']:.3f}; blocks with >= 1 accepted "
          f"{res['frac_blocks_accepting']:.3f}; total {time.time() - t_start:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
