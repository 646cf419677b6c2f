#!/usr/bin/env python3
"""tools/gpu/synthetic_checkpoint.py writes a checkpoint beamserve loads: a small one (two routed
layers after a dense one) runs `beamserve bench offline` on the CPU, every tensor is in the index,
and the values are finite.

  tools/gpu/test_synthetic_checkpoint.py BEAMSERVE
"""
import json
import math
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    beamserve = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "synth"
        subprocess.run([sys.executable, str(HERE / "synthetic_checkpoint.py"), str(out), "--layers",
                        "3", "--experts", "16", "--hidden", "256", "--moe-width", "128", "--vocab",
                        "1024", "--dense-first"], check=True, stdout=subprocess.DEVNULL)
        index = json.loads((out / "model.safetensors.index.json").read_text())["weight_map"]
        assert len(index) == 3 + (12 + 3) + 2 * (12 + 2 + 3 * 16), len(index)
        first = out / "model-00002-of-00004.safetensors"
        data = first.read_bytes()
        (hlen,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + hlen])
        lo, hi = header["model.layers.0.self_attn.q_proj.weight"]["data_offsets"]
        values = [struct.unpack("<f", b"\0\0" + data[8 + hlen + i:8 + hlen + i + 2])[0]
                  for i in range(lo, min(hi, lo + 4096), 2)]
        assert all(math.isfinite(v) and abs(v) < 0.06 for v in values), "values out of range"
        run = subprocess.run([beamserve, "bench", "offline", "--model", str(out), "--device", "cpu",
                              "--requests", "1", "--prompt-len", "8", "--output-len", "2"],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        result = json.loads(run.stdout[run.stdout.index("{"):])
        assert result["requests"] == 1, result
    print("synthetic checkpoint: written, indexed, finite, loaded by beamserve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
