#!/usr/bin/env python3
"""tools/gpu/sass_profile.py on a small source view shaped as Nsight Compute writes it: segments
end at waits, shares and stall reasons add up, --launch and --range pick what they say, and a file
that is not a source view is refused by name."""
import os
import subprocess
import sys
import tempfile

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sass_profile.py")
HEADER = ('"Address","Source","# Samples","Instructions Executed","stall_barrier","stall_wait",'
          '"stall_barrier (Not Issued)","stall_wait (Not Issued)"\n')


def launch(name, rows):
    lines = [f'"Kernel Name","{name}",\n', HEADER]
    for i, (sass, samples, executed, barrier, wait) in enumerate(rows):
        lines.append(f'"0x{16 * i:x}","{sass}","{samples}","{executed}","{barrier}","{wait}","0","0"\n')
    return "".join(lines)


KERNEL_A = launch("void k_a(int)", [
    ("FFMA R1, R2, R3, R4", 10, 100, 0, 10),
    ("MUFU.EX2 R5, R1", 30, 100, 0, 30),
    ("BAR.SYNC.DEFER_BLOCKING R7, 0x100", 40, 100, 40, 0),  # ends segment [0, 3)
    ("HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24", 0, 100, 0, 0),
    ("WARPGROUP.DEPBAR.LE gsb0, 0x0", 20, 100, 20, 0),  # ends segment [3, 5)
    ("IADD3 R1, R1, 0x1, RZ", 0, 0, 0, 0),  # never executed
    ("EXIT", 0, 4, 0, 0),
])
KERNEL_B = launch("void k_b(float)", [("FADD R1, R1, R2", 5, 8, 0, 5), ("EXIT", 0, 8, 0, 0)])


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "sass.csv")
        with open(path, "w") as f:
            f.write(KERNEL_A + KERNEL_B)
        r = run(path, "--top", "3")
        out = r.stdout
        check(r.returncode == 0, f"summary failed: {r.stderr}")
        check("launch 0 of 2: void k_a(int)" in out, "names the launch")
        check("7 instructions, 100 samples, 504 warp instructions executed" in out, "totals")
        check("stalls: barrier 60%, wait 40%" in out, "stall shares")
        check("     0      3    80.0%          300  BAR.SYNC" in out, "first segment ends at the barrier")
        check("     3      5    20.0%          200  WARPGROUP.DEPBAR" in out, "second segment ends at the wait")
        top = out.split("top 3 instructions by samples:")[-1].strip().splitlines()
        check(len(top) == 3 and top[0].split()[0] == "2" and top[1].split()[0] == "1", "top order")
        r = run(path, "--launch", "1")
        check(r.returncode == 0 and "void k_b(float)" in r.stdout and "5 samples" in r.stdout, "--launch 1")
        r = run(path, "--range", "4", "7")
        lines = r.stdout.strip().splitlines()
        check([l.split()[0] for l in lines] == ["4", "6"], f"--range lists executed rows: {lines}")
        r = run(path, "--launch", "2")
        check(r.returncode != 0 and "holds 2 launches" in r.stderr, "--launch out of range refused")
        bad = os.path.join(tmp, "bad.csv")
        with open(bad, "w") as f:
            f.write('"ID","Kernel","Metric"\n"0","k","1"\n')
        r = run(bad)
        check(r.returncode != 0 and "no source-view rows" in r.stderr, "a non-source CSV refused")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
