#!/usr/bin/env python3
"""tools/gpu/sass_counts.py on saved dumps shaped as `cuobjdump --dump-sass` writes them: counts
per function and opcode (predicates dropped, modifiers folded), the A/B difference, functions in
one dump only, and an unmatched kernel refused by name."""
import os
import subprocess
import sys
import tempfile
import unittest

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
    ("_Z6decodei", ["LDC R1, c[0x0][0x28]", "IMAD.WIDE R2, R3, 0x4, R4",
                    "@!P0 IMAD R5, R5, 0x2, R6", "SHFL.IDX PT, R7, R8, R9, 0x1f",
                    "SHFL.IDX PT, R10, R8, R9, 0x1f", "EXIT"]),
    ("_Z7prefillv", ["HGMMA.64x128x16.F32.BF16 R24, gdesc[UR20], R24", "EXIT"]),
])
B = dump([
    ("_Z6decodei", ["LDC R1, c[0x0][0x28]", "IMAD R5, R5, 0x2, R6", "SHFL.IDX PT, R7, R8, R9, 0x1f",
                    "EXIT"]),
    ("_Z6decodeiNew", ["EXIT"]),
])


def run(*args):
    return subprocess.run([sys.executable, TOOL, *args], capture_output=True, text=True)


class SassCounts(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.a = os.path.join(self.tmp.name, "a.sass")
        self.b = os.path.join(self.tmp.name, "b.sass")
        for path, text in ((self.a, A), (self.b, B)):
            with open(path, "w") as f:
                f.write(text)

    def tearDown(self):
        self.tmp.cleanup()

    def test_counts_the_matching_functions(self):
        r = run(self.a, "--kernel", "decode")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("_Z6decodei: 6 instructions", r.stdout)
        self.assertIn("IMAD 2  SHFL 2  LDC 1  EXIT 1", r.stdout)  # predicates and modifiers dropped
        self.assertNotIn("prefill", r.stdout)

    def test_a_against_b(self):
        r = run(self.a, self.b, "--kernel", "decode")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("_Z6decodei: A 6, B 4 (-2)", r.stdout)
        for diff in ("IMAD 2->1", "SHFL 2->1", "EXIT 1->1"):
            self.assertIn(diff, r.stdout)
        self.assertIn("_Z6decodeiNew: A 0, B 1 (+1)  (only in B)", r.stdout)

    def test_an_unmatched_kernel_is_refused_by_name(self):
        r = run(self.a, "--kernel", "attention")
        self.assertEqual(r.returncode, 1)
        self.assertIn("no function of", r.stderr)
        self.assertIn("'attention'", r.stderr)


if __name__ == "__main__":
    unittest.main()
