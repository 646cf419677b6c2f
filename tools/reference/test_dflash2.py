#!/usr/bin/python3
"""Self-check of the DFlash2 drafter reference (docs/dflash2.md) and of models/tiny-beam-dflash2:
the checkpoint and the goldens on disk equal what make_tiny_drafter.py computes now (bitwise),
and the contract's invariants hold (window, skipped keys, identity selector, conv at block
position 0, target capture). Runs from the repository root in a few seconds (CPU, one thread).

Usage: test_dflash2.py [--drafter models/tiny-beam-dflash2] [--target models/tiny-beam]"""
from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import pinned_blas  # noqa: F401  (before numpy and torch: the goldens' order of sums)
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_drafter as mtd  # noqa: E402
from beam_ref.dflash2 import (DFlash2Config, DynamicConv, canonical_name, load_drafter,  # noqa: E402
                              load_drafter_config)
from beam_ref.numerics import Numerics  # noqa: E402

GOLDEN_BYTES_LIMIT = 1 << 20
FAILURES = []


def check(cond: bool, what: str) -> None:
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILURES.append(what)


def same(a, b) -> bool:
    """Bitwise equality of two arrays/tensors (shape, dtype class and every bit)."""
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def draft(target, drafter, ctx, pos, anchor_id, anchor_pos):
    return drafter.draft(target.model.embed_tokens.weight, target.lm_head.weight, anchor_id, anchor_pos,
                         ctx, pos)


def outputs_equal(a, b) -> bool:
    return all(same(a[k].numpy(), b[k].numpy()) for k in ("hidden", "g", "u", "candidates", "S", "drafts"))


def test_checkpoint(drafter_dir: Path, target):
    built = mtd.build_tiny_drafter()
    loaded = load_drafter(drafter_dir)
    sb, sl = built.state_dict(), loaded.state_dict()
    check(list(sb) == list(sl) and all(same(sb[k].numpy(), sl[k].numpy()) for k in sb),
          "checkpoint on disk equals build_tiny_drafter() bitwise")
    cfg = load_drafter_config(drafter_dir)
    check(DFlash2Config.from_dict(cfg.to_dict()) == cfg, "config round trip (from_dict(to_dict()))")
    check(cfg == mtd.tiny_drafter_config(), "config.json equals tiny_drafter_config()")
    cfg.check_target(target.config)
    cb = "candidate_selector.successor_codebook"
    check(canonical_name("model.layers.0.mlp_conv.base_kernel") == "layers.0.mlp_conv.base_kernel" and
          canonical_name(cb + ".weight") == cb,
          "checkpoint names: model. prefix and codebook .weight suffix dropped")
    for edit, word in ((lambda d: d["dflash_config"].update(conv_kernel_size=3), "conv_kernel_size"),
                       (lambda d: d["dflash_config"].update(conv_group_size=24), "conv_group_size"),
                       (lambda d: d["dflash_config"].pop("block_size"), "block_size"),
                       (lambda d: d.update(rope_theta=5.0), "rotary")):
        d = copy.deepcopy(cfg.to_dict())
        edit(d)
        try:
            DFlash2Config.from_dict(d)
            check(False, f"config validation rejects a bad {word}")
        except ValueError as e:
            check(word in str(e), f"config validation rejects a bad {word}: {e}")
    return built


def test_goldens(drafter_dir: Path, target, drafter):
    gdir = drafter_dir / mtd.GOLDEN_DIR
    manifest = json.loads((gdir / mtd.MANIFEST).read_text())
    size = sum(p.stat().st_size for p in gdir.iterdir())
    check(size < GOLDEN_BYTES_LIMIT, f"golden directory {size} bytes < 1 MB")
    cases = mtd.golden_cases(target, drafter, manifest["prompt_index"])
    check([e["name"] for e, _ in cases] == [c["name"] for c in manifest["cases"]], "manifest lists the cases")
    for (entry, arrays), disk in zip(cases, manifest["cases"]):
        check(entry == disk, f"{entry['name']}: manifest entry regenerates")
        bad = [k for k, a in arrays.items() if not same(a, np.load(gdir / disk["files"][k]))]
        check(not bad, f"{entry['name']}: {len(arrays)} golden files regenerate bitwise" +
              (f" (differ: {bad})" if bad else ""))
    by_name = {e["name"]: a for e, a in cases}
    check(same(by_name["gaps"]["u"], by_name["ctx20"]["u"]) and
          same(by_name["gaps"]["drafts"], by_name["ctx20"]["drafts"]),
          "gaps (positions 0..7 absent, all outside the window) drafts as ctx20")
    check(any(e["selector_changed_rows"] for e, _ in cases), "the selector changes a choice in some golden case")
    return by_name


