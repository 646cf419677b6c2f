#!/usr/bin/env python3
"""Summarises Nsight Compute's per-instruction source view (SASS with warp-stall samples).

Input: the CSV of `ncu -i REPORT --page source --csv --print-source sass` (tools/gpu/ncu_source.sh
writes it). One block per profiled launch; --launch picks one (0 = the first).

    tools/gpu/sass_profile.py SASS.csv [--launch N] [--top N] [--range FIRST END]

Prints the launch's samples and stall reasons, the code's segments between synchronisation
points (barriers, mbarrier waits, wgmma waits: where a warp's time goes, region by region) with
their share of samples and warp instructions, and the top instructions by samples. --range lists
every executed instruction of [FIRST, END) (indices as printed) instead.
"""
import argparse
import collections
import csv
import sys

# SASS that ends a segment: a warp waits or hands over there.
LANDMARKS = ("BAR.SYNC", "BAR.ARV", "WARPGROUP.DEPBAR", "SYNCS.PHASECHK", "EXIT")


def read_launches(path):
    """[(kernel name, header, rows)] in file order."""
    launches, header = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                launches.append([row[1] if len(row) > 1 else "?", None, []])
            elif row[0] == "Address":
                header = row
            elif launches:
                launches[-1][1] = header
                launches[-1][2].append(row)
    if not launches or launches[0][1] is None:
        raise SystemExit(f"{path}: no source-view rows (expected ncu --page source --csv output)")
    return [tuple(launch) for launch in launches]


class Launch:
    def __init__(self, header, rows):
        self.ix = {name: i for i, name in enumerate(header)}
        for need in ("Source", "# Samples", "Instructions Executed"):
            if need not in self.ix:
                raise SystemExit(f"source view lacks the column '{need}'")
        self.stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
        self.rows = rows

    def samples(self, i):
        return int(self.rows[i][self.ix["# Samples"]] or 0)

    def executed(self, i):
        return int(self.rows[i][self.ix["Instructions Executed"]] or 0)

    def sass(self, i):
        return self.rows[i][self.ix["Source"]].strip()

    def stall_counts(self, first, end):
        agg = collections.Counter()
        for i in range(first, end):
            for s in self.stalls:
                agg[s[len("stall_"):]] += int(self.rows[i][self.ix[s]] or 0)
        return agg


def stall_text(agg, n):
    total = sum(agg.values()) or 1
    return ", ".join(f"{k} {v * 100 / total:.0f}%" for k, v in agg.most_common(n) if v)


def segments(launch):
    """[first, end) index ranges, each ending after a landmark instruction."""
    out, first = [], 0
    for i in range(len(launch.rows)):
        if any(m in launch.sass(i) for m in LANDMARKS):
            out.append((first, i + 1))
            first = i + 1
    if first < len(launch.rows):
        out.append((first, len(launch.rows)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
    ap.add_argument("csv")
    ap.add_argument("--launch", type=int, default=0)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--range", type=int, nargs=2, metavar=("FIRST", "END"))
    args = ap.parse_args()
    launches = read_launches(args.csv)
    if not 0 <= args.launch < len(launches):
        raise SystemExit(f"--launch {args.launch}: the file holds {len(launches)} launches")
    name, header, rows = launches[args.launch]
    launch = Launch(header, rows)
    n = len(rows)
    if args.range:
        first, end = max(0, args.range[0]), min(n, args.range[1])
        for i in range(first, end):
            if launch.samples(i) or launch.executed(i):
                print(f"{i:6d} {launch.samples(i):6d} ex {launch.executed(i):10d}  {launch.sass(i)}")
        return
    total = sum(launch.samples(i) for i in range(n)) or 1
    print(f"launch {args.launch} of {len(launches)}: {name[:150]}")
    print(f"{n} instructions, {total} samples, "
          f"{sum(launch.executed(i) for i in range(n))} warp instructions executed")
    print(f"stalls: {stall_text(launch.stall_counts(0, n), 8)}")
    print("\nsegments with >= 1% of samples (each ends at a wait or barrier):")
    print(f"{'first':>6} {'end':>6} {'samples':>8} {'warp instr':>12}  ending at / top stalls")
    for first, end in segments(launch):
        s = sum(launch.samples(i) for i in range(first, end))
        if s * 100 < total:
            continue
        ex = sum(launch.executed(i) for i in range(first, end))
        print(f"{first:6d} {end:6d} {s * 100 / total:7.1f}% {ex:12d}  {launch.sass(end - 1)[:60]}")
        print(f"{'':36}{stall_text(launch.stall_counts(first, end), 4)}")
    print(f"\ntop {args.top} instructions by samples:")
    for i in sorted(range(n), key=lambda i: -launch.samples(i))[:args.top]:
        if not launch.samples(i):
            break
        print(f"{i:6d} {launch.samples(i) * 100 / total:6.2f}% ex {launch.executed(i):10d}  "
              f"{launch.sass(i)[:70]:70s} {stall_text(launch.stall_counts(i, i + 1), 2)}")


if __name__ == "__main__":
    sys.exit(main())
