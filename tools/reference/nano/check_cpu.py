#!/usr/bin/python3
"""Re-runs the GPU evaluation's greedy continuations with the reference's exact numerics on THIS
machine's CPU (torch 1.13), reports where CPU and GPU agree, and writes the fixture of the
--count agreeing cases with the largest smallest top-1/top-2 logit margin (cases that stop early
are skipped unless --allow-stop), in the candidates' original order. Repeated prompts and
candidates whose GPU margin is already below --min-margin are not re-run.
Fixture: {"model", "decoding", "reference", "cases": [{"source", "prompt", "prompt_ids",
"generated_ids", "generated_text", "min_logit_margin"}]}.
Usage: check_cpu.py --model models/beam-nano --results results.json --out models/beam-nano/golden/greedy.json"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
from beam_ref.checkpoint import load_model  # noqa: E402
from beam_ref.numerics import Numerics  # noqa: E402
from byte_level import TokenDecoder  # noqa: E402
from greedy import greedy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--min-margin", type=float, default=0.05, help="smallest acceptable logit margin")
    ap.add_argument("--allow-stop", action="store_true", help="accept cases that end on a stop id")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model_dir = Path(args.model)
    model = load_model(model_dir, Numerics(exact=True))
    decoder = TokenDecoder(model_dir / "tokenizer.json")
    stop = set(json.loads((model_dir / "generation_config.json").read_text())["eos_token_id"])
    gpu = json.loads(Path(args.results).read_text())["greedy"]
    if not gpu:
        print("no greedy candidates in the results", file=sys.stderr)
        return 1
    max_new = max(len(c["generated_ids"]) for c in gpu)
    seen, rows = set(), []
    for i, c in enumerate(gpu):
        if c["prompt"] in seen or c["min_logit_margin"] < args.min_margin:
            continue  # a repeated header (3.11 and 3.12 copies) or a GPU near-tie: never chosen
        seen.add(c["prompt"])
        g = greedy(model, c["prompt_ids"], max_new, stop)
        agree = g.generated == c["generated_ids"]
        first_diff = next((k for k, (a, b) in enumerate(zip(g.generated, c["generated_ids"])) if a != b), None)
        margin = min(min(g.logit_margins), c["min_logit_margin"])
        stopped = len(g.generated) < max_new
        rows.append((i, c, g, agree, margin, stopped))
        print(f"{i:2d} agree={agree} first_diff={first_diff} min_margin={margin:.4f} stopped={stopped} "
              f"{c['prompt'].strip()[:60]!r}")
    ok = [r for r in rows if r[3] and r[4] >= args.min_margin and (args.allow_stop or not r[5])]
    print(f"CPU == GPU on {sum(r[3] for r in rows)} of {len(rows)} prompts with GPU margin >= "
          f"{args.min_margin} ({len(gpu)} candidates); {len(ok)} usable")
    if len(ok) < args.count:
        print(f"only {len(ok)} usable cases, need {args.count}", file=sys.stderr)
        return 1
    chosen = sorted(sorted(ok, key=lambda r: -r[4])[:args.count], key=lambda r: r[0])
    fixture = {
        "model": str(model_dir),
        "decoding": {"greedy": True, "max_new_tokens": max_new, "stop_token_ids": sorted(stop),
                     "prefill": "prompt in one forward, then one token per step (KV cache)",
                     "tie_break": "lowest id", "special_tokens_added": False},
        "reference": (f"tools/reference exact numerics (bf16 rounding points of BEAM.md 0a/3); equal on "
                      f"torch {torch.__version__} CPU and the GPU run; chosen for the largest smallest "
                      f"top-1/top-2 logit margin among the {len(rows)} of {len(set(c['prompt'] for c in gpu))} "
                      f"unique held-out headers whose GPU margin is >= {args.min_margin}"),
        "cases": [{"source": c["source"], "prompt": c["prompt"], "prompt_ids": c["prompt_ids"],
                   "generated_ids": g.generated, "generated_text": decoder.decode(g.generated),
                   "min_logit_margin": round(m, 4)} for _, c, g, _, m, _ in chosen],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(fixture, indent=1, ensure_ascii=False) + "\n")
    print(f"fixture with {len(chosen)} cases written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
