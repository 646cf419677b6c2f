#!/usr/bin/python3
"""Dumps fp32 values computed by PyTorch (CPU) for the kernel tests in tests/unit/kernels: RoPE
inv_freq / angles / cos / sin (Hugging Face's default rotary expressions), the SSMax factor, and
the activations behind the output gate, SwiGLU and softcap. Run once with Debian's python3-torch:
    /usr/bin/python3 tests/data/kernels/make_torch_tables.py
and commit the .npy files next to this script. Every table is computed on tensors whose length is
a multiple of 16, i.e. on PyTorch's vectorised (SLEEF) path, which is the path the reference takes
for whole heads."""
import os

import numpy as np
import torch

OUT = os.path.dirname(os.path.abspath(__file__))
THETAS = [10000.0, 150000.0, 500000.0, 1000000.0, 1234.5, 5000000.0, 25000000.0]
DIMS = [64, 128, 256]
POSITIONS = [0, 1, 2, 15, 16, 17, 511, 512, 513, 2047, 4095, 65535, 123457, 999999, 1000000,
             1000001, 1048575, 1500000]


def save(name, array):
    np.save(os.path.join(OUT, name), np.ascontiguousarray(array))


def inv_freq(theta, dim):
    """HF default rotary init, fp32."""
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def inv_freq_table():
    rows = []
    for theta in THETAS:
        for dim in DIMS:
            for i, v in enumerate(inv_freq(theta, dim).tolist()):
                rows.append([theta, dim, i, v])
    save("rope_inv_freq.npy", np.array(rows, dtype=np.float32))  # [n, 4]: theta, D, i, inv_freq


def rope_tables():
    pos = torch.tensor(POSITIONS + [7] * (-len(POSITIONS) % 16), dtype=torch.int64)
    save("rope_positions.npy", pos.numpy())
    for theta, tag in [(10000.0, "theta1e4"), (1000000.0, "theta1e6")]:
        freq = inv_freq(theta, 128)
        angles = pos.float()[:, None] * freq.float()          # [P, 64] fp32 product
        emb = torch.cat((angles, angles), dim=-1)              # [P, 128]
        save(f"rope_angles_{tag}.npy", angles.numpy())
        save(f"rope_cos_{tag}.npy", emb.cos().numpy())
        save(f"rope_sin_{tag}.npy", emb.sin().numpy())


def ssmax_table():
    pos = torch.tensor(POSITIONS + list(range(0, 2_000_000, 9973)), dtype=torch.int64)
    pos = torch.cat([pos, torch.zeros(-len(pos) % 16, dtype=torch.int64)])
    scale = torch.pow(1.0 + (pos.float() + 1.0) / 2048, 0.1)
    save("ssmax_positions.npy", pos.numpy())
    save("ssmax_scale.npy", scale.numpy())


def activation_tables():
    gen = torch.Generator().manual_seed(0)
    x = torch.cat([torch.randn(4096, generator=gen) * 4, torch.linspace(-90, 90, 4096)]).float()
    save("act_input.npy", x.numpy())
    save("act_sigmoid.npy", torch.sigmoid(x).numpy())
    save("act_silu.npy", torch.nn.functional.silu(x).numpy())
    save("act_softcap30.npy", (30.0 * torch.tanh(x / 30.0)).numpy())


if __name__ == "__main__":
    torch.set_num_threads(1)
    inv_freq_table()
    rope_tables()
    ssmax_table()
    activation_tables()
