#!/usr/bin/env python3
"""Evaluates an exported beam-nano on held-out data with the reference:
* validation loss / perplexity per token and bits per byte, in the EXACT inference numerics
  (bf16 rounding at every BEAM.md point) on evenly spaced validation windows, and in the
  training numerics (no rounding, bf16 autocast on CUDA) on all validation windows;
* expert load balance: tokens per expert per MoE layer over the exact windows (max/mean, min/mean);
* greedy continuations (exact numerics, KV-cache decode) of held-out top-level function headers
  of the validation files, with per-token logit margins (check_cpu.py picks the fixture from them);
* tokenizer cross-checks for the C++ tokenizer and chat template (ids of test strings; with
  transformers, AutoTokenizer's ids and apply_chat_template renderings).
Usage: evaluate.py --model DIR --data DIR --corpus DIR --out results.json [--deadline UNIX_S] [--toy]"""
from __future__ import annotations

import argparse
import contextlib
import json
import re
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
from beam_ref.numerics import Numerics  # noqa: E402
from byte_level import TokenDecoder  # noqa: E402
from greedy import greedy  # noqa: E402
from nano_config import SEQ_LEN  # noqa: E402
from tokenizer_spec import SPECIAL_TOKENS  # noqa: E402

HEADER = re.compile(r"^def [A-Za-z_][A-Za-z0-9_]*\(.*\)( -> [^:]+)?:$")
TOKENIZER_PROBES = [
    "def main(argv=None):\n    return 0\n",
    "x = {'a': 1, \"b\": [2.5e-3, 0x1F]}  # naïve café ☕\r\n",
    "class Foo(Bar):\n\tpass\n\n\n",
    "    if n >= 1000000:\n        raise ValueError(f'{n!r} too big')\n",
    "<|im_start|>user\nhi<|im_end|>\n<think>\nok\n</think>\n<tool_call>\n{}\n</tool_call>",
    "Ünïcödé\u00a0spaces\u3000and 日本語 text 123456",
]
CHAT_PROBES = [
    {"messages": [{"role": "system", "content": "You write Python."},
                  {"role": "user", "content": "Reverse a list."}], "add_generation_prompt": True},
    {"messages": [{"role": "user", "content": "What is 2+2?"},
                  {"role": "assistant", "content": "4", "reasoning_content": "Simple sum."},
                  {"role": "user", "content": "Thanks"}], "add_generation_prompt": True,
     "enable_thinking": False},
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"type": "function", "function": {"name": "get_weather",
                                                                    "arguments": {"city": "Paris"}}}]},
                  {"role": "tool", "content": "{\"temp\": 21}"}],
     "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                 "parameters": {"type": "object", "properties": {
                                                     "city": {"type": "string"}}, "required": ["city"]}}}],
     "add_generation_prompt": True},
]


def windows(tokens: np.ndarray, seq_len: int, count: int) -> np.ndarray:
    """[n, seq_len+1] evenly spaced non-overlapping windows (all of them if count <= 0)."""
    total = (tokens.size - 1) // seq_len
    picks = np.arange(total) if count <= 0 or count >= total else \
        np.linspace(0, total - 1, count).round().astype(np.int64)
    idx = picks[:, None] * seq_len + np.arange(seq_len + 1)[None]
    return tokens[idx].astype(np.int64)


@torch.no_grad()
def evaluate_windows(model, wins: np.ndarray, batch: int, byte_len: np.ndarray, device: str, use_autocast: bool,
                     deadline: float = 0.0):
    """Loss, perplexity and bits per byte over the windows (stops early at the deadline, counting
    only what was evaluated) and the tokens per expert [num_sparse_layers, E]."""
    nll, count, nbytes = 0.0, 0, 0
    counts = None
    for s in range(0, len(wins), batch):
        if deadline and count and time.time() > deadline:
            break
        b = torch.from_numpy(wins[s:s + batch]).to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16) if use_autocast \
                else contextlib.nullcontext():
            out = model(b[:, :-1])
        logits = out.logits.float()
        nll += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b[:, 1:].reshape(-1), reduction="sum").item()
        count += b[:, 1:].numel()
        nbytes += int(byte_len[wins[s:s + batch, 1:]].sum())
        r = out.routed_experts
        E = model.config.n_routed_experts
        c = torch.stack([torch.bincount(r[i].reshape(-1), minlength=E) for i in range(r.shape[0])]).cpu()
        counts = c if counts is None else counts + c
    loss = nll / count
    return {"tokens": count, "bytes": nbytes, "loss": loss, "perplexity": float(np.exp(loss)),
            "bits_per_byte": nll / np.log(2) / max(nbytes, 1)}, counts


def balance(counts: torch.Tensor, sparse_layers) -> list:
    c = counts.double()
    mean = c.mean(dim=1)
    return [{"layer": int(L), "max_over_mean": round(float(c[i].max() / mean[i]), 3),
             "min_over_mean": round(float(c[i].min() / mean[i]), 3),
             "tokens_per_expert": [int(x) for x in c[i].tolist()]} for i, L in enumerate(sparse_layers)]


