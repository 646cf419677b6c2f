// CUDA lora_add against the CPU reference and an fp64 one, on both paths (up to 256 tokens the
// cluster kernel; past that, outputs of 16-byte words and r % 4 == 0 on tensor cores, the others
// still on the cluster kernel). The fp32 sums run in another order, so an updated output may differ
// from the CPU's by a bf16 rounding: each is within half a bf16 ulp of the exact result plus the
// a-priori bound of its fp32 sums' rounding error (which only matters where out + delta cancels),
// and at least 90% are bit-equal to the CPU's (printed); tokens without a slot, and columns outside
// [col0, col0 + n), keep their input bits. A CUDA graph replays with the slots written after its
// capture, and within each path a token's bits do not depend on the batch. Several modules in one
// call give each module the bits of its own call (ranks up to 512, where the modules no longer fit
// one launch; past 256 tokens with modules on both paths).
#include "kernels/api/lora.h"

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda_test_util.h"

namespace beam {
namespace {

struct LoraCase {
  int64_t T, in, r, n, width, col0, S;
};

// Inputs of one case: activations ~1, factors scaled so that each delta is ~1 as well.
struct LoraData {
  HostTensor x, a, b, scale, slots, out;
};

// Slots -1, 0, …, S - 1 in turn (a lone token gets slot 1 % S).
HostTensor mixed_slots(int64_t T, int64_t S, int64_t step) {
  HostTensor slots(DType::kI32, {T});
  for (int64_t t = 0; t < T; ++t)
    slots.as<int32_t>()[t] = static_cast<int32_t>((t * step + 3) % (S + 1)) - 1;
  if (T == 1) slots.as<int32_t>()[0] = static_cast<int32_t>(1 % S);
  return slots;
}

LoraData make_lora(const LoraCase& c, std::mt19937& rng) {
  LoraData d;
  d.x = test::random_bf16({c.T, c.in}, rng, 1.0f);
  d.a = test::random_bf16({c.S, c.r, c.in}, rng, 1.0f / std::sqrt(static_cast<float>(c.in)));
  d.b = test::random_bf16({c.S, c.n, c.r}, rng, 1.0f / std::sqrt(static_cast<float>(c.r)));
  d.scale = HostTensor(DType::kF32, {c.S});
  for (int64_t s = 0; s < c.S; ++s) d.scale.as<float>()[s] = 0.5f + 0.75f * static_cast<float>(s);
  d.slots = mixed_slots(c.T, c.S, 7);
  d.out = test::random_bf16({c.T, c.width}, rng, 1.0f);
  return d;
}

class CudaLora : public test::CudaTest {
 protected:
  LoraStack upload_stack(const LoraData& d) { return {upload(d.a), upload(d.b), upload(d.scale)}; }

  // The CPU reference's out for d's inputs and `slots`.
  HostTensor cpu_result(const LoraCase& c, const LoraData& d, const HostTensor& slots) {
    HostTensor want = test::copy_of(d.out);
    lora_add(cpu.one, d.x.view, {d.a.view, d.b.view, d.scale.view}, slots.view, want.view, c.col0);
    return want;
  }

  // got against the CPU's want and the exact result: bits of `before` where nothing is added;
  // elsewhere |got - exact| <= ulp(got) / 2 + (in + r + 2) · 2^-24 · Σ|terms| (recursive fp32
  // summation's bound over both sums; the bound on the shrink's error is carried through B).
  void expect_close(const LoraCase& c, const LoraData& d, const HostTensor& slots,
                    const HostTensor& want, const HostTensor& got, const char* what) {
    int64_t changed = 0, far = 0, updated = 0, equal = 0;
    std::vector<double> h(static_cast<size_t>(c.r)), h_abs(static_cast<size_t>(c.r));
    const double gamma = static_cast<double>(c.in + c.r + 2) * std::ldexp(1.0, -24);
    for (int64_t t = 0; t < c.T; ++t) {
      const int32_t s = slots.as<int32_t>()[t];
      if (s != kNoLoraSlot) {
        const double scale = d.scale.as<float>()[s];
        for (int64_t j = 0; j < c.r; ++j) {
          double sum = 0, sum_abs = 0;
          for (int64_t i = 0; i < c.in; ++i) {
            const double p = static_cast<double>(to_float(d.x.as<bf16>()[t * c.in + i])) *
                             to_float(d.a.as<bf16>()[(s * c.r + j) * c.in + i]);
            sum += p;
            sum_abs += std::fabs(p);
          }
          h[j] = scale * sum;
          h_abs[j] = std::fabs(scale) * sum_abs;
        }
      }
      for (int64_t col = 0; col < c.width; ++col) {
        const int64_t i = t * c.width + col;
        const bf16 g = got.as<bf16>()[i], before = d.out.as<bf16>()[i];
        if (s == kNoLoraSlot || col < c.col0 || col >= c.col0 + c.n) {
          changed += g.bits != before.bits;
          continue;
        }
        double exact = to_float(before), magnitude = 0;
        for (int64_t j = 0; j < c.r; ++j) {
          const double bj = to_float(d.b.as<bf16>()[(s * c.n + col - c.col0) * c.r + j]);
          exact += bj * h[j];
          magnitude += std::fabs(bj) * h_abs[j];
        }
        ++updated;
        equal += g.bits == want.as<bf16>()[i].bits;
        const double err = std::fabs(static_cast<double>(to_float(g)) - exact);
        const double allowed = test::bf16_ulp(to_float(g)) / 2 + gamma * magnitude;
        if (err > allowed && far++ < 3) {
          ADD_FAILURE() << "token " << t << " column " << col << ": got " << to_float(g) << ", CPU "
                        << to_float(want.as<bf16>()[i]) << ", exact " << exact << " (error " << err
                        << " > " << allowed << ")";
        }
      }
    }
    EXPECT_EQ(changed, 0) << "outputs that must keep their bits";
    EXPECT_EQ(far, 0) << "outputs off the exact result by more than the bound";
    const double exact = updated == 0 ? 1.0 : double(equal) / double(updated);
    if (updated >= 1000) {
      EXPECT_GE(exact, 0.9);
    }
    std::printf("lora_add %s T=%lld in=%lld r=%lld n=%lld: %.4f of %lld bit-equal to the CPU\n",
                what, static_cast<long long>(c.T), static_cast<long long>(c.in),
                static_cast<long long>(c.r), static_cast<long long>(c.n), exact,
                static_cast<long long>(updated));
  }

