#!/usr/bin/env python3
"""tools/gpu/server_smoke.py's comparisons against the reference's greedy continuation: equal
outputs pass; outputs that part where the reference's token is the GPU's runner-up within the
near-tie gap pass; a part at a clear choice, at a token the GPU did not rank second, or a shorter
output fails."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import server_smoke as smoke  # noqa: E402

failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def step(top, second, gap):  # one /generate logprobs entry: the top two ids, their logprob gap
    return {"top_logprobs": [{"token_id": top, "logprob": -0.1}, {"token_id": second, "logprob": -0.1 - gap}]}


ref = [1, 2, 3, 4]
expect(smoke.ids_match_reference([1, 2, 3, 4], [step(t, 9, 2.0) for t in ref], ref), "ids: equal")
near = [step(1, 9, 2.0), step(7, 2, 0.2), step(8, 9, 2.0), step(8, 9, 2.0)]
expect(smoke.ids_match_reference([1, 7, 8, 8], near, ref), "ids: part at a near tie, the reference second")
far = [step(1, 9, 2.0), step(7, 2, 0.8), step(8, 9, 2.0), step(8, 9, 2.0)]
expect(not smoke.ids_match_reference([1, 7, 8, 8], far, ref), "ids: part at a clear choice fails")
other = [step(1, 9, 2.0), step(7, 5, 0.2), step(8, 9, 2.0), step(8, 9, 2.0)]
expect(not smoke.ids_match_reference([1, 7, 8, 8], other, ref), "ids: reference token not second fails")
expect(not smoke.ids_match_reference([1, 2, 3], [step(t, 9, 2.0) for t in ref[:3]], ref), "ids: shorter fails")


def legacy(tokens, tops):  # /v1/completions' legacy logprobs (byte offsets from the completion)
    offsets, at = [], 0
    for t in tokens:
        offsets.append(at)
        at += len(t.encode())
    return {"tokens": tokens, "text_offset": offsets, "top_logprobs": tops}


ref_text = "def f(x):\n    return x"
same = legacy(["def", " f", "(x):", "\n    return x"], [{"def": -0.1, "x": -3.0}] * 4)
expect(smoke.text_matches_reference(ref_text, same, ref_text), "text: equal")
parted = legacy(["def", " g", "(y)"], [{"def": -0.1, "x": -3.0}, {" g": -0.5, " f": -0.7}, {"(y)": -0.1, "(": -2.0}])
expect(smoke.text_matches_reference("def g(y)", parted, ref_text), "text: part at a near tie, the reference second")
clear = legacy(["def", " g", "(y)"], [{"def": -0.1, "x": -3.0}, {" g": -0.1, " f": -0.9}, {"(y)": -0.1, "(": -2.0}])
expect(not smoke.text_matches_reference("def g(y)", clear, ref_text), "text: part at a clear choice fails")
expect(not smoke.text_matches_reference("def", legacy(["def"], [{"def": -0.1, "x": -3.0}]), ref_text),
       "text: shorter fails")
print(f"{len(failures)} failed")
sys.exit(1 if failures else 0)
