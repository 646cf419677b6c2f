#!/usr/bin/env python3
# Run 327's GPU check of tensor parallelism on beam-nano: one server on one GPU, one split over two
# (--tp-size 2, NCCL), same binary. The golden prompts greedy (each text against the reference's
# continuation), four of them at once, a seeded sampled request; then a decode timing: 8 requests
# of 256 tokens, one at a time and all at once, on each server. Writes JSON to argv[2].
import json, os, subprocess, sys, time, urllib.request, concurrent.futures as cf

exe, out_path = sys.argv[1], sys.argv[2]
golden = json.load(open('models/beam-nano/golden/greedy.json'))
max_new = golden['decoding']['max_new_tokens']


def post(port, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}/v1/completions', json.dumps(body).encode(),
                                 {'content-type': 'application/json'})
    return json.load(urllib.request.urlopen(req, timeout=300))


def serve(port, extra):
    p = subprocess.Popen([exe, 'serve', '--model', 'models/beam-nano', '--device', 'cuda', '--port',
                          str(port), '--kv-budget-mb', '2048'] + extra,
                         stdout=subprocess.DEVNULL, stderr=open(f'{out_path}.{port}.log', 'w'))
    for _ in range(900):
        try:
            urllib.request.urlopen(f'http://127.0.0.1:{port}/health', timeout=1)
            return p
        except Exception:
            if p.poll() is not None:
                raise RuntimeError(f'server {extra} exited {p.returncode}')
            time.sleep(0.2)
    raise RuntimeError('server did not start')


def run(port):
    r = {}
    r['greedy'] = [post(port, dict(model='beam-nano', prompt=c['prompt'], max_tokens=max_new, temperature=0))
                   ['choices'][0]['text'] for c in golden['cases']]
    with cf.ThreadPoolExecutor(4) as ex:
        r['greedy_batched'] = list(ex.map(lambda c: post(port, dict(model='beam-nano', prompt=c['prompt'],
                                   max_tokens=max_new, temperature=0))['choices'][0]['text'], golden['cases'][:4]))
    r['sampled'] = post(port, dict(model='beam-nano', prompt='def add(a, b):', max_tokens=48,
                                   temperature=0.8, seed=7))['choices'][0]['text']
    long = dict(model='beam-nano', prompt='The history of', max_tokens=256, temperature=0, ignore_eos=True)
    post(port, long)  # warm (graphs)
    t = time.time()
    for _ in range(4):
        post(port, long)
    r['serial_tok_s'] = 4 * 256 / (time.time() - t)
    t = time.time()
    with cf.ThreadPoolExecutor(8) as ex:
        list(ex.map(lambda _: post(port, long), range(8)))
    r['batch8_tok_s'] = 8 * 256 / (time.time() - t)
    return r


result = {}
for name, port, extra in (('tp1', 8141, []), ('tp2', 8142, ['--tp-size', '2'])):
    p = serve(port, extra)
    try:
        result[name] = run(port)
    finally:
        p.terminate()
        p.wait(timeout=60)
    info = result[name]
    info['golden_equal'] = sum(a == c['generated_text'] for a, c in zip(info['greedy'], golden['cases']))
    print(name, 'golden equal', info['golden_equal'], 'of', len(golden['cases']),
          'serial %.1f tok/s, batch 8 %.1f tok/s' % (info['serial_tok_s'], info['batch8_tok_s']))
a, b = result['tp1'], result['tp2']
result['tp2_equals_tp1'] = {k: a[k] == b[k] for k in ('greedy', 'greedy_batched', 'sampled')}
print('tp2 equals tp1:', result['tp2_equals_tp1'])
json.dump(result, open(out_path, 'w'), indent=1)
