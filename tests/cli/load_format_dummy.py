#!/usr/bin/env python3
"""--load-format dummy (vLLM's and SGLang's): random weights of the model folder's config.json,
no checkpoint read. `generate` and `bench offline` run on them and repeat themselves; `run-batch`
(serve's engine, in process) answers with two tensor-parallel CPU ranks, each making its own
slice; `serve`'s /get_server_info says load_format "dummy"; a bad format and --merge-lora beside
dummy fail naming the flag.

usage: load_format_dummy.py BEAMSERVE (from the repository root)
"""
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

BIN = sys.argv[1]


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=300)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        # A folder with the config and tokenizer only: dummy weights need no checkpoint.
        model = f"{tmp}/nano-config"
        shutil.copytree("models/beam-nano", model,
                        ignore=shutil.ignore_patterns("*.safetensors", "*.index.json", "golden"))
        gen = ["generate", "--model", model, "--load-format", "dummy", "--tokens", "5,6,7",
               "--max-tokens", "6", "--threads", "1"]
        first, again = run(gen), run(gen)
        assert first.returncode == 0, first.stderr
        assert first.stdout == again.stdout and first.stdout.strip(), (first.stdout, again.stdout)
        plain = run(["generate", "--model", model, "--tokens", "5,6,7", "--max-tokens", "2"])
        assert plain.returncode != 0 and "model.safetensors" in plain.stderr, plain.stderr

        bench = run(["bench", "offline", "--model", model, "--load-format", "dummy", "--requests",
                     "2", "--prompt-len", "16", "--output-len", "4", "--threads", "1"])
        assert bench.returncode == 0, bench.stderr
        result = json.loads(bench.stdout[bench.stdout.index("{"):])
        assert result["requests"] == 2 and result["failed_requests"] == 0, result

        line = {"custom_id": "c", "url": "/v1/completions",
                "body": {"model": "nano", "prompt": "def f():", "max_tokens": 4,
                         "temperature": 0, "ignore_eos": True}}
        path_in, path_out = f"{tmp}/in.jsonl", f"{tmp}/out.jsonl"
        with open(path_in, "w") as f:
            f.write(json.dumps(line) + "\n")
        batch = run(["run-batch", "-i", path_in, "-o", path_out, "--model", model,
                     "--served-model-name", "nano", "--load-format", "dummy", "--tp-size", "2",
                     "--threads", "2"])
        assert batch.returncode == 0, batch.stderr
        with open(path_out) as f:
            out = json.loads(f.readline())
        body = out["response"]["body"]
        assert out["response"]["status_code"] == 200, out
        assert body["usage"]["completion_tokens"] == 4, body

        # serve reports what it serves: /get_server_info's load_format is "dummy".
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        server = subprocess.Popen([BIN, "serve", "--model", model, "--load-format", "dummy",
                                   "--port", str(port), "--threads", "1", "--max-running", "8"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            info = None
            for _ in range(120):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/get_server_info") as r:
                        info = json.loads(r.read())
                    break
                except OSError:
                    time.sleep(0.25)
            assert info is not None, "serve --load-format dummy never answered"
            assert info["load_format"] == "dummy", info["load_format"]
        finally:
            server.terminate()
            server.wait(timeout=30)

        bad = run(["generate", "--model", model, "--load-format", "pt", "--tokens", "1"])
        assert bad.returncode != 0 and "--load-format: expected auto, safetensors or dummy, got 'pt'" \
            in bad.stderr, bad.stderr
        merge = run(["run-batch", "-i", path_in, "-o", path_out, "--model", model,
                     "--load-format", "dummy", "--merge-lora", tmp])
        assert merge.returncode != 0 and "--merge-lora" in merge.stderr, merge.stderr
    print("load-format dummy: generate, bench offline, run-batch on two ranks; errors name the flag")


if __name__ == "__main__":
    main()
