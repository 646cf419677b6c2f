#!/usr/bin/python3
"""Builds the beam-nano corpus: Python source files from (1) the running interpreter's standard
library, (2) optional standard-library tarballs (e.g. Debian's Python 3.11, packed by
pack_local_stdlib.sh) and (3) optionally the running interpreter's site-packages, distribution by
distribution, only where licences.py accepts the licence. Files are filtered (UTF-8, no minified
lines, no special-token strings), deduplicated by content, and split BY FILE into train/validation
by a hash of the file's key: the stdlib path relative to the stdlib root (so a module of 3.11 and
of 3.12 lands in the same split) or the path relative to site-packages.

Output (--out DIR): train.jsonl, val.jsonl (one {"key", "text"} per file, in key-hash order),
files.tsv (every kept file: key, origin, split, bytes, sha256 prefix), manifest.json (per origin
and distribution: licence, verdict, files, bytes; totals per split).
Usage: corpus.py --out DIR [--stdlib-tar T.tar.xz ...] [--site-packages] [--max-bytes N]"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import re
import sys
import sysconfig
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from licences import classify_metadata, read_metadata  # noqa: E402
from tokenizer_spec import SPECIAL_TOKENS  # noqa: E402

VAL_FRACTION = 1 / 16          # share of files (by key hash) held out; ~6% of the bytes
MIN_BYTES, MAX_BYTES_FILE = 64, 400_000
MAX_LINE = 1000                # longer lines mean generated or minified data
VENDORED = re.compile(r"(^|/)(_vendor|vendor|vendored|_vendored|extern|_extern|third_party|thirdparty)(/|$)")
SKIP_STDLIB_DIRS = re.compile(r"(^|/)(site-packages|dist-packages|__pycache__|config-[^/]*)(/|$)")


def key_hash(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def split_of(key: str) -> str:
    """'val' for VAL_FRACTION of the keys, deterministic by hash."""
    return "val" if key_hash(key) < VAL_FRACTION * 2 ** 64 else "train"


@dataclass
class Candidate:
    key: str        # split / dedup identity, e.g. "stdlib/json/decoder.py"
    origin: str     # "cpython-3.12", "cpython-3.11.tar", "site:numpy"
    path: str       # where to read it (file path, or member name inside a tarball)
    size: int
    data: Optional[bytes] = None  # contents already read (tarball members are read in one sequential pass)


def stdlib_candidates(root: Path, origin: str) -> Iterator[Candidate]:
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if SKIP_STDLIB_DIRS.search(rel) or not p.is_file():
            continue
        yield Candidate("stdlib/" + rel, origin, str(p), p.stat().st_size)


def tar_candidates(tar_path: Path) -> Iterator[Candidate]:
    """Members *.py of a stdlib tarball whose top folder is the stdlib root, read in archive order."""
    origin = tar_path.name.split(".tar")[0]
    with tarfile.open(tar_path) as tf:
        for m in tf:
            if not m.isfile() or not m.name.endswith(".py"):
                continue
            rel = m.name.split("/", 1)[1] if "/" in m.name else m.name
            if SKIP_STDLIB_DIRS.search(rel):
                continue
            yield Candidate("stdlib/" + rel, origin, m.name, m.size, tf.extractfile(m).read())


def site_candidates(site: Path, per_dist_cap: int, report: Dict[str, dict]) -> Iterator[Candidate]:
    """*.py files listed in the RECORD of each licence-accepted distribution, vendored folders
    excluded, at most per_dist_cap bytes per distribution (files taken in key-hash order)."""
    for info in sorted(site.glob("*.dist-info")):
        meta = read_metadata(info)
        if meta is None:
            continue
        name = info.name[: -len(".dist-info")].rsplit("-", 1)[0]
        verdict = classify_metadata(name, meta)
        entry = {"licence": verdict.licence, "accepted": verdict.accepted, "reason": verdict.reason,
                 "version": info.name[: -len(".dist-info")].rsplit("-", 1)[-1]}
        report["site:" + name] = entry
        record = info / "RECORD"
        if not verdict.accepted or not record.is_file():
            continue
        files = []
        for row in csv.reader(record.read_text(encoding="utf-8", errors="replace").splitlines()):
            rel = row[0] if row else ""
            if not rel.endswith(".py") or rel.startswith("..") or VENDORED.search(rel):
                continue
            p = site / rel
            if p.is_file():
                files.append(Candidate("site/" + rel, "site:" + name, str(p), p.stat().st_size))
        taken, used = [], 0
        for c in sorted(files, key=lambda c: key_hash(c.key)):
            if MIN_BYTES <= c.size <= MAX_BYTES_FILE and used + c.size <= per_dist_cap:
                taken.append(c)
                used += c.size
        entry["candidate_files"], entry["candidate_bytes"] = len(taken), used
        yield from taken


def read_bytes(c: Candidate) -> bytes:
    if c.data is not None:
        return c.data
    with open(c.path, "rb") as f:
        return f.read()


def rejection(raw: bytes) -> str:
    """'' if the file is kept, else why not."""
    if not MIN_BYTES <= len(raw) <= MAX_BYTES_FILE:
        return "size"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return "not utf-8"
    if "\x00" in text:
        return "nul byte"
    if any(len(line) > MAX_LINE for line in text.splitlines()):
        return "long line"
    if any(tok in text for tok in SPECIAL_TOKENS):
        return "special-token string"
    return ""


def build(args) -> dict:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: Dict[str, dict] = {}
    groups: List[Tuple[str, List[Candidate]]] = []
    if not args.no_local_stdlib:
        root = Path(sysconfig.get_paths()["stdlib"])
        origin = f"cpython-{sys.version_info.major}.{sys.version_info.minor}"
        groups.append((origin, list(stdlib_candidates(root, origin))))
        report[origin] = {"licence": "PSF-2.0", "accepted": True, "reason": "CPython standard library",
                          "path": str(root), "version": sys.version.split()[0]}
    for t in args.stdlib_tar:
        cands = sorted(tar_candidates(Path(t)), key=lambda c: c.key)
        origin = cands[0].origin if cands else Path(t).name
        groups.append((origin, cands))
        report[origin] = {"licence": "PSF-2.0", "accepted": True, "reason": "CPython standard library (tarball)"}
    if args.site_packages:
        site = Path(sysconfig.get_paths()["purelib"])
        site_cands = list(site_candidates(site, args.per_dist_cap, report))
        stdlib_bytes = sum(c.size for _, cs in groups for c in cs)
        budget, taken = max(args.max_bytes - stdlib_bytes, 0), []
        for c in sorted(site_cands, key=lambda c: key_hash(c.key)):
            if budget - c.size >= 0:
                taken.append(c)
                budget -= c.size
        groups.append(("site-packages", sorted(taken, key=lambda c: (c.origin, c.key))))
    seen, kept, dropped = set(), [], {}
    for _, cands in groups:  # priority order: running stdlib, tarballs, site-packages
        for c in cands:
            raw = read_bytes(c)
            why = rejection(raw) or ("duplicate" if hashlib.sha256(raw).digest() in seen else "")
            if why:
                dropped[why] = dropped.get(why, 0) + 1
                continue
            seen.add(hashlib.sha256(raw).digest())
            kept.append((c, raw.decode("utf-8"), hashlib.sha256(raw).hexdigest()[:16]))
    kept.sort(key=lambda k: (key_hash(k[0].key), k[0].origin))
    totals = {"train": {"files": 0, "bytes": 0}, "val": {"files": 0, "bytes": 0}}
    with open(out / "train.jsonl", "w") as ft, open(out / "val.jsonl", "w") as fv, \
            open(out / "files.tsv", "w") as fl:
        fl.write("key\torigin\tsplit\tbytes\tsha256_16\n")
        for c, text, digest in kept:
            split = split_of(c.key)
            (fv if split == "val" else ft).write(json.dumps({"key": c.key, "text": text}) + "\n")
            fl.write(f"{c.key}\t{c.origin}\t{split}\t{len(text.encode())}\t{digest}\n")
            totals[split]["files"] += 1
            totals[split]["bytes"] += len(text.encode())
            o = report.setdefault(c.origin, {})
            o["files"] = o.get("files", 0) + 1
            o["bytes"] = o.get("bytes", 0) + len(text.encode())
    manifest = {"val_fraction_of_keys": VAL_FRACTION, "totals": totals, "dropped": dropped,
                "origins": report}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--stdlib-tar", action="append", default=[], help="stdlib tarball (repeatable)")
    ap.add_argument("--no-local-stdlib", action="store_true", help="skip the running Python's stdlib")
    ap.add_argument("--site-packages", action="store_true", help="add licence-screened site-packages")
    ap.add_argument("--max-bytes", type=int, default=240_000_000, help="cap on all candidate bytes")
    ap.add_argument("--per-dist-cap", type=int, default=24_000_000, help="cap per distribution")
    args = ap.parse_args()
    m = build(args)
    t = m["totals"]
    print(f"corpus: train {t['train']['files']} files {t['train']['bytes'] / 1e6:.1f} MB, "
          f"val {t['val']['files']} files {t['val']['bytes'] / 1e6:.1f} MB; dropped {m['dropped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
