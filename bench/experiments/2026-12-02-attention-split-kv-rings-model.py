#!/usr/bin/env python3
"""Randomized model of the split-K/V-ring prefill kernel's handshakes
(bench/experiments/2026-12-02-attention-split-kv-rings-run129.patch): the loader warp, the
two consumer warpgroups and the store warps as coroutines over mbarriers (phase counting,
parity waits) and named barriers, run under random schedules. Reports a deadlock (nothing can
run) or a parity wait that the barrier already passed by two phases (a phase overrun: the
hardware would wait for the wrong phase)."""
import random, sys

STAGES = 2

class MBar:
    def __init__(self, name, count):
        self.name, self.count, self.pending, self.phase = name, count, count, 0
    def arrive(self, n):
        self.pending -= n
        assert self.pending >= 0, f"{self.name}: too many arrivals"
        if self.pending == 0:
            self.phase += 1
            self.pending = self.count

class NamedBar:
    def __init__(self, count):
        self.count, self.arrived, self.generation = count, 0, 0
    def arrive(self, n):
        self.arrived += n
        gen = self.generation
        if self.arrived >= self.count:
            self.arrived -= self.count
            self.generation += 1
        return gen  # the generation this arrival belongs to

def run(items, seed, broken=False):
    rng = random.Random(seed)
    bars = {}
    def mb(name, count):
        bars.setdefault(name, MBar(name, count)); return bars[name]
    for s in range(STAGES):
        mb(f"k_full{s}", 32); mb(f"v_full{s}", 32); mb(f"k_empty{s}", 256); mb(f"v_empty{s}", 256)
    mb("q_full", 32); mb("q_empty", 256)
    for wg in range(2):
        mb(f"out_full{wg}", 128); mb(f"out_empty{wg}", 96)
    named = {i: NamedBar(256 if i >= 3 else 128) for i in range(1, 5)}
    expect = {}  # (bar, logical phase) checks

    def wait(name, parity, logical=None):
        # blocks until phase with this parity completed; logical: the phase index meant
        b = bars[name]
        while True:
            if logical is not None and b.phase >= logical + 2:
                raise RuntimeError(f"phase overrun on {name}: waiting for phase {logical}, barrier at {b.phase}")
            if b.phase % 2 != parity:
                return
            yield "spin"

    def loader():
        g0 = 0
        for item, (n, rows) in enumerate(items):
            for step in range(2 * n + 1):
                if step == 1:
                    if item > 0:
                        yield from wait("q_empty", (item - 1) & 1, item - 1)
                    bars["q_full"].arrive(32); yield; continue
                v = step % 2 == 0 and step > 0
                tile = 0 if step == 0 else (step - 1) // 2
                g = g0 + tile
                kind = "v" if v else "k"
                yield from wait(f"{kind}_empty{g % STAGES}", ((g // STAGES) & 1) ^ 1, g // STAGES - 1)
                bars[f"{kind}_full{g % STAGES}"].arrive(32); yield
            g0 += n

    def bar_sync(i, n):
        gen = named[i].arrive(n)
        while named[i].generation <= gen:
            yield "spin"
    def bar_arrive(i, n):
        named[i].arrive(n); yield

    def consumer(wg):
        own, other = 3 + wg, 4 - wg
        dumps, g0 = 0, 0
        if wg == 1:
            yield from bar_arrive(3, 128)
        # first scores
        yield from wait("q_full", 0, 0)
        yield from bar_sync(3 + wg, 128)
        yield from wait("k_full0", 0, 0)
        yield from bar_arrive(4 - wg, 128)
        for item, (n, rows) in enumerate(items):
            has_next = item + 1 < len(items)
            bars[f"k_empty{g0 % STAGES}"].arrive(128)
            if n == 1: bars["q_empty"].arrive(128)
            yield
            for tile in range(n - 1):
                g = g0 + tile
                yield from bar_sync(own, 128)
                yield from wait(f"v_full{g % STAGES}", (g // STAGES) & 1, g // STAGES)
                yield from wait(f"k_full{(g+1) % STAGES}", ((g+1) // STAGES) & 1, (g+1) // STAGES)
                yield from bar_arrive(other, 128)
                bars[f"v_empty{g % STAGES}"].arrive(128)
                bars[f"k_empty{(g+1) % STAGES}"].arrive(128)
                if tile + 2 == n: bars["q_empty"].arrive(128)
                yield
            g = g0 + n - 1
            if has_next:
                yield from wait("q_full", (item + 1) & 1, item + 1)
                yield from wait(f"k_full{(g+1) % STAGES}", ((g+1) // STAGES) & 1, (g+1) // STAGES)
            yield from bar_sync(own, 128)
            yield from wait(f"v_full{g % STAGES}", (g // STAGES) & 1, g // STAGES)
            yield from bar_arrive(other, 128)
            bars[f"v_empty{g % STAGES}"].arrive(128); yield
            if wg * 64 < rows:
                if not broken:
                    yield from wait(f"out_empty{wg}", (dumps & 1) ^ 1, dumps - 1)
                dumps += 1
                bars[f"out_full{wg}"].arrive(128); yield
            g0 += n
            if has_next:
                yield from bar_sync(1 + wg, 128)
        if wg == 0:
            yield from bar_sync(3, 128)

    def store():
        taken = [0, 0]
        for item, (n, rows) in enumerate(items):
            for wg in range(2):
                if rows - wg * 64 <= 0: break
                yield from wait(f"out_full{wg}", taken[wg] & 1, taken[wg])
                taken[wg] += 1
                bars[f"out_empty{wg}"].arrive(96); yield

    agents = {"loader": loader(), "store": store(), "wg0": consumer(0), "wg1": consumer(1)}
    live = dict(agents)
    stuck = 0
    while live:
        name = rng.choice(sorted(live))
        try:
            r = next(live[name])
        except StopIteration:
            del live[name]
            stuck = 0
            continue
        stuck = stuck + 1 if r == "spin" else 0
        if stuck > 20000:
            raise RuntimeError("deadlock: " + ", ".join(sorted(live)))
    return True

if __name__ == "__main__":
    rng = random.Random(1)
    for trial in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3000):
        items = [(rng.randint(1, 6), rng.choice([128, 128, 128, rng.randint(1, 127)]))
                 for _ in range(rng.randint(1, 8))]
        run(items, trial)
    print("ok: no deadlock or phase overrun")
    caught = 0
    for trial in range(300):
        items = [(rng.randint(1, 3), 128) for _ in range(rng.randint(2, 8))]
        try:
            run(items, trial, broken=True)
        except (RuntimeError, AssertionError) as e:
            caught += 1
            msg = str(e)
    print(f"broken variant (no out_empty wait): {caught} of 300 schedules caught, e.g. {msg}")
