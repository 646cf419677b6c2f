#!/usr/bin/env python3
"""`beamserve <command> --help` (and -h) prints that command's usage to stdout and exits 0 for
every command `beamserve --help` lists, and `bench <benchmark> --help` each benchmark's; a bad
flag still exits non-zero with the usage on stderr.

usage: command_help.py BEAMSERVE
"""
import subprocess
import sys


def run(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=60)


def main() -> int:
    beamserve = sys.argv[1]
    listing = run(beamserve, "--help")
    commands = [line.split()[0] for line in listing.stdout.splitlines()
                if line.startswith("  ") and line.split()[0] not in ("help", "version")]
    errors = [] if len(commands) >= 8 else [f"only {len(commands)} commands listed"]
    for command in commands:
        for flag in ("--help", "-h"):
            r = run(beamserve, command, flag)
            if r.returncode != 0 or not r.stdout.startswith(f"usage: beamserve {command}"):
                errors.append(f"{command} {flag}: exit {r.returncode}, stdout {r.stdout[:60]!r}")
    for bench in ("offline", "step", "kernels", "serve"):
        r = run(beamserve, "bench", bench, "--help")
        if r.returncode != 0 or not r.stdout.startswith(f"usage: beamserve bench {bench}"):
            errors.append(f"bench {bench} --help: exit {r.returncode}, stdout {r.stdout[:60]!r}")
    bad = run(beamserve, "serve", "--no-such-flag")
    if bad.returncode == 0 or "unknown flag --no-such-flag" not in bad.stderr \
            or "usage: beamserve serve" not in bad.stderr:
        errors.append(f"serve --no-such-flag: exit {bad.returncode}, stderr {bad.stderr[:80]!r}")
    for e in errors:
        print("FAIL:", e)
    print(f"{len(commands)} commands checked, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
