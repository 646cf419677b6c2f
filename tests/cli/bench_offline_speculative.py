#!/usr/bin/env python3
"""`beamserve bench offline` with each kind of drafts on the CPU (tiny-beam): the report names the
method, the drafts a decode may verify as the engine resolved them (a DFlash2 drafter's block - 1
when not given) and the drafter; every request finishes with its tokens; drafts were verified.

usage: bench_offline_speculative.py BEAMSERVE
"""
import json
import subprocess
import sys


def bench(beamserve, flags):
    cmd = [beamserve, "bench", "offline", "--model", "models/tiny-beam", "--requests", "4",
           "--prompt-len", "24", "--output-len", "24", "--threads", "1", "--json", *flags]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def main() -> int:
    beamserve = sys.argv[1]
    drafter = "models/tiny-beam-dflash2-trained"
    cases = [
        (["--speculative-algorithm", "DFLASH", "--speculative-draft-model-path", drafter],
         {"method": "dflash2", "num_draft_tokens": 3, "draft_model": drafter}),
        (["--speculative-config", json.dumps({"method": "dflash", "model": drafter,
                                              "num_speculative_tokens": 2})],
         {"method": "dflash2", "num_draft_tokens": 2, "draft_model": drafter}),
        (["--speculative-algorithm", "NGRAM", "--speculative-num-draft-tokens", "5"],
         {"method": "ngram", "num_draft_tokens": 4, "draft_model": None}),
    ]
    errors = []
    for flags, want in cases:
        r = bench(beamserve, flags)
        if r.get("speculative") != want:
            errors.append(f"{flags}: speculative {r.get('speculative')}, want {want}")
        if r["failed_requests"] != 0 or r["output_tokens"] != 4 * 24:
            errors.append(f"{flags}: {r['failed_requests']} failed, {r['output_tokens']} tokens")
        if want["method"] == "dflash2" and r["spec_draft_tokens"] == 0:
            errors.append(f"{flags}: no drafts verified")
    if "speculative" in bench(beamserve, []):
        errors.append("a run without drafts reports speculative settings")
    for e in errors:
        print("FAIL:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
