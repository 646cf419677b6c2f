#!/usr/bin/python3
"""Builds the tokenizer reference corpus (>= 2 MB) from this machine's Debian-packaged files.

Documents: C/C++ headers, Python, Perl, Go and shell sources, licence and package prose, man
pages, translated message catalogues (CJK, Cyrillic, Greek, Arabic, Hebrew, Indic, Thai...), and
synthetic documents for emoji, long whitespace/newline runs, digit runs, combining sequences
(NFC), special-token text and invalid UTF-8. Deterministic for a given set of installed files.

Output format: for each document a little-endian uint32 byte length, then the bytes.
Usage: build_corpus.py OUT.bin [--min-bytes N]
"""
import glob
import gzip
import os
import random
import struct
import sys

RNG = random.Random(20240611)


def read(path, limit=1 << 20):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                return f.read(limit)
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return b""


def files(patterns, recursive=True):
    out = set()
    for p in patterns:
        out.update(x for x in glob.glob(p, recursive=recursive) if os.path.isfile(x))
    return sorted(out)


def cut_lines(data, lo, hi):
    """Splits bytes into documents of lo..hi bytes, cut after a newline."""
    docs, pos = [], 0
    while pos < len(data):
        size = RNG.randint(lo, hi)
        end = data.find(b"\n", pos + size)
        end = len(data) if end < 0 else end + 1
        docs.append(data[pos:end])
        pos = end
    return docs


def sample_files(patterns, budget, lo=400, hi=12000):
    paths = files(patterns)
    RNG.shuffle(paths)
    docs, total = [], 0
    for path in paths:
        data = read(path)
        if not data or b"\0" in data[:4096]:
            continue
        for d in cut_lines(data[: 48 * 1024], lo, hi):
            docs.append(d)
            total += len(d)
        if total >= budget:
            break
    return docs


def mo_strings(path):
    """Translated strings of a gettext .mo catalogue."""
    data = read(path, 4 << 20)
    if len(data) < 28:
        return []
    magic = struct.unpack("<I", data[:4])[0]
    end = "<" if magic == 0x950412DE else ">"
    n, _, toff = struct.unpack(end + "III", data[8:20])
    out = []
    for i in range(n):
        length, off = struct.unpack(end + "II", data[toff + 8 * i: toff + 8 * i + 8])
        s = data[off: off + length]
        if i and s:
            out.append(s.replace(b"\0", b"\n"))
    return out


