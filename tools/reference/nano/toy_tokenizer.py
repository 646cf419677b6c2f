#!/usr/bin/python3
"""CPU-TEST ONLY: a merge-free byte-level tokenizer (ids 0..6 special, 7 + byte value) with the
same tokenizer.json pipeline as the real one, so run_cpu_toy.sh can exercise encode, training,
export and evaluation on the CPU machine, which has no `tokenizers` library. Never shipped.
Usage: toy_tokenizer.py --out DIR"""
from __future__ import annotations

import argparse
import json
import sys
import unicodedata
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from byte_level import bytes_to_unicode  # noqa: E402
from tokenizer_spec import QWEN2_PATTERN, SPECIAL_TOKENS, write_tokenizer_config  # noqa: E402

FIRST_BYTE_ID = len(SPECIAL_TOKENS)


def toy_encode(text: str) -> List[int]:
    return [FIRST_BYTE_ID + b for b in unicodedata.normalize("NFC", text).encode()]


def toy_tokenizer_json() -> dict:
    table = bytes_to_unicode()
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    vocab.update({table[b]: FIRST_BYTE_ID + b for b in range(256)})
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, t in enumerate(SPECIAL_TOKENS)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": []},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(toy_tokenizer_json(), ensure_ascii=False) + "\n")
    write_tokenizer_config(out, 4096)
    print(f"toy tokenizer: {FIRST_BYTE_ID + 256} tokens (CPU test only)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
