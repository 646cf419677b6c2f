#!/usr/bin/env python3
"""tools/gpu/sass_counts.py on saved dumps shaped as `cuobjdump --dump-sass` writes them: counts
per function and opcode (predicates dropped, modifiers folded), the A/B difference, functions in
one dump only, and an unmatched kernel refused by name."""
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sass_counts.py")


def dump(functions):
    lines = ["", "Fatbin elf code:", "================", "arch = sm_90a", ""]
    for name, instructions in functions:
        lines += [f"\tcode for sm_90a", f"\t\tFunction : {name}",
                  '\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_SM90"']
        for i, ins in enumerate(instructions):
            lines.append(f"        /*{16 * i:04x}*/                   {ins} ;"
                         f"                 /* 0x000fe20000000f00 */")
        lines.append("\t\t..........")
    return "\n".join(lines) + "\n"


A = dump([
    ("_Z6decodei", ["LDC R1, c[0x0][0x28]", "IMAD.WIDE R2, R3, 0x4, R4", "@!P0 IMAD R5, R5, 0x2, R6",
                    "SHFL.IDX PT, R7, R8, R9, 0x1f", "SHFL.IDX PT, R10, R8, R9, 0x1f", "EXIT"]),
    ("_Z7prefillv", ["HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24", "EXIT"]),
])
B = dump([
    ("_Z6decodei", ["LDC R1, c[0x0][0x28]", "IMAD R5, R5, 0x2, R6", "SHFL.IDX PT, R7, R8, R9, 0x1f",
                    "EXIT"]),
    ("_Z6decodeiNew", ["EXIT"]),
])


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        a, b = os.path.join(tmp, "a.sass"), os.path.join(tmp, "b.sass")
        with open(a, "w") as f:
            f.write(A)
        with open(b, "w") as f:
            f.write(B)
        r = run(a, "--kernel", "decode")
        check(r.returncode == 0, f"counts failed: {r.stderr}")
        check("_Z6decodei: 6 instructions" in r.stdout, f"instruction count: {r.stdout}")
        check("IMAD 2  SHFL 2  LDC 1  EXIT 1" in r.stdout, f"opcodes, modifiers folded: {r.stdout}")
        check("prefill" not in r.stdout, "only the matching functions")
        r = run(a, b, "--kernel", "decode")
        check(r.returncode == 0, f"A/B failed: {r.stderr}")
        check("_Z6decodei: A 6, B 4 (-2)" in r.stdout, f"A/B totals: {r.stdout}")
        check("IMAD 2->1" in r.stdout and "SHFL 2->1" in r.stdout and "EXIT 1->1" in r.stdout,
              f"per-opcode difference: {r.stdout}")
        check("_Z6decodeiNew: A 0, B 1 (+1)  (only in B)" in r.stdout, f"B-only function: {r.stdout}")
        r = run(a, "--kernel", "attention")
        check(r.returncode == 1 and "no function of" in r.stderr and "'attention'" in r.stderr,
              "an unmatched kernel refused by name")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
