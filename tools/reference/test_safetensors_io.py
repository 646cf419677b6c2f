#!/usr/bin/python3
"""ctest: beam_ref.safetensors_io round-trips BF16/F16/F32 (one file and sharded), rejects
malformed files with messages naming the problem, and rounds fp32 -> bf16 exactly like torch."""
from __future__ import annotations

import json
import struct
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beam_ref.safetensors_io import Bf16Array, load_checkpoint, load_file, save_file, save_sharded  # noqa: E402


def sample_tensors():
    rng = np.random.default_rng(0)
    return {"w.bf16": Bf16Array.from_f32(rng.standard_normal((3, 5)).astype(np.float32)),
            "w.f16": rng.standard_normal((4,)).astype(np.float16),
            "w.f32": rng.standard_normal((2, 2, 2)).astype(np.float32)}


def same(a, b) -> bool:
    if isinstance(a, Bf16Array):
        return isinstance(b, Bf16Array) and np.array_equal(a.bits, b.bits)
    return a.dtype == b.dtype and np.array_equal(a, b)


class SafetensorsIoTest(unittest.TestCase):
    def setUp(self):
        self.dir = Path(tempfile.mkdtemp())

    def test_round_trip_single_file_with_metadata(self):
        t = sample_tensors()
        save_file(t, self.dir / "model.safetensors", {"format": "pt"}, order=["w.f32", "w.bf16", "w.f16"])
        raw = (self.dir / "model.safetensors").read_bytes()
        (hlen,) = struct.unpack("<Q", raw[:8])
        self.assertEqual(hlen % 8, 0)
        self.assertEqual(json.loads(raw[8:8 + hlen])["__metadata__"], {"format": "pt"})
        back = load_checkpoint(self.dir)
        self.assertEqual(set(back), set(t))
        for k in t:
            self.assertTrue(same(t[k], back[k]), k)

    def test_round_trip_sharded(self):
        t = sample_tensors()
        save_sharded(t, self.dir, [["w.f16"], ["w.f32", "w.bf16"]])
        index = json.loads((self.dir / "model.safetensors.index.json").read_text())
        self.assertEqual(index["weight_map"]["w.f16"], "model-00001-of-00002.safetensors")
        back = load_checkpoint(self.dir)
        for k in t:
            self.assertTrue(same(t[k], back[k]), k)

    def test_bf16_rounding_matches_torch(self):
        x = np.random.default_rng(1).standard_normal(10000).astype(np.float32) * 1e3
        x[:4] = [0.0, -0.0, 1.00390625, 1.01171875]  # exact ties: round to even
        ours = Bf16Array.from_f32(x).to_f32()
        ref = torch.from_numpy(x).to(torch.bfloat16).float().numpy()
        self.assertTrue(np.array_equal(ours, ref))

    def test_truncated_file(self):
        (self.dir / "a.safetensors").write_bytes(b"\x10\x00")
        with self.assertRaisesRegex(ValueError, "truncated"):
            load_file(self.dir / "a.safetensors")

    def test_bad_header_json(self):
        (self.dir / "a.safetensors").write_bytes(struct.pack("<Q", 4) + b"{bad")
        with self.assertRaisesRegex(ValueError, "bad header JSON"):
            load_file(self.dir / "a.safetensors")

    def test_offsets_out_of_range_name_the_tensor(self):
        header = json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
        (self.dir / "a.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 8)
        with self.assertRaisesRegex(ValueError, "tensor x"):
            load_file(self.dir / "a.safetensors")


if __name__ == "__main__":
    unittest.main(verbosity=1)