def translations(budget):
    langs = ["zh_CN", "zh_TW", "ja", "ko", "ru", "uk", "el", "ar", "he", "hi", "th", "vi", "ka",
             "hy", "ta", "bn", "fa", "tr", "pl", "de", "fr", "es"]
    docs, total = [], 0
    per_lang = budget // len(langs)
    for lang in langs:
        paths = files([f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"])
        got = 0
        for path in paths:
            strings = mo_strings(path)
            if not strings:
                continue
            blob = b"\n".join(strings) + b"\n"
            for d in cut_lines(blob[:16000], 300, 4000):
                docs.append(d)
                got += len(d)
            if got >= per_lang:
                break
        total += got
    return docs


EMOJI = ["\U0001F600", "\U0001F602", "\U0001F44D", "\U0001F44D\U0001F3FD", "\u2764\ufe0f",
         "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466", "\U0001F1EF\U0001F1F5",
         "\U0001F1FA\U0001F1F8", "1\ufe0f\u20e3", "\U0001F3F3\ufe0f\u200d\U0001F308", "\U0001F9D1\u200d\U0001F4BB",
         "\u2603", "\u2615", "\U0001F680", "\U0001F40D", "\U0001F916", "\U0001FAE0", "\u263a\ufe0f"]
WORDS = ["the", "tokenizer", "model", "inference", "batch", "cache", "def", "return", "int",
         "value", "Hello", "world", "naïve", "café", "résumé", "über", "straße", "日本語", "中文",
         "한국어", "русский", "ελληνικά", "عربى", "עברית", "हिन्दी", "ไทย", "don't", "it's", "we're",
         "I'll", "they've", "I'd", "I'm", "DON'T", "He'S"]


def synthetic(kind):
    r = RNG
    if kind == "emoji":
        return " ".join(r.choice(EMOJI + WORDS) + ("" if r.random() < .5 else r.choice(EMOJI))
                        for _ in range(r.randint(50, 400))).encode()
    if kind == "whitespace":
        parts = []
        for _ in range(r.randint(20, 120)):
            ws = r.choice([" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2003", "\u0085",
                           "\u2028", "\x0b", "\x0c", " \n", "\n\n\n"])
            parts.append(ws * r.choice([1, 2, 3, 7, 16, 100, 1000]) if r.random() < .15 else ws)
            parts.append(r.choice(WORDS + ["", "x", "1", "!", "'s"]))
        return "".join(parts).encode()
    if kind == "digits":
        parts = []
        for _ in range(r.randint(30, 200)):
            n = r.choice([1, 2, 3, 4, 7, 12, 40, 300])
            digits = "".join(r.choice("0123456789") for _ in range(n))
            parts.append(r.choice(["", "v", "x", "$", "-", "0x", "abc", "٣٤٥", "１２３", "²", "½"]) + digits +
                         r.choice([" ", ".", ",", "\n", "e10", "px", "km", "万", "th "]))
        return "".join(parts).encode()
    if kind == "nfc":
        # Decomposed and precomposed forms, Hangul jamo, stacked marks, compatibility characters.
        bases = ["e\u0301", "a\u0308", "o\u0302\u0323", "A\u030a", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab",
                 "n\u0303", "c\u0327", "u\u0308\u0301", "\u0915\u093c", "\u304b\u3099", "\ufb01", "\u2126",
                 "\u212b", "\u00c5", "é", "ﬁ", "\u0041\u030a\u0323", "\u1e9b\u0323", "e\u0301\u0301"]
        return " ".join("".join(r.choice(bases) for _ in range(r.randint(1, 6))) + r.choice(WORDS)
                        for _ in range(r.randint(40, 300))).encode()
    if kind == "special":
        toks = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>",
                "</tool_call>", "<|fim_prefix|>", "<|im_start", "im_end|>", "<|", "|>", "<|vision_pad|>",
                "<<|im_start|>>", "<|im_start|><|im_end|>"]
        return "".join(r.choice(toks) + r.choice(["", "user\n", "assistant\n", " ", "\n"]) +
                       " ".join(r.choice(WORDS) for _ in range(r.randint(0, 12)))
                       for _ in range(r.randint(10, 80))).encode()
    raise ValueError(kind)


INVALID = [b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf",
           b"\xf4\x90\x80\x80", b"\xf5", b"\xff", b"\xfe", b"\xe4\xb8", b"\xf0\x9f\x98", b"\xc3",
           b"\xf0\x9f", b"\xe2\x82\x28", b"\xef\xbb\xbf"]


def corrupt(doc):
    """Inserts invalid UTF-8 sequences, and sometimes cuts through a multi-byte character."""
    b = bytearray(doc)
    for _ in range(RNG.randint(1, 12)):
        pos = RNG.randint(0, len(b))
        b[pos:pos] = RNG.choice(INVALID)
    if RNG.random() < .3 and len(b) > 2:
        del b[RNG.randint(0, len(b) - 1)]
    return bytes(b)


def main():
    out = sys.argv[1]
    min_bytes = int(sys.argv[sys.argv.index("--min-bytes") + 1]) if "--min-bytes" in sys.argv else 2_200_000
    docs = []
    docs += sample_files(["/usr/include/*.h", "/usr/include/*/*.h", "/usr/include/c++/*/*"], 450_000)
    docs += sample_files(["/usr/lib/python3*/*.py", "/usr/lib/python3*/*/*.py"], 400_000)
    docs += sample_files(["/usr/share/perl/*/**/*.pm", "/usr/share/perl5/**/*.pm"], 200_000)
    docs += sample_files(["/usr/share/doc/git/contrib/**/*.go", "/usr/share/doc/git/contrib/**/*.sh",
                          "/usr/share/doc/git/contrib/**/*.py", "/usr/share/doc/git/contrib/**/*.perl",
                          "/usr/share/bash-completion/completions/*"], 120_000)
    docs += sample_files(["/usr/share/common-licenses/*", "/usr/share/doc/*/copyright",
                          "/usr/share/doc/*/README*", "/usr/share/doc/*/changelog.Debian.gz"], 350_000)
    docs += sample_files(["/usr/share/man/man1/*.gz", "/usr/share/man/*/man1/*.gz"], 150_000)
    docs += translations(420_000)
    for kind, count in [("emoji", 25), ("whitespace", 25), ("digits", 25), ("nfc", 25), ("special", 30)]:
        docs += [synthetic(kind) for _ in range(count)]
    docs += [corrupt(d) for d in RNG.sample(docs, 60)]
    docs += [b"", b" ", b"\n", b"\xef\xbb\xbfBOM at start", b"a" * 20000, b" " * 20000 + b"x"]
    while sum(map(len, docs)) < min_bytes:
        docs.append(synthetic(RNG.choice(["emoji", "whitespace", "digits", "nfc", "special"])))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "wb") as f:
        for d in docs:
            f.write(struct.pack("<I", len(d)))
            f.write(d)
    print(f"corpus: {len(docs)} documents, {sum(map(len, docs))} bytes -> {out}")


if __name__ == "__main__":
    main()
