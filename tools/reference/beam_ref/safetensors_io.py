"""Pure-Python safetensors reader/writer (no `safetensors` package): 8-byte little-endian header
length, JSON header {name: {dtype, shape, data_offsets}} plus optional __metadata__, raw data.
Also sharded checkpoints through model.safetensors.index.json. Tensors travel as numpy arrays;
BF16 (no numpy dtype) is carried as uint16 bit patterns wrapped in `Bf16Array`."""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional

import numpy as np

from .numerics import bf16_bits_to_f32, f32_to_bf16_bits

INDEX_NAME = "model.safetensors.index.json"
SINGLE_NAME = "model.safetensors"
_NUMPY_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
_ITEM_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "I64": 8, "U8": 1}


@dataclass
class Bf16Array:
    """A BF16 tensor: uint16 bit patterns of the given shape."""
    bits: np.ndarray

    @staticmethod
    def from_f32(a: np.ndarray) -> "Bf16Array":
        return Bf16Array(f32_to_bf16_bits(np.asarray(a, dtype=np.float32)))

    def to_f32(self) -> np.ndarray:
        return bf16_bits_to_f32(self.bits)

    @property
    def shape(self):
        return self.bits.shape


def dtype_name(t) -> str:
    if isinstance(t, Bf16Array):
        return "BF16"
    for name, dt in _NUMPY_DTYPES.items():
        if t.dtype == dt:
            return name
    raise ValueError(f"safetensors: unsupported numpy dtype {t.dtype}")


def _raw(t) -> bytes:
    arr = t.bits if isinstance(t, Bf16Array) else t
    return np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()


def save_file(tensors: Dict[str, object], path, metadata: Optional[Dict[str, str]] = None,
              order: Optional[Iterable[str]] = None) -> int:
    """Writes tensors (numpy arrays or Bf16Array) in `order` (default: insertion order); header
    padded with spaces to a multiple of 8 bytes. Returns the number of data bytes."""
    names = list(order) if order is not None else list(tensors)
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in names:
        t = tensors[name]
        blob = _raw(t)
        header[name] = {"dtype": dtype_name(t), "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for blob in blobs:
            f.write(blob)
    return offset


def load_file(path) -> Dict[str, object]:
    """Reads one .safetensors file -> {name: numpy array or Bf16Array}. Raises ValueError naming
    the file (and tensor) on a truncated file, bad header, unknown dtype or bad offsets."""
    data = Path(path).read_bytes()
    if len(data) < 8:
        raise ValueError(f"{path}: truncated (no header length)")
    (hlen,) = struct.unpack("<Q", data[:8])
    if 8 + hlen > len(data):
        raise ValueError(f"{path}: header length {hlen} exceeds file size {len(data)}")
    try:
        header = json.loads(data[8:8 + hlen])
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: bad header JSON: {e}") from e
    header.pop("__metadata__", None)
    base, out = 8 + hlen, {}
    for name, info in header.items():
        dt, shape, (lo, hi) = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in _ITEM_BYTES:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        count = int(np.prod(shape, dtype=np.int64))
        if hi - lo != count * _ITEM_BYTES[dt] or lo < 0 or base + hi > len(data):
            raise ValueError(f"{path}: tensor {name}: data_offsets {lo},{hi} do not fit shape {shape} {dt}")
        buf = data[base + lo: base + hi]
        if dt == "BF16":
            out[name] = Bf16Array(np.frombuffer(buf, dtype="<u2").astype(np.uint16).reshape(shape))
        else:
            out[name] = np.frombuffer(buf, dtype=np.dtype(_NUMPY_DTYPES[dt]).newbyteorder("<")) \
                .astype(_NUMPY_DTYPES[dt]).reshape(shape)
    return out


def save_sharded(tensors: Dict[str, object], out_dir, shards: List[List[str]],
                 metadata: Optional[Dict[str, str]] = None) -> Path:
    """Writes shards[i] (lists of names, in that order) to model-0000{i+1}-of-0000{n}.safetensors and
    the index file {"metadata": {"total_size": bytes, ...}, "weight_map": {name: file}}."""
    out_dir = Path(out_dir)
    n, weight_map, total = len(shards), {}, 0
    for i, names in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        total += save_file(tensors, out_dir / fname, {"format": "pt"}, order=names)
        weight_map.update({name: fname for name in names})
    index = {"metadata": {"total_size": total, **(metadata or {})}, "weight_map": weight_map}
    path = out_dir / INDEX_NAME
    path.write_text(json.dumps(index, indent=2) + "\n")
    return path


def load_checkpoint(model_dir) -> Dict[str, object]:
    """All tensors of a checkpoint directory: sharded (index file) or a single model.safetensors."""
    model_dir = Path(model_dir)
    index_path = model_dir / INDEX_NAME
    if not index_path.exists():
        return load_file(model_dir / SINGLE_NAME)
    weight_map = json.loads(index_path.read_text())["weight_map"]
    out = {}
    for fname in sorted(set(weight_map.values())):
        for name, t in load_file(model_dir / fname).items():
            if weight_map.get(name) != fname:
                raise ValueError(f"{model_dir / fname}: tensor {name} is not mapped to this file in {INDEX_NAME}")
            out[name] = t
    missing = sorted(set(weight_map) - set(out))
    if missing:
        raise ValueError(f"{index_path}: tensors listed but not found in their shard: {missing[:5]}")
    return out
