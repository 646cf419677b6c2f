#!/usr/bin/env python3
"""Per-kernel mean times from an `ncu --csv --metrics gpu__time_duration.sum` log.

    python3 tools/gpu/ncu_summary.py NCU.csv

Prints one line per kernel (its name without arguments or namespaces, 60 characters at most):
launches and mean time in microseconds, the kernel with the largest total first.
"""
import collections
import csv
import re
import sys


def summary(path):
    rows = [r for r in csv.reader(line for line in open(path) if line.startswith('"'))]
    if not rows:
        return None
    head = rows[0]
    name_at, value_at = head.index("Kernel Name"), head.index("Metric Value")
    times = collections.defaultdict(list)
    for r in rows[1:]:
        name = re.sub(r"\(.*", "", r[name_at]).split("::")[-1][:60]
        times[name].append(float(r[value_at].replace(",", "")) / 1000)
    return sorted(times.items(), key=lambda kv: -sum(kv[1]))


def main():
    kernels = summary(sys.argv[1])
    if kernels is None:
        print("  no rows")
        return
    for name, t in kernels:
        print(f"  {name:60s} n={len(t):3d} mean={sum(t) / len(t):9.2f} us")


if __name__ == "__main__":
    main()
