#!/usr/bin/env python3
"""--enable-deterministic-inference on the CPU (always batch invariant there): `generate` gives the
same tokens with and without it, `bench offline` reports "deterministic_inference": true either
way, and `bench step --help` / `serve --help` name the flag.

usage: deterministic_flag.py BEAMSERVE (from the repository root)
"""
import json
import subprocess
import sys

BIN = sys.argv[1]


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)


def main():
    gen = ["generate", "--model", "models/tiny-beam", "--tokens", "5,6,7", "--max-tokens", "6",
           "--threads", "1"]
    plain, pinned = run(gen), run(gen + ["--enable-deterministic-inference"])
    assert plain.returncode == 0 and pinned.returncode == 0, (plain.stderr, pinned.stderr)
    tokens = lambda out: [line for line in out.splitlines() if "tok/s" not in line]
    assert tokens(plain.stdout) == tokens(pinned.stdout), (plain.stdout, pinned.stdout)

    bench = ["bench", "offline", "--model", "models/tiny-beam", "--requests", "3", "--prompt-len",
             "20", "--output-len", "4", "--threads", "1", "--json"]
    for extra in ([], ["--enable-deterministic-inference"]):
        r = run(bench + extra)
        assert r.returncode == 0, r.stderr
        report = json.loads(r.stdout)
        assert report["deterministic_inference"] is True, report

    for command in (["bench", "step"], ["serve"], ["generate"]):
        r = run(command + ["--help"])
        assert r.returncode == 0 and "--enable-deterministic-inference" in r.stdout, r.stdout
    print("ok")


if __name__ == "__main__":
    main()
