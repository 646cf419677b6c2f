"""Pins the BLAS that numpy and torch call to one order of summation: one OpenBLAS thread with its
SSE3 (Prescott) kernels, which every x86-64 CPU runs. Import it before numpy or torch in a script
whose outputs must be bit-identical on any machine (the DFlash2 goldens): with the machine's own
choice an fp32 GEMM sums in another order on another CPU (Zen's kernels) or with two threads,
and a bf16 rounding downstream lands on its neighbour (found on an AMD EPYC, 2026-12-08).
Elsewhere (another architecture, another BLAS) the variables are ignored."""
import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["OPENBLAS_CORETYPE"] = "Prescott"
