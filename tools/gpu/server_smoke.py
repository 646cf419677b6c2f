#!/usr/bin/env python3
"""The HTTP server on the GPU, driven over raw HTTP with the GPU machine's own python (a quick
check inside run_tests.sh; the official SDK suites need node carried in: run_client_tests.sh):
`beamserve serve --device cuda` on models/beam-nano must reproduce the reference's greedy
continuations through /generate and /v1/completions (up to a near tie on the GPU: its other summation orders move this model's logits
by up to ~0.5, so where the reference's token is the GPU's runner-up within 0.5 the continuations
may part there, issue 7's criterion), stream the same text, answer chat, responses and messages,
count tokens, keep a response_format's JSON schema (with a date format), a guided_choice, a
guided_regex and a named tool call's parameters, and end with no request left in the engine
(/metrics). Exit 0 when every check passes.

    python3 tools/gpu/server_smoke.py BIN_DIR [DEVICE]     # from the repo root; DEVICE: cuda (default) or cpu
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.request

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def post(base, path, body, stream=False):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as r:
        raw = r.read().decode()
    if not stream:
        return json.loads(raw)
    return [json.loads(line[6:]) for line in raw.splitlines() if line.startswith("data: {")]


NEAR_TIE = 0.5  # largest top-1/top-2 logprob gap at which the GPU may pick the reference's runner-up


def ids_match_reference(ids, logprobs, ref):
    """/generate's greedy ids against the reference's: equal, or equal up to a step where the
    reference's token is the GPU's runner-up within NEAR_TIE (nothing after it is compared)."""
    for i, (got, want) in enumerate(zip(ids, ref)):
        if got != want:
            top = logprobs[i]["top_logprobs"]
            return len(top) > 1 and top[1]["token_id"] == want and top[0]["logprob"] - top[1]["logprob"] < NEAR_TIE
    return len(ids) == len(ref)


def text_matches_reference(text, logprobs, ref):
    """/v1/completions' greedy text against the reference's: equal, or equal up to a token where
    the reference goes on with the GPU's runner-up within NEAR_TIE (legacy logprobs: token strings,
    their byte offsets and the top two)."""
    if text == ref:
        return True
    ref = ref.encode()
    for tok, offset, top in zip(logprobs["tokens"], logprobs["text_offset"], logprobs["top_logprobs"]):
        if ref[offset:offset + len(tok.encode())] != tok.encode():
            ranked = sorted(top.items(), key=lambda kv: -kv[1])
            return (len(ranked) > 1 and ranked[1][0] != "" and ref.startswith(ranked[1][0].encode(), offset)
                    and ranked[0][1] - ranked[1][1] < NEAR_TIE)
    return False


def requests_running(base, settle_s=10.0):
    """The engine's running requests from /metrics, polled until 0 or settle_s pass: a response
    can reach the client just before the engine frees its request (seen on a loaded machine)."""
    deadline = time.time() + settle_s
    while True:
        metrics = urllib.request.urlopen(base + "/metrics", timeout=10).read().decode()
        m = re.search(r"^beamserve_requests_running\S* (\S+)$", metrics, re.M)
        running = 0 if m is None else float(m.group(1))
        if running == 0 or time.time() > deadline:
            return running
        time.sleep(0.05)


def start(binary, device):
    proc = subprocess.Popen([binary, "serve", "--device", device, "--model", "models/beam-nano", "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    port = None
    while time.time() < deadline and port is None:
        line = proc.stderr.readline()
        if not line and proc.poll() is not None:
            sys.exit("server exited: " + str(proc.returncode))
        sys.stderr.write(line)
        m = re.search(r"listening on http://[^:]+:(\d+)", line)
        port = int(m.group(1)) if m else None
    base = f"http://127.0.0.1:{port}"
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(base + "/health", timeout=5).status == 200:
                return proc, base
        except Exception:
            time.sleep(0.2)
    sys.exit("server not healthy in 120 s")


def main():
    binary = os.path.join(sys.argv[1] if len(sys.argv) > 1 else "build/gpu-bundle/bin", "beamserve")
    device = sys.argv[2] if len(sys.argv) > 2 else "cuda"
    golden = json.load(open("models/beam-nano/golden/greedy.json"))
    proc, base = start(binary, device)
    try:
        limit = golden["decoding"]["max_new_tokens"]
        stops = golden["decoding"]["stop_token_ids"]
        texts = []  # each case's greedy completion text
        for c in golden["cases"]:
            g = post(base, "/generate", {"input_ids": c["prompt_ids"], "max_tokens": limit, "temperature": 0,
                                         "logprobs": True, "top_logprobs": 2, "stop_token_ids": stops})["choices"][0]
            check(ids_match_reference(g["token_ids"], g["logprobs"], c["generated_ids"]),
                  f"generate greedy = reference up to a GPU near tie ({c['source']})")
            r = post(base, "/v1/completions", {"prompt": c["prompt"], "max_tokens": limit, "temperature": 0,
                                               "logprobs": 2})["choices"][0]
            check(text_matches_reference(r["text"], r["logprobs"], c["generated_text"]),
                  f"completions greedy = reference up to a GPU near tie ({c['source']})")
            texts.append(r["text"])
        c = golden["cases"][0]
        chunks = post(base, "/v1/completions", {"prompt": c["prompt"], "max_tokens": limit, "temperature": 0,
                                                "stream": True}, stream=True)
        check("".join(ch["choices"][0]["text"] for ch in chunks if ch["choices"]) == texts[0],
              "streamed completion concatenates to the plain one")
        batch = [post(base, "/v1/completions", {"prompt": c["prompt"], "max_tokens": limit, "temperature": 0.8,
                                                 "seed": 7}) for _ in range(2)]
        check(batch[0]["choices"][0]["text"] == batch[1]["choices"][0]["text"], "same seed, same sampled text")
        chat = post(base, "/v1/chat/completions", {"messages": [{"role": "user", "content": "def add(a, b):"}],
                                                   "max_tokens": 24, "temperature": 0, "logprobs": True,
                                                   "top_logprobs": 3})
        choice = chat["choices"][0]
        check(isinstance(choice["message"]["content"], str) and chat["usage"]["completion_tokens"] > 0, "chat answers")
        lp = choice["logprobs"]["content"]
        check(len(lp) == chat["usage"]["completion_tokens"] and all(len(t["top_logprobs"]) == 3 for t in lp),
              "chat logprobs with 3 alternatives per token")
        resp = post(base, "/v1/responses", {"input": "def add(a, b):", "max_output_tokens": 16, "temperature": 0})
        check(resp.get("status") in ("completed", "incomplete") and resp["output"][0]["content"][0]["text"],
              "responses answers")
        msg = post(base, "/v1/messages", {"max_tokens": 16, "temperature": 0,
                                          "messages": [{"role": "user", "content": "class Stack:"}]})
        check(msg["type"] == "message" and msg["content"][0]["type"] == "text", "messages answers")
        count = post(base, "/v1/messages/count_tokens", {"messages": [{"role": "user", "content": "class Stack:"}]})
        check(count["input_tokens"] == msg["usage"]["input_tokens"], "count_tokens = messages input tokens")
        schema = {"type": "object", "required": ["name", "language", "since"],
                  "properties": {"name": {"type": "string", "maxLength": 16},
                                 "language": {"enum": ["c++", "python", "go"]},
                                 "since": {"type": "string", "format": "date"}}}
        fmt = {"type": "json_schema", "json_schema": {"name": "fn", "schema": schema}}
        structured = post(base, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "A function as JSON"}], "max_tokens": 300,
            "temperature": 0.8, "seed": 3, "n": 4, "response_format": fmt})
        values = [json.loads(c["message"]["content"]) for c in structured["choices"]
                  if c["finish_reason"] == "stop"]
        check(len(values) == 4 and all(list(v) == ["name", "language", "since"] and v["language"] in
                                       ("c++", "python", "go") and re.fullmatch(
                                           r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", v["since"])
                                       for v in values),
              "response_format json_schema: 4 sampled choices are JSON of the schema (a date format)")
        colors = ["red", "green", "light blue"]
        guided = post(base, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "A color"}], "max_tokens": 20,
            "temperature": 0.8, "seed": 4, "n": 3, "guided_choice": colors,
            "chat_template_kwargs": {"enable_thinking": False}})
        check(all(c["finish_reason"] == "stop" and c["message"]["content"] in colors
                  for c in guided["choices"]), "guided_choice: 3 sampled choices are one of the strings")
        code = post(base, "/v1/completions", {"prompt": "Code:", "max_tokens": 20, "temperature": 0.8,
                                              "seed": 6, "guided_regex": "[A-Z]{3}-\\d{2}"})
        check(re.fullmatch(r"[A-Z]{3}-\d{2}", code["choices"][0]["text"]) is not None,
              "guided_regex: the completion matches the regex")
        tool = {"type": "function", "function": {"name": "run", "parameters": {
            "type": "object", "required": ["lang", "lines"],
            "properties": {"lang": {"enum": ["py", "go"]}, "lines": {"type": "integer"}}}}}
        call = post(base, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "Run it"}], "max_tokens": 120, "temperature": 0.8,
            "seed": 5, "tools": [tool], "tool_choice": {"type": "function", "function": {"name": "run"}}})
        calls = call["choices"][0]["message"].get("tool_calls") or []
        args = json.loads(calls[0]["function"]["arguments"]) if calls else {}
        check(call["choices"][0]["finish_reason"] == "tool_calls" and args.get("lang") in ("py", "go")
              and isinstance(args.get("lines"), int), "named tool_choice: the call is JSON of its parameters")
        check(requests_running(base) == 0, "no request left running")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"{len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
