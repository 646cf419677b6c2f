#!/usr/bin/env python3
"""tools/gpu/ncu_summary.py on a saved `ncu --csv` log: ncu's own lines skipped, kernel names
without arguments or namespaces, means in microseconds, the largest total first; a log without
rows says so."""
import os
import subprocess
import sys
import tempfile
import unittest

TOOL = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ncu_summary.py")

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
        '"Metric Value"\n')


def row(i, name, ns):
    return (f'"{i}","1","bench","h","{name}","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0",'
            f'"Command line profiler metrics","gpu__time_duration.sum","ns","{ns}"\n')


class NcuSummaryTest(unittest.TestCase):
    def run_tool(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
            f.write(text)
        try:
            return subprocess.run([sys.executable, TOOL, f.name], capture_output=True, text=True,
                                  check=True).stdout.splitlines()
        finally:
            os.unlink(f.name)

    def test_means_per_kernel_largest_total_first(self):
        text = ("==PROF== Connected to process 1\n" + HEAD +
                row(0, "void beam::cuda::moe_lora::shrink_mma_kernel(beam::ShrinkArgs)", "1,000") +
                row(1, "void beam::cuda::gemm_kernel<1>(Args)", "5,000") +
                row(2, "void beam::cuda::moe_lora::shrink_mma_kernel(beam::ShrinkArgs)", "3,000"))
        lines = self.run_tool(text)
        self.assertEqual(len(lines), 2)
        self.assertTrue(lines[0].split()[0] == "gemm_kernel<1>", lines)
        self.assertIn("n=  1 mean=     5.00 us", lines[0])
        self.assertTrue(lines[1].split()[0] == "shrink_mma_kernel", lines)
        self.assertIn("n=  2 mean=     2.00 us", lines[1])

    def test_no_rows(self):
        self.assertEqual(self.run_tool("==ERROR== no kernels were profiled\n"), ["  no rows"])


if __name__ == "__main__":
    unittest.main()
