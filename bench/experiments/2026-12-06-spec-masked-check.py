#!/usr/bin/env python3
# Run 326's GPU check of speculative decoding under masks and of the n-gram corpus on beam-nano:
# one server plain, one with SGLang's NGRAM flags (drafts, the corpus on), same binary, --device
# cuda. Greedy /v1/completions requests with guided_json (a person schema, the prompt showing two
# people), guided_regex, allowed_token_ids and bad_words, each sent twice (the second time the
# corpus holds the first answer); prints whether each text matches the plain server's, the spec
# server's /metrics counters and each server's wall time. Writes JSON to argv[2].
import json, subprocess, sys, time, urllib.request

exe, out_path = sys.argv[1], sys.argv[2]
people = ('people = [\n  {"name": "Ada", "age": 36, "langs": ["c++", "go"], "active": true},\n'
          '  {"name": "Bob", "age": 41, "langs": ["python"], "active": false},\n  ')
schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
          "age": {"type": "integer"}, "langs": {"type": "array", "items": {"enum": ["c++", "python", "go"]},
          "maxItems": 3}, "active": {"type": "boolean"}}, "required": ["name", "age", "langs", "active"]}
fn = 'def scale(values, factor):\n    out = []\n    for v in values:\n        out.append(v * factor)\n    return out\n\n'
cases = [
    dict(prompt=people, guided_json=schema, max_tokens=120),
    dict(prompt='Three dates: 2024-01-05, 2023-11-30, ', guided_regex=r'(\d{4}-\d{2}-\d{2}, ){2}\d{4}-\d{2}-\d{2}', max_tokens=60),
    dict(prompt=fn + fn + 'def scale(', bad_words=['print'], max_tokens=96),
    dict(prompt='The capital of France is', max_tokens=64),
]


def post(port, path, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}{path}', json.dumps(body).encode(),
                                 {'content-type': 'application/json'})
    return json.load(urllib.request.urlopen(req, timeout=120))


def serve(port, extra):
    p = subprocess.Popen([exe, 'serve', '--model', 'models/beam-nano', '--device', __import__('os').environ.get('DEVICE', 'cuda'), '--port',
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
    for repeat in range(2):
        for c in cases:
            try:
                r = post(port, '/v1/completions', dict(model='beam-nano', temperature=0, **c))
                out.append(r['choices'][0]['text'])
            except Exception as e:  # an HTTP error: its body
                out.append('ERROR ' + (e.read().decode() if hasattr(e, 'read') else str(e)))
    return out, time.time() - start


result = {}
spec = ['--speculative-algorithm', 'NGRAM', '--speculative-num-draft-tokens', '5',
        '--speculative-ngram-max-match-window-size', '4', '--speculative-ngram-capacity', '100000']
for name, port, extra in (('plain', 8131, []), ('spec', 8132, spec)):
    p = serve(port, extra)
    try:
        result[name], result[name + '_s'] = texts(port)
        metrics = urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics').read().decode()
        result[name + '_metrics'] = [l for l in metrics.splitlines() if l.startswith('beamserve_spec_decode_num') and 'per_pos' not in l or l.startswith('beamserve_engine_steps_total')]
    finally:
        p.terminate()
        p.wait()
same = [a == b for a, b in zip(result['plain'], result['spec'])]
result['same'] = same
json.dump(result, open(out_path, 'w'), indent=1)
print('same text', sum(same), 'of', len(same), same)
for a, b in zip(result['plain'], result['spec']):
    if a != b: print('plain', repr(a[:120]), '\nspec ', repr(b[:120]))
print('first answers', [t[:60] for t in result['plain'][:len(cases)]])
print('wall plain %.2f s spec %.2f s' % (result['plain_s'], result['spec_s']))
print('\n'.join(result['spec_metrics'] + result['plain_metrics']))
