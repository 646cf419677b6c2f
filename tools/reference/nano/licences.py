"""Licence screening of installed Python distributions for the beam-nano corpus: a distribution is
accepted only when its metadata names permissive licences alone (SPDX License-Expression, else
trove classifiers, else the free-text License field); anything unknown or copyleft is rejected."""
from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from typing import List, Optional

# SPDX ids taken as permissive (attribution-only or public-domain dedications).
PERMISSIVE_SPDX = {
    "MIT", "MIT-0", "BSD-2-Clause", "BSD-3-Clause", "BSD-3-Clause-Clear", "BSD-4-Clause-UC",
    "Apache-2.0", "PSF-2.0", "Python-2.0", "Python-2.0.1", "ISC", "0BSD", "Zlib", "Unlicense",
    "CC0-1.0", "BSL-1.0", "HPND", "MIT-CMU", "NCSA", "X11", "curl", "Unicode-DFS-2016",
    "Unicode-3.0", "blessing", "PSF",
}
PERMISSIVE_CLASSIFIERS = ("MIT License", "BSD License", "Apache Software License",
                          "Python Software Foundation License", "ISC License", "zlib/libpng License",
                          "The Unlicense", "Public Domain", "Boost Software License")
COPYLEFT_WORDS = re.compile(r"\b(A?GPL|LGPL|GNU|MPL|Mozilla|EUPL|EPL|CDDL|CC-BY-SA|SSPL|"
                            r"[Pp]roprietary|Freeware|NVIDIA|Commercial)\b")
PERMISSIVE_WORDS = re.compile(r"\b(MIT|BSD|Apache|PSF|Python Software Foundation|ISC)\b")
# Distributions never used whatever their metadata says (vendor SDK bindings, installers that
# vendor code under other licences).
DENY_NAME = re.compile(r"^(nvidia[-_].*|cuda[-_].*|pip)$", re.IGNORECASE)


@dataclass
class LicenceVerdict:
    accepted: bool
    licence: str   # the licence text the verdict is based on (shortened)
    reason: str


def _spdx_ids(expression: str) -> List[str]:
    tokens = re.split(r"[\s()]+", expression)
    return [t for t in tokens if t and t.upper() not in ("AND", "OR", "WITH")]


def classify_metadata(name: str, metadata_text: str) -> LicenceVerdict:
    """Decides from the METADATA text of one distribution."""
    if DENY_NAME.match(name):
        return LicenceVerdict(False, "", "denied by name")
    msg = HeaderParser().parsestr(metadata_text)
    expression = (msg.get("License-Expression") or "").strip()
    if expression:
        ids = _spdx_ids(expression)
        bad = [i for i in ids if i not in PERMISSIVE_SPDX and not i.startswith("LicenseRef-")]
        refs = [i for i in ids if i.startswith("LicenseRef-")]
        if bad or refs:
            return LicenceVerdict(False, expression, f"non-permissive or unknown SPDX ids {bad + refs}")
        return LicenceVerdict(True, expression, "License-Expression")
    classifiers = [c for c in msg.get_all("Classifier") or [] if c.startswith("License ::")]
    if classifiers:
        joined = "; ".join(classifiers)
        if any(COPYLEFT_WORDS.search(c) for c in classifiers) or any("Other/Proprietary" in c for c in classifiers):
            return LicenceVerdict(False, joined, "copyleft or proprietary classifier")
        if all(any(p in c for p in PERMISSIVE_CLASSIFIERS) for c in classifiers if c != "License :: OSI Approved"):
            return LicenceVerdict(True, joined, "classifiers")
        return LicenceVerdict(False, joined, "unrecognised classifier")
    text = (msg.get("License") or "").strip()
    head = text[:300]
    if not head:
        return LicenceVerdict(False, "", "no licence metadata")
    if COPYLEFT_WORDS.search(head):
        return LicenceVerdict(False, head[:80], "copyleft or proprietary words in License")
    if PERMISSIVE_WORDS.search(head):
        return LicenceVerdict(True, head[:80], "License field")
    return LicenceVerdict(False, head[:80], "unrecognised License field")


def read_metadata(dist_info: Path) -> Optional[str]:
    for name in ("METADATA", "PKG-INFO"):
        p = dist_info / name
        if p.is_file():
            return p.read_text(encoding="utf-8", errors="replace")
    return None