def test_window(target, drafter, golden):
    """Block rows depend on the context only through the keys in the window: a key at position
    k is visible from row j iff p + j - k < W, so keys with p - k >= W are invisible to every row."""
    cfg = drafter.config
    W, p = cfg.sliding_window, mtd.PROMPT_LEN
    F = torch.from_numpy(golden["ctx20"]["features"])
    pos = torch.arange(p)
    anchor = int(golden["ctx20"]["block_ids"][0])
    ctx = drafter.context_kv(F, pos)
    ref = draft(target, drafter, ctx, pos, anchor, p)
    gen = torch.Generator().manual_seed(7)

    def perturbed(k_positions):
        sel = torch.zeros(p, dtype=torch.bool)
        sel[k_positions] = True
        out = []
        for k, v in ctx:
            k, v = k.clone(), v.clone()
            k[sel] = torch.randn(k[sel].shape, generator=gen).bfloat16().float()
            v[sel] = torch.randn(v[sel].shape, generator=gen).bfloat16().float()
            out.append((k, v))
        return draft(target, drafter, out, pos, anchor, p)

    outside = list(range(0, p - W + 1))   # p - k >= W
    check(outputs_equal(perturbed(outside), ref), f"keys at positions 0..{p - W} (outside the window) are ignored")
    edge = perturbed([p - W + 1])         # visible from row 0 only
    check(not same(edge["hidden"].numpy(), ref["hidden"].numpy()),
          f"the key at position {p - W + 1} (row 0's oldest) is read")
    newest = perturbed([p - 1])
    check(not same(newest["g"].numpy(), ref["g"].numpy()), f"the key at position {p - 1} changes rows 1..B-1")
    # removing the invisible keys instead of perturbing them: same drafts, u equal to fp32 noise
    keep = list(range(p - W + 1, p))
    cut = draft(target, drafter, [(k[keep], v[keep]) for k, v in ctx], pos[keep], anchor, p)
    check(same(cut["drafts"].numpy(), ref["drafts"].numpy()) and
          float((cut["u"] - ref["u"]).abs().max()) <= 1e-4 * float(ref["u"].abs().max()),
          "dropping the keys outside the window leaves the block unchanged")


def test_identity_selector(target, drafter, golden):
    m = copy.deepcopy(drafter)
    with torch.no_grad():
        m.candidate_selector.successor_codebook.zero_()
    for name in ("ctx20", "prefix16", "ctx3"):
        a = golden[name]
        pos = torch.from_numpy(a["positions"]).long()
        ctx = m.context_kv(torch.from_numpy(a["features"]), pos)
        d = draft(target, m, ctx, pos, int(a["block_ids"][0]), int(a["block_positions"][0]))
        S_unary = torch.gather(d["u"], 1, d["candidates"])
        check(same(d["drafts"].numpy(), d["top1"].numpy()) and same(d["S"].numpy(), S_unary.numpy()),
              f"{name}: a zero successor codebook walks to the per-row top-1 (S = u)")


def test_top_k_ties(drafter):
    u = torch.tensor([[1.0, 3.0, 2.0, 3.0, 2.0, 3.0, 0.5]])
    cand = drafter.candidate_selector.candidates(u)   # selector_top_k = 4
    check(cand[0].tolist() == [1, 3, 5, 2], "top-k: equal u in ascending token id order")


def test_conv():
    gen = torch.Generator().manual_seed(11)
    H, gs, B = 64, 16, 4
    conv = DynamicConv(H, gs, Numerics())
    with torch.no_grad():
        conv.base_kernel.copy_(torch.randn(2, 2, H, generator=gen).bfloat16().float())
    x = torch.randn(B, H, generator=gen).bfloat16().float()
    d = torch.randn(B, 2, 2, H // gs, generator=gen).bfloat16().float()
    for side in (0, 1):
        y = conv(x, d, side)
        k0 = conv.base_kernel[side, 0] + d[0, side, 0].repeat_interleave(gs)
        check(same(y[0].detach().numpy(), (k0 * x[0]).bfloat16().float().detach().numpy()),
              f"conv side {side}: block position 0 is bf16(k0 * x_0)")
        d2 = d.clone()
        d2[:, side, 1] += 3.0
        c2 = copy.deepcopy(conv)
        with torch.no_grad():
            c2.base_kernel[side, 1] += 5.0
        y2 = c2(x, d2, side)
        check(same(y2[0].detach().numpy(), y[0].detach().numpy()) and
              not same(y2[1:].detach().numpy(), y[1:].detach().numpy()),
              f"conv side {side}: the tap-1 term is absent at block position 0 only")
        x3 = x.clone()
        x3[2] += 1.0
        y3 = conv(x3, d, side)
        check(same(y3[:2].detach().numpy(), y[:2].detach().numpy()) and
              not same(y3[2:].detach().numpy(), y[2:].detach().numpy()),
              f"conv side {side}: row t reads only x_t and x_(t-1)")


def test_capture(target, golden):
    tokens = torch.from_numpy(golden["ctx20"]["tokens"]).long()[None]
    with torch.no_grad():
        plain = target(tokens)
        cap = target(tokens, capture_layers=mtd.CAPTURE)
        one = target(tokens, capture_layers=[4])
    H = target.config.hidden_size
    check(plain.captured_hidden is None and same(plain.logits.numpy(), cap.logits.numpy()),
          "capture_layers leaves the logits unchanged (and is off by default)")
    check(tuple(cap.captured_hidden.shape) == (1, mtd.PROMPT_LEN, 3 * H) and
          same(cap.captured_hidden[..., 2 * H:].numpy(), one.captured_hidden.numpy()),
          "captured_hidden is [B, T, n*H], concatenated in the given order")
    ch = cap.captured_hidden
    check(same(ch.numpy(), ch.bfloat16().float().numpy()), "captured values are bf16")
    check(same(ch[0].numpy(), golden["ctx20"]["features"]), "ctx20 features = the capture of layers [1, 3, 4]")
    try:
        target(tokens, capture_layers=[6])
        check(False, "capture_layers rejects a layer id out of range")
    except ValueError:
        check(True, "capture_layers rejects a layer id out of range")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drafter", default=str(mtd.ROOT / "models" / "tiny-beam-dflash2"))
    ap.add_argument("--target", default=str(mtd.ROOT / "models" / "tiny-beam"))
    args = ap.parse_args()
    torch.set_num_threads(1)
    target = mtd.load_target(args.target)
    drafter = test_checkpoint(Path(args.drafter), target)
    golden = test_goldens(Path(args.drafter), target, drafter)
    test_window(target, drafter, golden)
    test_identity_selector(target, drafter, golden)
    test_top_k_ties(drafter)
    test_conv()
    test_capture(target, golden)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all DFlash2 checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
