#!/usr/bin/env python3
"""Trains the beam-nano byte-level BPE with the `tokenizers` library (GPU machine; not installed
on the CPU machine): NFC normalizer, pre-tokenizer Sequence[Split(Qwen2 regex, isolated),
ByteLevel(add_prefix_space=false, use_regex=false)], BPE over the 256 byte symbols, special tokens
at ids 0..6, ByteLevel decoder and post-processor. Trains on the first --sample-bytes of
train.jsonl (key-hash order). Writes tokenizer.json and tokenizer_config.json to --out.
Usage: train_tokenizer.py --corpus DIR --out DIR [--vocab-size 8192] [--sample-bytes N]"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tokenizer_spec import QWEN2_PATTERN, SPECIAL_TOKENS, VOCAB_SIZE, write_tokenizer_config  # noqa: E402


def sample_texts(train_jsonl: Path, max_bytes: int):
    used = 0
    with open(train_jsonl) as f:
        for line in f:
            text = json.loads(line)["text"]
            used += len(text.encode())
            if used > max_bytes:
                return
            yield text


def build_tokenizer():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab-size", type=int, default=VOCAB_SIZE)
    ap.add_argument("--sample-bytes", type=int, default=64_000_000)
    ap.add_argument("--model-max-length", type=int, default=4096)
    args = ap.parse_args()
    from tokenizers import pre_tokenizers, trainers
    t0 = time.time()
    tok = build_tokenizer()
    trainer = trainers.BpeTrainer(vocab_size=args.vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(sample_texts(Path(args.corpus) / "train.jsonl", args.sample_bytes), trainer=trainer)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    write_tokenizer_config(out, args.model_max_length)
    ids = [tok.token_to_id(t) for t in SPECIAL_TOKENS]
    if ids != list(range(len(SPECIAL_TOKENS))) or tok.get_vocab_size() > args.vocab_size:
        print(f"tokenizer: unexpected special ids {ids} or vocab {tok.get_vocab_size()}", file=sys.stderr)
        return 1
    print(f"tokenizer: vocab {tok.get_vocab_size()}, trained in {time.time() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
