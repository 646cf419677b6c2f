"""GPT-2 byte-level alphabet (byte <-> printable character), used to decode token spellings of
tokenizer.json into bytes without the `tokenizers` library (CPU machine), and by the CPU-only toy
tokenizer of the pipeline test."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List


def bytes_to_unicode() -> Dict[int, str]:
    """The 256-entry byte -> character table of GPT-2's ByteLevel (printable bytes map to
    themselves, the rest to U+0100 upwards in byte order)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class TokenDecoder:
    """Decodes ids to text with a tokenizer.json: byte-level spellings back to bytes; added
    tokens (specials) decode to their content. Equals HF's decode(skip_special_tokens=False)
    for a ByteLevel decoder."""

    def __init__(self, tokenizer_json: Path):
        spec = json.loads(Path(tokenizer_json).read_text())
        inverse = {c: b for b, c in bytes_to_unicode().items()}
        self.pieces: Dict[int, bytes] = {}
        for spelling, i in spec["model"]["vocab"].items():
            self.pieces[i] = bytes(inverse[c] for c in spelling) if all(c in inverse for c in spelling) \
                else spelling.encode()
        for added in spec.get("added_tokens", []):
            self.pieces[added["id"]] = added["content"].encode()

    def token_bytes(self, i: int) -> bytes:
        return self.pieces[i]

    def decode(self, ids: List[int]) -> str:
        return b"".join(self.pieces[i] for i in ids).decode("utf-8", errors="replace")
