#!/usr/bin/env python3
"""Static SASS counts of a binary's kernels: how many instructions a change adds or removes,
before any timing. Reads `cuobjdump --dump-sass` output (the GPU machine has cuobjdump; this
machine has no disassembler), from a binary (cuobjdump is run) or a saved dump.

    tools/gpu/sass_counts.py A [B] --kernel SUBSTRING [--top N]

A, B: executables or object files, or text files of `cuobjdump --dump-sass` output. For every
function whose mangled name contains SUBSTRING: its instruction count and the N most frequent
opcodes (predicates dropped, modifiers kept apart: IMAD.WIDE is IMAD); with B, each function's
counts in A and B and B - A per opcode, functions matched by name. Exits 1 when no function
matches.
"""
import argparse
import collections
import re
import subprocess
import sys

FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# "        /*0130*/                   IMAD.WIDE R2, R3, 0x4, R4 ;       /* 0x... */"
INSTRUCTION = re.compile(r"^\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;")
PREDICATE = re.compile(r"^@!?U?P[T0-9]+\s+")


def dump_text(path):
    """The cuobjdump --dump-sass text of `path` (run cuobjdump unless it already is such text)."""
    with open(path, "rb") as f:
        head = f.read(4096)
    if b"\0" not in head:  # a saved dump
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    try:
        r = subprocess.run(["cuobjdump", "--dump-sass", path], capture_output=True, text=True)
    except FileNotFoundError:
        sys.exit(f"sass_counts.py: {path} is a binary and cuobjdump is not on the PATH")
    if r.returncode != 0:
        sys.exit(f"sass_counts.py: cuobjdump --dump-sass {path} failed: {r.stderr.strip()}")
    return r.stdout


def opcode(instruction):
    """IMAD of '@!P0 IMAD.WIDE R2, R3, 0x4, R4'."""
    return PREDICATE.sub("", instruction).split()[0].split(".")[0]


def functions(text, kernel):
    """{mangled name: Counter of opcodes} for the functions whose name contains `kernel`."""
    out, current = {}, None
    for line in text.splitlines():
        m = FUNCTION.match(line)
        if m:
            current = m.group(1) if kernel in m.group(1) else None
            if current is not None:
                out.setdefault(current, collections.Counter())
            continue
        m = INSTRUCTION.match(line)
        if m and current is not None and m.group(2):
            out[current][opcode(m.group(2))] += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b", nargs="?")
    ap.add_argument("--kernel", required=True, help="substring of the mangled function names")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    a = functions(dump_text(args.a), args.kernel)
    if not a:
        print(f"sass_counts.py: no function of {args.a} contains '{args.kernel}'", file=sys.stderr)
        return 1
    if args.b is None:
        for name, counts in sorted(a.items()):
            print(f"{name}: {sum(counts.values())} instructions")
            print("  " + "  ".join(f"{op} {n}" for op, n in counts.most_common(args.top)))
        return 0
    b = functions(dump_text(args.b), args.kernel)
    for name in sorted(set(a) | set(b)):
        ca, cb = a.get(name, collections.Counter()), b.get(name, collections.Counter())
        ta, tb = sum(ca.values()), sum(cb.values())
        print(f"{name}: A {ta}, B {tb} ({tb - ta:+d})"
              + ("" if name in a and name in b else "  (only in " + ("A)" if name in a else "B)")))
        both = ca + cb
        ops = sorted(both, key=lambda op: (-abs(cb[op] - ca[op]), -both[op], op))[:args.top]
        print("  " + "  ".join(f"{op} {ca[op]}->{cb[op]}" for op in ops))
    return 0


if __name__ == "__main__":
    sys.exit(main())
