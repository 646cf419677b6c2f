// CPU lora_add (kernels/api/lora.h) bit for bit against its documented formula: h[t, j] = scale ·
// dot(x[t], A_s[j]) and out = bf16(f32(out) + dot(h[t], B_s[o])), each dot in vec.h's fixed order;
// tokens without a slot and the columns outside [col0, col0 + n) keep their bits; one and two
// threads agree; slots in runs or interleaved (each slot's tokens gathered); a token's result does
// not depend on the batch; several outputs in one call are each output's own call; bad slots and
// outputs of another rank abort.
#include "kernels/api/lora.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernel_test_util.h"

namespace beam {
namespace {

struct LoraShape {
  int64_t T, in, r, n, width, col0, S;
  int64_t run = 3;  // tokens a slot in a row: 3 (sequences' runs) or 1 (a decode batch's mix)
};

struct LoraInputs {
  HostTensor x, a, b, scale, slots, out;
};

LoraInputs make_inputs(const LoraShape& s, std::mt19937& rng) {
  LoraInputs in{test::random_bf16({s.T, s.in}, rng),
                test::random_bf16({s.S, s.r, s.in}, rng, 0.1f),
                test::random_bf16({s.S, s.n, s.r}, rng, 0.1f),
                HostTensor(DType::kF32, {s.S}),
                HostTensor(DType::kI32, {s.T}),
                test::random_bf16({s.T, s.width}, rng)};
  for (int64_t i = 0; i < s.S; ++i) in.scale.view.as<float>()[i] = 0.5f + static_cast<float>(i);
  for (int64_t t = 0; t < s.T; ++t)  // runs of one slot and tokens without one
    in.slots.view.as<int32_t>()[t] = static_cast<int32_t>((t / s.run) % (s.S + 1)) - 1;
  return in;
}

// The documented result of lora_add on `in` (its out not modified).
HostTensor documented(const LoraShape& s, const LoraInputs& in) {
  HostTensor want = test::copy_of(in.out);
  std::vector<float> x(static_cast<size_t>(s.in)), h(static_cast<size_t>(s.r));
  for (int64_t t = 0; t < s.T; ++t) {
    const int32_t slot = in.slots.view.as<int32_t>()[t];
    if (slot == kNoLoraSlot) continue;
    for (int64_t i = 0; i < s.in; ++i)
      x[static_cast<size_t>(i)] = to_float(in.x.view.as<bf16>()[t * s.in + i]);
    const bf16* a = in.a.view.as<bf16>() + slot * s.r * s.in;
    const bf16* b = in.b.view.as<bf16>() + slot * s.n * s.r;
    for (int64_t j = 0; j < s.r; ++j)
      h[static_cast<size_t>(j)] =
          in.scale.view.as<float>()[slot] * test::documented_dot(x.data(), a + j * s.in, s.in);
    bf16* o = want.view.as<bf16>() + t * s.width + s.col0;
    for (int64_t c = 0; c < s.n; ++c)
      o[c] = to_bf16(to_float(o[c]) + test::documented_dot(h.data(), b + c * s.r, s.r));
  }
  return want;
}

TEST(LoraAdd, MatchesItsDocumentedFormulaBitForBit) {
  std::mt19937 rng(11);
  test::Contexts cpu;
  for (const LoraShape& s :
       {LoraShape{1, 64, 8, 96, 96, 0, 2}, LoraShape{7, 100, 3, 50, 80, 30, 3},
        LoraShape{40, 256, 16, 300, 1000, 512, 4}, LoraShape{300, 128, 64, 64, 64, 0, 2},
        LoraShape{33, 256, 16, 300, 300, 0, 4, 1},  // slots interleaved: gathered a slot at a time
        LoraShape{300, 128, 16, 64, 64, 0, 2, 1}}) {  // ~100 tokens a slot: gathers of 64
    SCOPED_TRACE(::testing::Message() << "T " << s.T << " in " << s.in << " r " << s.r << " n "
                                      << s.n << " run " << s.run);
    const LoraInputs in = make_inputs(s, rng);
    const HostTensor want = documented(s, in);
    for (const KernelContext* ctx : {&cpu.one, &cpu.two}) {
      HostTensor got = test::copy_of(in.out);
      lora_add(*ctx, in.x.view, LoraStack{in.a.view, in.b.view, in.scale.view}, in.slots.view,
               got.view, s.col0);
      EXPECT_TRUE(test::bits_equal(got.view, want.view));
    }
  }
}

TEST(LoraAdd, ATokensBitsDoNotDependOnTheBatch) {
  std::mt19937 rng(12);
  test::Contexts cpu;
  const LoraShape s{64, 192, 16, 120, 120, 0, 3};
  const LoraInputs in = make_inputs(s, rng);
  HostTensor batched = test::copy_of(in.out);
  lora_add(cpu.two, in.x.view, LoraStack{in.a.view, in.b.view, in.scale.view}, in.slots.view,
           batched.view, 0);
  for (int64_t t : {int64_t{0}, int64_t{5}, int64_t{33}, s.T - 1}) {
    HostTensor one = test::copy_of(in.out);
    const TensorView out_row = one.view.rows(t, 1);
    lora_add(cpu.two, in.x.view.rows(t, 1), LoraStack{in.a.view, in.b.view, in.scale.view},
             in.slots.view.rows(t, 1), out_row, 0);
    EXPECT_TRUE(test::bits_equal(out_row, batched.view.rows(t, 1))) << "token " << t;
  }
}

// q/k/v/gate-like modules on one x, modules 1 and 2 into one output at different columns: one
// call gives each output the bits of one call per module.
TEST(LoraAdd, SeveralOutputsAreEachOutputsOwnCall) {
  std::mt19937 rng(14);
  test::Contexts cpu;
  const int64_t T = 9, in = 96, r = 8, S = 3;
  const LoraShape shapes[] = {{T, in, r, 64, 64, 0, S},
                              {T, in, r, 16, 40, 0, S},
                              {T, in, r, 24, 40, 16, S},
                              {T, in, r, 64, 80, 8, S}};
  std::vector<LoraInputs> modules;  // each module's factors; x, slots and outputs from module 0
  for (const LoraShape& s : shapes) modules.push_back(make_inputs(s, rng));
  const LoraInputs& shared = modules[0];
  const HostTensor* initial[] = {&modules[0].out, &modules[1].out, &modules[3].out};
  const size_t out_of[] = {0, 1, 1, 2};  // module -> output
  std::vector<HostTensor> together, alone;
  for (const HostTensor* o : initial) {
    together.push_back(test::copy_of(*o));
    alone.push_back(test::copy_of(*o));
  }
  std::vector<LoraOutput> outputs;
  for (size_t i = 0; i < modules.size(); ++i) {
    const LoraStack stack{modules[i].a.view, modules[i].b.view, modules[i].scale.view};
    outputs.push_back({stack, together[out_of[i]].view, shapes[i].col0});
    lora_add(cpu.two, shared.x.view, stack, shared.slots.view, alone[out_of[i]].view,
             shapes[i].col0);
  }
  lora_add(cpu.two, shared.x.view, outputs, shared.slots.view);
  for (size_t o = 0; o < together.size(); ++o)
    EXPECT_TRUE(test::bits_equal(together[o].view, alone[o].view)) << "output " << o;
}

TEST(LoraAddDeathTest, ASlotOutsideTheStackAborts) {
  std::mt19937 rng(13);
  test::Contexts cpu;
  const LoraShape s{2, 16, 2, 8, 8, 0, 2};
  LoraInputs in = make_inputs(s, rng);
  in.slots.view.as<int32_t>()[1] = 2;
  EXPECT_DEATH(lora_add(cpu.one, in.x.view, LoraStack{in.a.view, in.b.view, in.scale.view},
                        in.slots.view, in.out.view, 0),
               "token 1 has slot 2 of 2");
}

TEST(LoraAddDeathTest, OutputsOfAnotherRankAbort) {
  std::mt19937 rng(15);
  test::Contexts cpu;
  const LoraInputs r2 = make_inputs({2, 16, 2, 8, 8, 0, 2}, rng);
  const LoraInputs r4 = make_inputs({2, 16, 4, 8, 8, 0, 2}, rng);
  const LoraOutput outputs[] = {{LoraStack{r2.a.view, r2.b.view, r2.scale.view}, r2.out.view},
                                {LoraStack{r4.a.view, r4.b.view, r4.scale.view}, r4.out.view}};
  EXPECT_DEATH(lora_add(cpu.one, r2.x.view, outputs, r2.slots.view), "S and r those of the first");
}

}  // namespace
}  // namespace beam
