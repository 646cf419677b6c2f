#!/usr/bin/env python3
# Run 320's GPU check of speculative decoding on beam-nano: one server plain, one with n-gram
# drafts (same binary, --device cuda); the golden prompts and two repetitive code prompts, greedy
# and seeded-sampled, through /v1/completions; prints whether each text matches, the spec
# server's /metrics counters and the wall time of each server's requests. Writes JSON to argv[2].
import json, subprocess, sys, time, urllib.request

exe, out_path = sys.argv[1], sys.argv[2]
golden = json.load(open('models/beam-nano/golden/greedy.json'))
fn = 'def scale(values, factor):\n    out = []\n    for v in values:\n        out.append(v * factor)\n    return out\n\n'
prompts = [c['prompt'] for c in golden['cases']] + [fn + fn + 'def scale(', fn + 'class Point:\n    def __init__(self']
spec = json.dumps({'method': 'ngram', 'num_speculative_tokens': 4, 'prompt_lookup_max': 4, 'prompt_lookup_min': 1})


def post(port, path, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}{path}', json.dumps(body).encode(),
                                 {'content-type': 'application/json'})
    return json.load(urllib.request.urlopen(req, timeout=120))


def serve(port, extra):
    p = subprocess.Popen([exe, 'serve', '--model', 'models/beam-nano', '--device', 'cuda', '--port',
                          str(port), '--kv-budget-mb', '2048'] + extra,
                         stdout=subprocess.DEVNULL, stderr=open(f'{out_path}.{port}.log', 'w'))
    for _ in range(600):
        try:
            urllib.request.urlopen(f'http://127.0.0.1:{port}/health', timeout=1)
            return p
        except Exception:
            time.sleep(0.2)
    raise RuntimeError('server did not start')


def texts(port):
    start = time.time()
    out = []
    for p in prompts:
        for body in ({'temperature': 0}, {'temperature': 0.8, 'seed': 3}):
            r = post(port, '/v1/completions', dict(model='beam-nano', prompt=p, max_tokens=96, **body))
            out.append(r['choices'][0]['text'])
    return out, time.time() - start


result = {}
for name, port, extra in (('plain', 8131, []), ('spec', 8132, ['--speculative-config', spec])):
    p = serve(port, extra)
    try:
        result[name], result[name + '_s'] = texts(port)
        metrics = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics').read().decode()
        result[name + '_metrics'] = [l for l in metrics.splitlines() if l.startswith('beamserve_spec_decode') or l.startswith('beamserve_engine_steps_total')]
    finally:
        p.terminate()
        p.wait()
same = [a == b for a, b in zip(result['plain'], result['spec'])]
result['same'] = same
json.dump(result, open(out_path, 'w'), indent=1)
print('same text', sum(same), 'of', len(same), same)
print('wall plain %.2f s spec %.2f s' % (result['plain_s'], result['spec_s']))
print('\n'.join(result['spec_metrics'] + result['plain_metrics']))
