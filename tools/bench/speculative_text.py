#!/usr/bin/python3
"""Speculative decoding on real text: sends token-id prompts one at a time (batch 1, greedy) to a
running beamserve and reports the decode rate and the drafts accepted (from /metrics).
Prompts: rows of an .npy [N, L] int32 (e.g. .nano_data/dflash2_prompts.npy from
tools/reference/nano/dflash2_prompts.py), the first --prompt-len tokens of each.
Usage: speculative_text.py --url http://127.0.0.1:PORT --model NAME --prompts F.npy
                           [--rows 5900:5932] [--prompt-len 64] [--max-tokens 128]"""
from __future__ import annotations

import argparse
import json
import re
import time
import urllib.request

import numpy as np


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.loads(r.read())


def counters(url: str) -> dict:
    text = urllib.request.urlopen(url + "/metrics").read().decode()
    out = {}
    for key in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        m = re.search(rf"^beamserve_spec_decode_{key}_total (\S+)", text, re.M)
        out[key] = float(m.group(1)) if m else 0.0
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--rows", default="5900:5932")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=128)
    a = ap.parse_args()
    lo, hi = (int(x) for x in a.rows.split(":"))
    prompts = np.load(a.prompts)[lo:hi, :a.prompt_len]
    before = counters(a.url)
    tokens, seconds = 0, 0.0
    for p in prompts:
        start = time.perf_counter()
        r = post(a.url + "/v1/completions", {"model": a.model, "prompt": [int(x) for x in p],
                                             "max_tokens": a.max_tokens, "temperature": 0,
                                             "ignore_eos": True})
        seconds += time.perf_counter() - start
        tokens += r["usage"]["completion_tokens"]
    after = counters(a.url)
    d = {k: after[k] - before[k] for k in after}
    result = {"requests": len(prompts), "completion_tokens": tokens, "seconds": round(seconds, 3),
              "tokens_per_s": round(tokens / seconds, 1), "verifications": d["num_drafts"],
              "draft_tokens": d["num_draft_tokens"], "accepted_tokens": d["num_accepted_tokens"],
              "accepted_per_verification": round(d["num_accepted_tokens"] / d["num_drafts"], 3)
              if d["num_drafts"] else None}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
