#!/usr/bin/env python3
"""`beamserve generate` with each output constraint flag (beam-nano): --grammar (GBNF),
--grammar-file (Lark), --json-schema and --regex outputs match whole (or, when max_tokens cut
them, are a prefix of a match); two constraints, a bad grammar and a missing file are errors
that name the flag.

usage: generate_constraints.py BEAMSERVE
"""
import json
import re
import subprocess
import sys
import tempfile


def generate(beamserve, *flags):
    return subprocess.run([beamserve, "generate", "--model", "models/beam-nano", *flags],
                          capture_output=True, text=True, timeout=300)


def output_tokens(stderr):
    m = re.search(r"decode: (\d+) tokens", stderr)  # the tokens after the first
    return int(m.group(1)) + 1 if m else -1


def main() -> int:
    beamserve = sys.argv[1]
    errors = []

    def check(name, r, whole, prefix=None, max_tokens=None):
        if r.returncode != 0:
            errors.append(f"{name}: exit {r.returncode}: {r.stderr[-300:]}")
            return
        out = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout
        cut = max_tokens is not None and output_tokens(r.stderr) >= max_tokens
        if not re.fullmatch(whole, out) and not (cut and prefix and re.fullmatch(prefix, out)):
            errors.append(f"{name}: output {out!r} does not match")

    for seed in ("1", "2", "3"):
        r = generate(beamserve, "--prompt", "Answer: ", "--temperature", "1", "--seed", seed,
                     "--max-tokens", "20", "--grammar", 'root ::= ("yes" | "no") " " [0-9]{1,3}')
        check(f"grammar seed {seed}", r, r"(yes|no) [0-9]{1,3}")
    with tempfile.NamedTemporaryFile("w", suffix=".lark", delete=False) as f:
        f.write('start: item ("," item)*\nitem: INT | "x"\n%import common.INT\n')
        lark = f.name
    r = generate(beamserve, "--prompt", "List: ", "--temperature", "1", "--seed", "4",
                 "--max-tokens", "40", "--grammar-file", lark)
    check("grammar-file (Lark)", r, r"(\d+|x)(,(\d+|x))*", r"((\d+|x),)*(\d*|x)", 40)
    r = generate(beamserve, "--prompt", "x = ", "--max-tokens", "60", "--json-schema",
                 '{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}')
    if r.returncode != 0:
        errors.append(f"json-schema: exit {r.returncode}: {r.stderr[-300:]}")
    else:
        try:
            value = json.loads(r.stdout)
            if not isinstance(value, dict) or not isinstance(value.get("a"), int):
                errors.append(f"json-schema: {r.stdout!r} is not an object with an integer a")
        except json.JSONDecodeError:
            errors.append(f"json-schema: {r.stdout!r} is not JSON")
    r = generate(beamserve, "--prompt", "Code: ", "--regex", r"[A-Z]{3}-\d{2}")
    check("regex", r, r"[A-Z]{3}-\d{2}")

    for flags, message in (
            (["--grammar", "root ::= x", "--regex", "a"], "--grammar and --regex: give one"),
            (["--grammar", "root ::= x"], "--grammar: grammar line 1:10: rule 'root' refers to "
                                          "undefined rule 'x'"),
            (["--json-schema-file", "/nonexistent.json"], "--json-schema-file: cannot read"),
            (["--json-schema", "{"], "--json-schema: the schema is not valid JSON")):
        r = generate(beamserve, *flags)
        if r.returncode == 0 or message not in r.stderr:
            errors.append(f"{flags}: exit {r.returncode}, stderr {r.stderr[-200:]!r}")
    for e in errors:
        print("FAIL:", e)
    print(f"{len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