def prompt_candidates(corpus: Path, limit: int):
    """Top-level one-line function headers of validation files (stdlib files first), the first
    new one of each file."""
    stdlib, other, seen = [], [], set()
    with open(corpus / "val.jsonl") as f:
        for line in f:
            rec = json.loads(line)
            for text_line in rec["text"].splitlines():
                if HEADER.match(text_line) and 20 <= len(text_line) <= 80 and text_line not in seen:
                    seen.add(text_line)
                    (stdlib if rec["key"].startswith("stdlib/") else other).append(
                        {"source": rec["key"], "prompt": text_line + "\n"})
                    break
    return (stdlib + other)[:limit]


def make_encoder(model_dir: Path, toy: bool):
    if toy:
        from toy_tokenizer import toy_encode
        return toy_encode
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    return lambda text: tok.encode(text, add_special_tokens=False).ids


def transformers_check(model_dir: Path, encode, prompts) -> dict:
    """AutoTokenizer loads the folder, encodes like `tokenizers`, renders the chat template."""
    try:
        from transformers import AutoTokenizer, PreTrainedTokenizerFast
        try:
            tok = AutoTokenizer.from_pretrained(str(model_dir))
        except Exception:  # e.g. the unknown model_type "beam" in config.json
            tok = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
        texts = TOKENIZER_PROBES + prompts
        same = all(tok.encode(t, add_special_tokens=False) == encode(t) for t in texts)
        chats = []
        for probe in CHAT_PROBES:
            kwargs = {k: v for k, v in probe.items() if k != "messages"}
            text = tok.apply_chat_template(probe["messages"], tokenize=False, **kwargs)
            chats.append({**probe, "rendered": text, "ids": encode(text)})
        return {"ok": True, "ids_equal_tokenizers": same, "eos_token": tok.eos_token,
                "pad_token": tok.pad_token, "chat": chats}
    except Exception as e:  # recorded, not fatal: the check is informative
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seq-len", type=int, default=SEQ_LEN)
    ap.add_argument("--exact-windows", type=int, default=512)
    ap.add_argument("--candidates", type=int, default=24)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--deadline", type=float, default=0.0, help="unix time: stop starting greedy runs")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--toy", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    torch.backends.cuda.matmul.allow_tf32 = False  # exact numerics: true fp32 accumulation
    torch.backends.cudnn.allow_tf32 = False
    model_dir, dev = Path(args.model), args.device
    decoder = TokenDecoder(model_dir / "tokenizer.json")
    exact = load_model(model_dir, Numerics(exact=True), device=dev)
    V = exact.config.vocab_size
    byte_len = np.array([len(decoder.pieces.get(i, b"")) if i >= len(SPECIAL_TOKENS) else 0
                         for i in range(V)], dtype=np.int64)
    val = np.load(Path(args.data) / "val.npy")
    sparse_layers = exact.config.sparse_layer_ids
    results = {"model": str(model_dir), "device": dev, "torch": torch.__version__, "seq_len": args.seq_len}
    wins = windows(val, args.seq_len, args.exact_windows)
    stage_end = args.deadline - 40 if args.deadline else 0.0  # leave time for greedy and the rest
    results["exact"], counts = evaluate_windows(exact, wins, 8, byte_len, dev, False, stage_end)
    results["load_balance_exact"] = balance(counts, sparse_layers)
    print(f"exact: {json.dumps(results['exact'])} ({time.time() - t0:.0f}s)", flush=True)
    fast = load_model(model_dir, Numerics(exact=False), device=dev)
    cuda = dev.startswith("cuda")
    done = results["exact"]["tokens"] // args.seq_len
    results["train_numerics_same_windows"], _ = evaluate_windows(fast, wins[:done], 32, byte_len, dev, cuda)
    results["train_numerics_all_val"], counts_all = evaluate_windows(
        fast, windows(val, args.seq_len, 0), 32, byte_len, dev, cuda, stage_end + 15 if stage_end else 0.0)
    results["load_balance_all_val_train_numerics"] = balance(counts_all, sparse_layers)
    print(f"all val (training numerics): {json.dumps(results['train_numerics_all_val'])} "
          f"({time.time() - t0:.0f}s)", flush=True)
    del fast
    encode = make_encoder(model_dir, args.toy)
    stop = set(json.loads((model_dir / "generation_config.json").read_text())["eos_token_id"])
    cands = []
    for c in prompt_candidates(Path(args.corpus), args.candidates):
        if args.deadline and time.time() > args.deadline:
            break
        ids = encode(c["prompt"])
        g = greedy(exact, ids, args.max_new, stop)
        cands.append({**c, "prompt_ids": ids, "generated_ids": g.generated,
                      "generated_text": decoder.decode(g.generated),
                      "min_logit_margin": min(g.logit_margins), "logit_margins": g.logit_margins,
                      "routing_margin_min": g.routing_margin_min})
    results["greedy"] = cands
    print(f"greedy: {len(cands)} prompts ({time.time() - t0:.0f}s)", flush=True)
    results["tokenizer_probes"] = [{"text": t, "ids": encode(t)} for t in TOKENIZER_PROBES]
    if not args.toy:
        results["transformers"] = transformers_check(model_dir, encode, [c["prompt"] for c in cands])
    Path(args.out).write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    print(f"evaluation written to {args.out} ({time.time() - t0:.0f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
