#!/usr/bin/env python3
"""`beamserve bench serve` on the CPU with a tiny config: each concurrency level prefills prompts of
its own (none cached by the warm-up or an earlier level), every request finishes with its output
tokens, and the report names the step budget in force (the CPU's default, 2048).

usage: bench_serve_levels.py BEAMSERVE WORK_DIR
"""
import json
import os
import subprocess
import sys


def main() -> int:
    beamserve, work = sys.argv[1], sys.argv[2]
    out = os.path.join(work, "bench_serve_levels.json")
    levels, prompt_len, output_len = [1, 2, 3], 200, 4  # 3 whole 64-token blocks a prompt
    cmd = [beamserve, "bench", "serve", "--device", "cpu", "--config", "models/tiny-beam",
           "--layers", "2", "--concurrency", ",".join(map(str, levels)),
           "--prompt-len", str(prompt_len), "--output-len", str(output_len), "--json", out]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    report = json.load(open(out))
    errors = []
    if report.get("max_tokens_per_step") != 2048:
        errors.append(f"max_tokens_per_step {report.get('max_tokens_per_step')}, want 2048")
    runs = report["runs"]
    if [r["concurrency"] for r in runs] != levels:
        errors.append(f"levels {[r['concurrency'] for r in runs]}, want {levels}")
    for r in runs:
        c = r["concurrency"]
        if r["cached_prompt_tokens"] != 0:
            errors.append(f"concurrency {c}: {r['cached_prompt_tokens']} prompt tokens cached")
        if r["failed_requests"] != 0 or r["output_tokens"] != c * output_len:
            errors.append(f"concurrency {c}: {r['failed_requests']} failed, "
                          f"{r['output_tokens']} output tokens (want {c * output_len})")
        if r["prompt_tokens"] != c * prompt_len:
            errors.append(f"concurrency {c}: {r['prompt_tokens']} prompt tokens, "
                          f"want {c * prompt_len}")
    for e in errors:
        print("FAIL:", e)
    print(f"{len(runs)} levels checked, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