  void check(const LoraCase& c) {
    SCOPED_TRACE(::testing::Message() << "T=" << c.T << " in=" << c.in << " r=" << c.r << " n="
                                      << c.n << " width=" << c.width << " col0=" << c.col0);
    const LoraData d = make_lora(c, rng_);
    const HostTensor want = cpu_result(c, d, d.slots);
    const TensorView out = upload(d.out);
    lora_add(gpu, upload(d.x), upload_stack(d), upload(d.slots), out, c.col0);
    expect_close(c, d, d.slots, want, download(out), "eager");
  }

  std::mt19937 rng_{2024};
};

TEST_F(CudaLora, MatchesCpu) {
  for (int64_t T : {1, 7, 64, 300})
    for (int64_t r : {1, 8, 16, 64}) {
      check({T, 64, r, 96, 160, 40, 3});        // a slice of a wider output
      check({T, 1024, r, 1000, 1000, 0, 3});    // the whole output
      check({T, 1024, r, 1000, 1200, 136, 3});  // a slice at an offset that is no multiple of 8
    }
}

TEST_F(CudaLora, OddWidthsAndRanks) {
  check({5, 1001, 12, 333, 400, 7, 3});    // scalar loads of x, A and B
  check({9, 1001, 16, 64, 64, 0, 2});      // scalar x and A, 8-wide B
  check({9, 1024, 5, 64, 64, 0, 2});       // 8-wide x and A, scalar B
  check({17, 256, 512, 200, 256, 50, 3});  // the largest rank the kernel takes
  check({6, 24, 8, 40, 40, 0, 2});         // 3 packs of x: most of the cluster's slices empty
  check({300, 1001, 12, 333, 400, 7, 3});  // past 256 tokens on the cluster kernel (odd widths)
  check({300, 1024, 6, 64, 64, 0, 2});     // and r % 4 != 0
}

TEST_F(CudaLora, BeamWidths) {
  BEAM_SKIP_UNLESS_OPTIMIZED();
  check({33, 5120, 64, 6144, 6144, 0, 4});     // q_proj
  check({3, 17408, 16, 5120, 5120, 0, 2});     // dense down_proj
  check({2, 5120, 16, 151936, 151936, 0, 2});  // lm_head
  check({300, 5120, 16, 6144, 6144, 0, 4});    // q_proj of a prefill chunk (tensor cores)
}

// Without any slot, or with every token on one slot, the same guarantees hold.
TEST_F(CudaLora, UniformSlots) {
  const LoraCase c{40, 512, 16, 300, 300, 0, 3};
  LoraData d = make_lora(c, rng_);
  for (int32_t slot : {kNoLoraSlot, 0, 2}) {
    SCOPED_TRACE(::testing::Message() << "slot " << slot);
    for (int64_t t = 0; t < c.T; ++t) d.slots.as<int32_t>()[t] = slot;
    const HostTensor want = cpu_result(c, d, d.slots);
    const TensorView out = upload(d.out);
    lora_add(gpu, upload(d.x), upload_stack(d), upload(d.slots), out, c.col0);
    expect_close(c, d, d.slots, want, download(out), "uniform");
  }
}

// A token's bits are the same alone as in a batch of other tokens and slots.
TEST_F(CudaLora, TokenBitsDoNotDependOnTheBatch) {
  const LoraCase c{64, 1024, 16, 1000, 1000, 0, 3};
  const LoraData d = make_lora(c, rng_);
  const LoraStack stack = upload_stack(d);
  const TensorView out = upload(d.out);
  lora_add(gpu, upload(d.x), stack, upload(d.slots), out, c.col0);
  const HostTensor batch = download(out);
  for (int64_t t : {int64_t{0}, int64_t{13}, int64_t{63}}) {
    SCOPED_TRACE(::testing::Message() << "token " << t);
    const TensorView one = upload(d.out.view.rows(t, 1));
    lora_add(gpu, upload(d.x.view.rows(t, 1)), stack, upload(d.slots.view.rows(t, 1)), one, c.col0);
    EXPECT_TRUE(test::bits_equal(download(one).view, batch.view.rows(t, 1)));
  }
}

// Past 256 tokens (tensor cores, tiles of 32 / 16 tokens with a pass per slot among them) a
// token's bits do not depend on which tokens share its tiles: the batch reversed.
TEST_F(CudaLora, TokenBitsDoNotDependOnTheBatchOnTensorCores) {
  const LoraCase c{300, 1024, 16, 1000, 1000, 0, 3};
  const LoraData d = make_lora(c, rng_);
  const LoraStack stack = upload_stack(d);
  const TensorView out = upload(d.out), back = upload(test::reversed_rows(d.out));
  lora_add(gpu, upload(d.x), stack, upload(d.slots), out, c.col0);
  lora_add(gpu, upload(test::reversed_rows(d.x)), stack, upload(test::reversed_rows(d.slots)), back,
           c.col0);
  EXPECT_TRUE(test::bits_equal(download(out).view, test::reversed_rows(download(back)).view));
}

// q/k/v/gate-like modules (two of them into one output) in one lora_add: each output has the bits
// of one call per module, at ranks that fit all four in a launch (8, 64), two (256) or one (512).
TEST_F(CudaLora, SeveralOutputsAreEachOutputsOwnCall) {
  for (int64_t r : {8, 64, 256, 512})
    for (int64_t T : {1, 13, 300}) {  // 300: outputs 0 and 2 on tensor cores, 1 (width 300) not
      SCOPED_TRACE(::testing::Message() << "r=" << r << " T=" << T);
      const int64_t in = 1024, S = 3;
      const LoraCase cases[] = {{T, in, r, 600, 600, 0, S},
                                {T, in, r, 128, 300, 0, S},
                                {T, in, r, 128, 300, 150, S},
                                {T, in, r, 600, 640, 40, S}};
      std::vector<LoraData> modules;
      for (const LoraCase& c : cases) modules.push_back(make_lora(c, rng_));
      const TensorView x = upload(modules[0].x), slots = upload(modules[0].slots);
      const size_t out_of[] = {0, 1, 1, 2};  // module -> output
      const HostTensor* initial[] = {&modules[0].out, &modules[1].out, &modules[3].out};
      std::vector<TensorView> together, alone;
      for (const HostTensor* o : initial) {
        together.push_back(upload(*o));
        alone.push_back(upload(*o));
      }
      std::vector<LoraOutput> outputs;
      for (size_t i = 0; i < modules.size(); ++i) {
        const LoraStack stack = upload_stack(modules[i]);
        outputs.push_back({stack, together[out_of[i]], cases[i].col0});
        lora_add(gpu, x, stack, slots, alone[out_of[i]], cases[i].col0);
      }
      lora_add(gpu, x, outputs, slots);
      for (size_t o = 0; o < together.size(); ++o)
        EXPECT_TRUE(test::bits_equal(download(together[o]).view, download(alone[o]).view))
            << "output " << o;
    }
}

// lora_add captured in a CUDA graph reads the slots when it replays: new slots written into the
// captured buffer give the CPU's result for them and the eager op's bits.
TEST_F(CudaLora, GraphReplaysWithNewSlots) {
  for (int64_t T : {int64_t{1}, int64_t{7}, int64_t{300}}) {
    const LoraCase c{T, 1024, 16, 1000, 1100, 50, 3};
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    const LoraData d = make_lora(c, rng_);
    const TensorView x = upload(d.x), slots = upload(d.slots), out = upload(d.out);
    const LoraStack stack = upload_stack(d);
    // (an eager call first reserves the tensor-core path's h, as the engine's warm-up does)
    lora_add(gpu, x, stack, slots, out, c.col0);
    begin_graph_capture(gpu);
    lora_add(gpu, x, stack, slots, out, c.col0);
    Expected<StepGraph> graph = end_graph_capture(gpu);
    ASSERT_TRUE(graph.ok()) << graph.error().message;
    for (int64_t step : {5, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << "slot step " << step);
      HostTensor new_slots = mixed_slots(T, c.S, step);
      if (T == 1) new_slots.as<int32_t>()[0] = static_cast<int32_t>(step % c.S);
      copy_tensor(gpu, slots, new_slots.view);
      copy_tensor(gpu, out, d.out.view);
      launch_graph(gpu, graph.value());
      const HostTensor replayed = download(out);
      expect_close(c, d, new_slots, cpu_result(c, d, new_slots), replayed, "graph");
      copy_tensor(gpu, out, d.out.view);
      lora_add(gpu, x, stack, slots, out, c.col0);
      EXPECT_TRUE(test::bits_equal(download(out).view, replayed.view));
    }
  }
}

}  // namespace
}  // namespace beam
