#!/usr/bin/env python3
"""`beamserve run-batch` (vLLM's): an OpenAI batch file answered in process, one line out per line
in and in order; the answers equal a live server's (greedy), repeated requests agree, lines that
cannot be sent name their line and field, and bad flags fail with the usage.

usage: run_batch.py BEAMSERVE (from the repository root)
"""
import json
import subprocess
import sys
import tempfile

BIN = sys.argv[1]
MODEL = ["--model", "models/tiny-beam", "--tokenizer", "tests/server/fixtures/tiny-chat",
         "--served-model-name", "tiny-chat", "--threads", "1"]
CHAT = {"model": "tiny-chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
        "temperature": 0, "ignore_eos": True}
LINES = [
    {"custom_id": "chat", "method": "POST", "url": "/v1/chat/completions", "body": CHAT},
    {"custom_id": "text", "url": "/v1/completions",
     "body": {"model": "tiny-chat", "prompt": "hello", "max_tokens": 3, "temperature": 0}},
    "not json",
    {"custom_id": "emb", "url": "/v1/embeddings", "body": {"model": "tiny-chat", "input": [3, 4, 5]}},
    {"custom_id": "rank", "url": "/v1/rerank",
     "body": {"model": "tiny-chat", "query": "hello", "documents": ["a", "hello there"]}},
    {"custom_id": "bad", "url": "/v1/completions",
     "body": {"model": "tiny-chat", "prompt": "x", "temperature": -1}},
    {"custom_id": "admin", "url": "/flush_cache", "body": {}},
    {"custom_id": "stream", "url": "/v1/completions", "body": {"model": "tiny-chat", "prompt": "x",
                                                              "stream": True}},
    {"url": "/v1/completions", "body": {}},
    {"custom_id": "chat again", "method": "POST", "url": "/v1/chat/completions", "body": CHAT},
]


def run(args, stdin=None):
    return subprocess.run([BIN, "run-batch"] + args, input=stdin, capture_output=True, text=True,
                          timeout=300)


def main():
    text = "\n".join(l if isinstance(l, str) else json.dumps(l) for l in LINES) + "\n\n"
    with tempfile.TemporaryDirectory() as tmp:
        path_in, path_out = f"{tmp}/in.jsonl", f"{tmp}/out.jsonl"
        with open(path_in, "w") as f:
            f.write(text)
        r = run(["-i", path_in, "-o", path_out] + MODEL + ["--max-in-flight", "2"])
        assert r.returncode == 0, r.stderr
        with open(path_out) as f:
            out = [json.loads(l) for l in f]
    assert len(out) == len(LINES), out
    by_id = [o["custom_id"] for o in out]
    assert by_id == ["chat", "text", None, "emb", "rank", "bad", "admin", "stream", None,
                     "chat again"], by_id
    for o in out:
        assert o["id"].startswith("batch_req_"), o
    ok = {o["custom_id"]: o["response"] for o in out if o["response"] and o["response"]["status_code"] == 200}
    assert set(ok) == {"chat", "text", "emb", "rank", "chat again"}, out
    chat = ok["chat"]["body"]
    assert chat["object"] == "chat.completion" and chat["usage"]["completion_tokens"] == 5, chat
    assert ok["chat again"]["body"]["choices"][0]["message"] == chat["choices"][0]["message"]
    assert ok["text"]["body"]["object"] == "text_completion"
    assert len(ok["emb"]["body"]["data"][0]["embedding"]) > 0
    assert [x["index"] for x in ok["rank"]["body"]["results"]] in ([0, 1], [1, 0])
    bad = out[5]
    assert bad["response"]["status_code"] == 400, bad
    assert bad["response"]["body"]["error"]["param"] == "temperature", bad
    assert bad["error"] is None
    for o, line, words in [(out[2], 3, "not JSON"), (out[6], 7, "/flush_cache"),
                           (out[7], 8, "body.stream"), (out[8], 9, "custom_id")]:
        assert o["response"] is None, o
        assert o["error"]["message"].startswith(f"line {line}: "), o
        assert words in o["error"]["message"], o

    # stdin to stdout; the same answers as a file.
    r = run(["-i", "-", "-o", "-"] + MODEL, stdin=json.dumps(LINES[0]) + "\n")
    assert r.returncode == 0, r.stderr
    piped = json.loads(r.stdout.strip())
    assert piped["response"]["body"]["choices"][0]["message"] == chat["choices"][0]["message"]

    # Flags.
    r = run(MODEL)
    assert r.returncode == 2 and "--input-file (-i)" in r.stderr, r.stderr
    r = run(["-i", "-", "-o", "-", "--max-in-flight", "0"] + MODEL)
    assert r.returncode == 2 and "--max-in-flight" in r.stderr, r.stderr
    r = run(["-i", "/nonexistent/in.jsonl", "-o", "-"] + MODEL)
    assert r.returncode == 1 and "cannot read --input-file" in r.stderr, r.stderr
    print("run_batch: ok")


if __name__ == "__main__":
    main()
