#!/usr/bin/env python3
"""Numeric flags outside their range stop a command before it loads anything, with an error that
names the flag and its range (a value past every sensible setting used to overflow what was
computed from it, e.g. --kv-budget-mb's bytes, or to ask for 100,000 threads and abort on an
uncaught exception); values at the bounds' sensible ends still start a server.

usage: flag_ranges.py BEAMSERVE (from the repository root)
"""
import subprocess
import sys

BIN = sys.argv[1]
MODEL = ["--model", "models/tiny-beam"]


def run(args, timeout=60):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)


def refused(command, flag, value, words):
    r = run(command + MODEL + [flag, value])
    assert r.returncode != 0, (command, flag, value, r.stdout[-400:], r.stderr[-400:])
    assert words in r.stderr, (flag, value, words, r.stderr[-600:])
    assert "terminate called" not in r.stderr, r.stderr[-600:]


def main():
    serve = ["serve", "--port", "0"]
    for flag, value, words in [
            ("--kv-budget-mb", "9223372036854775807", "--kv-budget-mb must be in [1, 1073741824]"),
            ("--kv-budget-mb", "0", "--kv-budget-mb must be in [1, 1073741824]"),
            ("--max-body-mb", "99999999999999", "--max-body-mb must be in [1, 1048576]"),
            ("--threads", "100000", "--threads must be in [0, 1024]"),
            ("--threads", "-1", "--threads must be in [0, 1024]"),
            ("--workers", "100000", "--workers must be in [1, 1024]"),
            ("--io-threads", "4294967297", "--io-threads must be in [1, 1024]"),
            ("--block-size", "9223372036854775807", "--block-size must be in [1, 65536]"),
            ("--max-running", "0", "--max-running must be in [1, 1048576]"),
            ("--max-tokens-per-step", "99999999999999", "--max-tokens-per-step must be in [1, 16777216]"),
            ("--max-model-len", "-7", "--max-model-len must be in [0, 2147483648]"),
            ("--health-stall-s", "nan", "--health-stall-s must be in [0.001, 1e+09], got nan"),
            ("--health-stall-s", "-1", "--health-stall-s must be in [0.001, 1e+09], got -1"),
            ("--port", "99999", "--port must be in [0, 65535], got 99999")]:
        refused(serve, flag, value, words)
    # A context past the model's (tiny-beam: 1,048,576 positions), as vLLM refuses it.
    r = run(serve + MODEL + ["--max-model-len", "2147483648"])
    assert r.returncode != 0 and "longer than the model's max_position_embeddings, 1048576" in r.stderr, r.stderr
    r = run(serve + MODEL + ["--enable-hierarchical-cache", "--hicache-ratio", "1e300"])
    assert r.returncode != 0 and "--hicache-ratio must be in [1e-06, 1e+06], got 1e300" in r.stderr, r.stderr
    for command in (["generate", "--tokens", "5,6"], ["bench", "offline", "--requests", "1"]):
        refused(command, "--threads", "99999999999", "--threads must be in [0, 1024]")
    refused(["bench", "offline", "--requests", "1"], "--kv-budget-mb", "9223372036854775807",
            "--kv-budget-mb must be in [1, 1073741824]")
    # In range: generate runs with explicit threads and a KV budget.
    r = run(["generate"] + MODEL + ["--tokens", "5,6,7", "--max-tokens", "2", "--threads", "2"])
    assert r.returncode == 0, r.stderr
    r = run(["bench", "offline"] + MODEL + ["--requests", "2", "--prompt-len", "8", "--output-len", "2",
                                            "--kv-budget-mb", "64", "--threads", "1", "--json"])
    assert r.returncode == 0, r.stderr
    print("ok")


if __name__ == "__main__":
    main()
