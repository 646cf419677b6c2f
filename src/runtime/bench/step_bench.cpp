// bench step: a DecodeRig holds one BeamModel and a LocalKvCache of B sequences whose context is
// already cached, and times single decode steps; the LM head is timed alone with the kernels
// compute_logits uses; reports combine those times with roofline.h's floors.
#include "runtime/bench/step_bench.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "kernels/api/activation.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/gemm.h"
#include "kernels/api/norm.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "runtime/bench/device_timer.h"
#include "runtime/bench/roofline.h"
#include "runtime/bench/step_breakdown.h"

namespace beam {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The adapter slots `o` asks for (nullptr without --lora-slots), and sequence s's slot.
Expected<std::unique_ptr<LoraSlots>> bench_lora(const KernelContext& ctx, const BeamConfig& c,
                                                const StepBenchOptions& o) {
  if (o.lora_slots == 0) return std::unique_ptr<LoraSlots>();
  return LoraSlots::create(
      ctx, c,
      LoraSlotsOptions{
          .max_loras = o.lora_slots, .max_rank = o.lora_rank, .experts = o.lora_experts});
}
int32_t bench_lora_slot(int lora_slots, int64_t s) {
  return lora_slots > 0 ? static_cast<int32_t>(s % lora_slots) : kNoLoraSlot;
}

std::vector<int32_t> random_tokens(std::mt19937_64& rng, int64_t n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = d(rng);
  return t;
}

// One model and B sequences with `context` tokens cached; step() runs one decode token each.
class DecodeRig {
 public:
  static Expected<std::unique_ptr<DecodeRig>> create(const KernelContext& ctx,
                                                     std::shared_ptr<const BeamWeights> weights,
                                                     int64_t batch, const StepBenchOptions& o) {
    const int64_t max_tokens =
        o.context + (o.warmup_steps + o.timed_steps + o.breakdown_steps + 2) * (1 + o.draft_tokens);
    BEAM_ASSIGN_OR_RETURN(LocalKvCache cache, LocalKvCache::create(ctx, weights->config, batch,
                                                                   max_tokens, o.block_size));
    BEAM_ASSIGN_OR_RETURN(std::unique_ptr<LoraSlots> lora, bench_lora(ctx, weights->config, o));
    auto rig = std::unique_ptr<DecodeRig>(
        new DecodeRig(ctx, std::move(weights), std::move(lora), std::move(cache), batch, o));
    BEAM_RETURN_IF_ERROR(rig->prefill(o.context, std::max<int64_t>(1, o.prefill_chunk)));
    return rig;
  }

  // One decode step (1 + draft_tokens tokens for every sequence, logits for each when drafts are
  // fed); returns its device time in ms (from before forward() starts, so host work the device
  // waits for counts).
  Expected<double> step(DeviceTimer& timer, bool capture) {
    ForwardBatch b;
    b.capture_routing = capture;
    b.logits_on_device = true;  // as the engine, which samples on the device
    const auto width = static_cast<size_t>(1 + draft_tokens_);
    for (int64_t s = 0; s < batch_; ++s) {
      b.seqs.push_back(chunk(s, {&next_[static_cast<size_t>(s) * width], width}, cached_));
      b.seqs.back().all_logits = draft_tokens_ > 0;
    }
    timer.start();
    BEAM_RETURN_IF_ERROR(model_.forward(b, cache_.layers(), out_));
    const double ms = timer.stop();
    cached_ += static_cast<int64_t>(width);
    next_ = random_tokens(rng_, batch_ * static_cast<int64_t>(width), model_.config().vocab_size);
    return ms;
  }
  // Host ms the last step() spent before its device work was all queued (ForwardOutput).
  double last_host_ms() const { return out_.host_enqueue_ms; }
  const ForwardOutput& output() const { return out_; }

 private:
  DecodeRig(const KernelContext& ctx, std::shared_ptr<const BeamWeights> w,
            std::unique_ptr<LoraSlots> lora, LocalKvCache cache, int64_t batch,
            const StepBenchOptions& o)
      : model_(std::move(w), ctx, std::move(lora)),
        cache_(std::move(cache)),
        batch_(batch),
        lora_slots_(o.lora_slots),
        draft_tokens_(o.draft_tokens),
        rng_(o.seed) {
    next_ = random_tokens(rng_, batch_ * (1 + draft_tokens_), model_.config().vocab_size);
  }

  SeqChunk chunk(int64_t s, std::span<const int32_t> tokens, int64_t num_cached) const {
    SeqChunk c;
    c.tokens = tokens;
    c.num_cached = num_cached;
    c.full_blocks = cache_.block_table(s);
    c.sliding_blocks = cache_.block_table(s);
    c.lora_slot = bench_lora_slot(lora_slots_, s);
    c.num_prompt = num_prompt_;
    return c;
  }

  // Caches `context` random tokens per sequence, at most `chunk_tokens` tokens per forward.
  Status prefill(int64_t context, int64_t chunk_tokens) {
    num_prompt_ = context;  // the decode steps after it feed generated tokens
    std::vector<std::vector<int32_t>> prompts;
    for (int64_t s = 0; s < batch_; ++s)
      prompts.push_back(random_tokens(rng_, context, model_.config().vocab_size));
    ForwardBatch b;
    int64_t in_batch = 0;
    auto flush = [&]() -> Status {
      if (b.seqs.empty()) return ok_status();
      BEAM_RETURN_IF_ERROR(model_.forward(b, cache_.layers(), out_));
      b.seqs.clear();
      in_batch = 0;
      return ok_status();
    };
    for (int64_t s = 0; s < batch_; ++s) {
      for (int64_t begin = 0; begin < context; begin += chunk_tokens) {
        const int64_t n = std::min(chunk_tokens, context - begin);
        if (in_batch + n > chunk_tokens) BEAM_RETURN_IF_ERROR(flush());
        b.seqs.push_back(chunk(s,
                               std::span<const int32_t>(prompts[static_cast<size_t>(s)])
                                   .subspan(static_cast<size_t>(begin), static_cast<size_t>(n)),
                               begin));
        in_batch += n;
      }
    }
    BEAM_RETURN_IF_ERROR(flush());
    cached_ = context;
    return ok_status();
  }

  BeamModel model_;
  LocalKvCache cache_;
  int64_t batch_;
  int lora_slots_;  // StepBenchOptions::lora_slots
  int64_t draft_tokens_;  // StepBenchOptions::draft_tokens
  std::mt19937_64 rng_;
  int64_t cached_ = 0;
  int64_t num_prompt_ = SeqChunk::kAllPrompt;  // SeqChunk::num_prompt: the cached context
  std::vector<int32_t> next_;
  ForwardOutput out_;
};

struct DecodeMeasure {
  double step_ms = 0;
  double host_ms = 0;  // median host time per step before the step was queued (CPU overhead)
  ExpertLoad experts;  // from one captured step
};

Expected<DecodeMeasure> measure_decode(const KernelContext& ctx,
                                       std::shared_ptr<const BeamWeights> weights, int64_t batch,
                                       const StepBenchOptions& o) {
  const int64_t num_sparse = weights->config.num_layers_of(MlpKind::kSparse);
  BEAM_ASSIGN_OR_RETURN(auto rig, DecodeRig::create(ctx, std::move(weights), batch, o));
  DeviceTimer timer(ctx);
  for (int64_t i = 0; i < o.warmup_steps; ++i) BEAM_RETURN_IF_ERROR(rig->step(timer, false));
  std::vector<double> times, host;
  for (int64_t i = 0; i < o.timed_steps; ++i) {
    BEAM_ASSIGN_OR_RETURN(double ms, rig->step(timer, false));
    times.push_back(ms);
    host.push_back(rig->last_host_ms());
  }
  BEAM_RETURN_IF_ERROR(rig->step(timer, true));
  return DecodeMeasure{median(times), median(host),
                       expert_load(rig->output().routed_experts, num_sparse)};
}

// The embedding gather that opens a step plus compute_logits' kernels (row gather, final norm,
// LM head, softcap; the logits stay on the device, as in the decode steps) for `rows` rows;
// median ms.
Expected<double> time_lm_head(const KernelContext& ctx, const BeamWeights& w, int64_t rows,
                              int64_t reps) {
  const BeamConfig& c = w.config;
  const int64_t H = c.hidden_size, V = c.vocab_size;
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer ids_buf, allocate_buffer(ctx, static_cast<size_t>(rows) * 4));
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer residual_buf,
                        allocate_buffer(ctx, static_cast<size_t>(rows * H) * 2));
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer hidden_buf,
                        allocate_buffer(ctx, static_cast<size_t>(rows * H) * 2));
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer z_buf,
                        allocate_buffer(ctx, static_cast<size_t>(rows * V) * 2));
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer logits_buf,
                        allocate_buffer(ctx, static_cast<size_t>(rows * V) * 4));
  std::vector<int32_t> ids(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i)
    ids[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7919) % V);
  TensorView ids_v = ids_buf.view(DType::kI32, {rows});
  copy_tensor(ctx, ids_v, TensorView{ids.data(), DType::kI32, {rows}, Device::kCpu});
  for (auto& x : ids) x = static_cast<int32_t>(&x - ids.data());  // row gather: rows 0..R-1
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer rows_buf, allocate_buffer(ctx, static_cast<size_t>(rows) * 4));
  TensorView rows_v = rows_buf.view(DType::kI32, {rows});
  copy_tensor(ctx, rows_v, TensorView{ids.data(), DType::kI32, {rows}, Device::kCpu});
  TensorView residual = residual_buf.view(DType::kBF16, {rows, H}),
             hidden = hidden_buf.view(DType::kBF16, {rows, H});
  TensorView z = z_buf.view(DType::kBF16, {rows, V}),
             logits = logits_buf.view(DType::kF32, {rows, V});
  DeviceTimer timer(ctx);
  std::vector<double> times;
  for (int64_t r = 0; r <= reps; ++r) {  // the first run warms up
    timer.start();
    embedding(ctx, w.embed, ids_v, residual);
    embedding(ctx, residual, rows_v, hidden);
    rms_norm(ctx, hidden, w.final_norm, c.rms_norm_eps, hidden);
    linear(ctx, hidden, w.lm_head, z);
    softcap(ctx, z, c.final_logit_softcapping.value_or(0.0f), 1.0f, logits);
    const double ms = timer.stop();
    if (r > 0) times.push_back(ms);
  }
  return median(times);
}

// Floors of one decode step of `batch` sequences with kv_len cached keys each, per layer.
struct DecodeFloors {
  std::vector<Cost> layers;  // index = layer
  Cost head;
  Cost attention_sliding, attention_full, dense, moe_mean;
};

DecodeFloors decode_floors(const BeamConfig& c, int64_t batch, int64_t kv_len,
                           const std::vector<int64_t>& touched) {
  DecodeFloors f;
  f.head = lm_head_cost(c, batch);
  double touched_sum = 0;
  for (int64_t t : touched) touched_sum += static_cast<double>(t);
  const int64_t touched_mean =
      touched.empty() ? 0 : static_cast<int64_t>(touched_sum / touched.size() + 0.5);
  for (AttentionKind k : {AttentionKind::kSliding, AttentionKind::kFull}) {
    const int64_t keys = keys_seen(c, k, kv_len - 1);
    Cost a = attention_cost(c, {batch, batch * keys, batch * keys});
    (k == AttentionKind::kSliding ? f.attention_sliding : f.attention_full) = a;
  }
  f.dense = dense_mlp_cost(c, batch);
  f.moe_mean = moe_cost(c, batch, touched_mean);
  size_t sparse = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    Cost layer =
        c.layer_types[i] == AttentionKind::kSliding ? f.attention_sliding : f.attention_full;
    layer +=
        c.mlp_layer_types[i] == MlpKind::kDense ? f.dense : moe_cost(c, batch, touched[sparse++]);
    f.layers.push_back(layer);
  }
  return f;
}

nlohmann::json cost_json(const Cost& c) {
  return {{"bytes", c.bytes}, {"flops", c.flops}, {"floor_ms", c.floor_ms()}};
}

double ratio(double ms, double floor_ms) {
  return floor_ms > 0 ? ms / floor_ms : 0;
}

// Per-layer times of one batch size: the whole model, the LM head alone and (when the model has
// both kinds) each kind's layers alone, so a kind's layer = (that kind's model − head) / its
// layers. (Not whole − MoE-only: the two models route differently, and the difference of two
// large step times left the dense layer's time to noise, even negative at batch 128.)
struct LayerTimes {
  double step_ms = 0, head_ms = 0, moe_only_step_ms = 0, dense_only_step_ms = 0;
  double layer_ms = 0, dense_ms = 0, moe_ms = 0;
};

Expected<LayerTimes> measure_layers(const KernelContext& ctx,
                                    const std::shared_ptr<const BeamWeights>& w, int64_t batch,
                                    const StepBenchOptions& o, DecodeMeasure& full) {
  const BeamConfig& c = w->config;
  const int64_t n_dense = c.num_layers_of(MlpKind::kDense),
                n_moe = c.num_layers_of(MlpKind::kSparse);
  LayerTimes t;
  BEAM_ASSIGN_OR_RETURN(full, measure_decode(ctx, w, batch, o));
  t.step_ms = full.step_ms;
  BEAM_ASSIGN_OR_RETURN(t.head_ms,
                        time_lm_head(ctx, *w, batch, std::max<int64_t>(o.timed_steps, 3)));
  const double body = t.step_ms - t.head_ms;
  t.layer_ms = body / static_cast<double>(c.num_layers);
  if (n_dense > 0 && n_moe > 0) {
    BEAM_ASSIGN_OR_RETURN(DecodeMeasure moe_only,
                          measure_decode(ctx, layers_of_kind(w, MlpKind::kSparse), batch, o));
    BEAM_ASSIGN_OR_RETURN(DecodeMeasure dense_only,
                          measure_decode(ctx, layers_of_kind(w, MlpKind::kDense), batch, o));
    t.moe_only_step_ms = moe_only.step_ms;
    t.dense_only_step_ms = dense_only.step_ms;
    t.moe_ms = (moe_only.step_ms - t.head_ms) / static_cast<double>(n_moe);
    t.dense_ms = (dense_only.step_ms - t.head_ms) / static_cast<double>(n_dense);
  } else if (n_moe > 0) {
    t.moe_ms = body / static_cast<double>(n_moe);
  } else {
    t.dense_ms = body / static_cast<double>(n_dense);
  }
  return t;
}

// Layers an op kind runs in (per-step kinds count once), to turn its step total into per-layer ms.
int64_t layers_running(const BeamConfig& c, StepOp op) {
  switch (op) {
    case StepOp::kSetup:
    case StepOp::kEmbedding:
    case StepOp::kHead:
      return 1;
    case StepOp::kRouter:
    case StepOp::kExperts:
      return c.num_layers_of(MlpKind::kSparse);
    case StepOp::kDense:
      return c.num_layers_of(MlpKind::kDense);
    case StepOp::kNorm:
    case StepOp::kLora:  // every layer's projections (and the LM head's, counted in)
    case StepOp::kQkvg:
    case StepOp::kQkNormRope:
    case StepOp::kStoreKv:
    case StepOp::kAttention:
    case StepOp::kGate:
    case StepOp::kOProj:
    case StepOp::kPostNorm:
      return c.num_layers;
  }
  return 1;
}

// Eager decode steps (no CUDA graphs) with a CUDA event at every op boundary of every layer:
// the median over breakdown_steps steps of each op kind's time, summed over layers ("ms") and per
// layer it runs in ("ms_per_layer"; setup, embedding and head are per step). A gap where the GPU
// waits for the host counts towards the op queued after it. Unprofiled eager steps are timed
// too, so the profiling overhead (profiled_step_ms − eager_step_ms) is visible.
Expected<nlohmann::json> breakdown_report(const KernelContext& ctx,
                                          const std::shared_ptr<const BeamWeights>& w,
                                          int64_t batch, const StepBenchOptions& o) {
  const BeamConfig& c = w->config;
  const int64_t steps = std::max<int64_t>(1, o.breakdown_steps);
  BreakdownProfiler profiler(ctx);
  KernelContext profiled_ctx = ctx;
  profiled_ctx.cuda_graphs = false;
  profiled_ctx.profiler = &profiler;
  StepBenchOptions rig_options = o;
  rig_options.timed_steps = 2 * steps;
  BEAM_ASSIGN_OR_RETURN(auto rig, DecodeRig::create(profiled_ctx, w, batch, rig_options));
  DeviceTimer timer(ctx);
  for (int64_t i = 0; i < o.warmup_steps; ++i) BEAM_RETURN_IF_ERROR(rig->step(timer, false));
  std::vector<double> eager, profiled, layer_sums;
  std::vector<std::vector<double>> per_op(kNumStepOps);
  StepBreakdown b;
  for (int64_t i = 0; i < steps; ++i) {
    BEAM_ASSIGN_OR_RETURN(double ms, rig->step(timer, false));
    eager.push_back(ms);
  }
  for (int64_t i = 0; i < steps; ++i) {
    profiler.start();
    BEAM_ASSIGN_OR_RETURN(double ms, rig->step(timer, false));
    b = profiler.finish();
    profiled.push_back(ms);
    double layer_sum = 0;
    for (int k = 0; k < kNumStepOps; ++k) {
      per_op[static_cast<size_t>(k)].push_back(b.ms[static_cast<size_t>(k)]);
      const auto op = static_cast<StepOp>(k);
      if (op != StepOp::kSetup && op != StepOp::kEmbedding && op != StepOp::kHead)
        layer_sum += b.ms[static_cast<size_t>(k)];
    }
    layer_sums.push_back(layer_sum);
  }
  nlohmann::json ops = nlohmann::json::object();
  for (int k = 0; k < kNumStepOps; ++k) {
    const auto op = static_cast<StepOp>(k);
    const auto i = static_cast<size_t>(k);
    if (b.calls[i] == 0) continue;
    const double ms = median(per_op[i]);
    ops[step_op_name(op)] = {{"ms", ms},
                             {"ms_per_layer", ms / static_cast<double>(layers_running(c, op))},
                             {"calls", b.calls[i]}};
  }
  return nlohmann::json{
      {"steps", steps},
      {"eager_step_ms", median(eager)},
      {"profiled_step_ms", median(profiled)},
      {"layers_ms_per_layer", median(layer_sums) / static_cast<double>(c.num_layers)},
      {"ops", ops}};
}

Expected<nlohmann::json> decode_report(const KernelContext& ctx,
                                       const std::shared_ptr<const BeamWeights>& w, int64_t batch,
                                       const StepBenchOptions& o) {
  const BeamConfig& c = w->config;
  DecodeMeasure full;
  BEAM_ASSIGN_OR_RETURN(LayerTimes t, measure_layers(ctx, w, batch, o, full));
  const int64_t kv_len =
      o.context + o.warmup_steps + o.timed_steps / 2 + 1;  // mid-run keys per sequence
  DecodeFloors f = decode_floors(c, batch, kv_len, full.experts.touched);
  Cost step = f.head;
  for (const Cost& l : f.layers) step += l;
  double layers_floor = 0;
  for (const Cost& l : f.layers) layers_floor += l.floor_ms();
  const double layer_floor = layers_floor / static_cast<double>(c.num_layers);
  // The MoE and dense floors use a sliding-attention layer (the target's majority kind).
  const double moe_floor = f.attention_sliding.floor_ms() + f.moe_mean.floor_ms();
  const double dense_floor = f.attention_sliding.floor_ms() + f.dense.floor_ms();
  const double nd = static_cast<double>(o.target_dense_layers),
               nm = static_cast<double>(o.target_moe_layers);
  const double step52 = nd * t.dense_ms + nm * t.moe_ms + t.head_ms;
  const double floor52 = nd * dense_floor + nm * moe_floor + f.head.floor_ms();
  double touched_mean = 0;
  for (int64_t e : full.experts.touched) touched_mean += static_cast<double>(e);
  if (!full.experts.touched.empty())
    touched_mean /= static_cast<double>(full.experts.touched.size());
  nlohmann::json j = {
      {"batch", batch},
      {"context", o.context},
      {"kv_len_mid", kv_len},
      {"draft_tokens", o.draft_tokens},
      {"decode_step_ms", t.step_ms},
      {"decode_step_floor_ms", step.floor_ms()},
      {"decode_step_ratio", ratio(t.step_ms, step.floor_ms())},
      {"cuda_graphs", ctx.device == Device::kCuda && ctx.cuda_graphs},
      // CPU overhead: host time per step before the step is queued, while the device idles.
      {"host_enqueue_ms", full.host_ms},
      {"host_overhead_fraction", t.step_ms > 0 ? full.host_ms / t.step_ms : 0.0},
      {"lm_head_ms", t.head_ms},
      {"lm_head_floor_ms", f.head.floor_ms()},
      {"lm_head_ratio", ratio(t.head_ms, f.head.floor_ms())},
      {"decode_layer_ms", t.layer_ms},
      {"decode_layer_floor_ms", layer_floor},
      {"decode_layer_ratio", ratio(t.layer_ms, layer_floor)},
      {"experts_touched", touched_mean},
      {"experts_touched_per_layer", full.experts.touched},
      {"experts_touched_uniform_expectation", expected_experts_touched(c, batch)},
      {"expert_rows_max_per_layer", full.experts.max_rows},
      {"floor_parts",
       {{"attention_sliding", cost_json(f.attention_sliding)},
        {"attention_full", cost_json(f.attention_full)},
        {"dense_mlp", cost_json(f.dense)},
        {"moe_mean_touched", cost_json(f.moe_mean)},
        {"lm_head", cost_json(f.head)}}},
      {"extrapolated_target_layers", o.target_dense_layers + o.target_moe_layers},
      {"extrapolated_52_layer_step_ms", step52},
      {"extrapolated_52_layer_ms_per_token", step52 / static_cast<double>(batch)},
      {"extrapolated_52_layer_floor_ms_per_token", floor52 / static_cast<double>(batch)},
      {"extrapolated_52_layer_tokens_per_s", 1e3 * static_cast<double>(batch) / step52}};
  if (c.num_layers_of(MlpKind::kSparse) > 0)
    j.update({{"moe_layer_ms", t.moe_ms},
              {"moe_layer_floor_ms", moe_floor},
              {"moe_layer_ratio", ratio(t.moe_ms, moe_floor)}});
  if (c.num_layers_of(MlpKind::kDense) > 0)
    j.update({{"dense_layer_ms", t.dense_ms},
              {"dense_layer_floor_ms", dense_floor},
              {"dense_layer_ratio", ratio(t.dense_ms, dense_floor)}});
  if (t.moe_only_step_ms > 0) j["moe_only_model_step_ms"] = t.moe_only_step_ms;
  if (t.dense_only_step_ms > 0) j["dense_only_model_step_ms"] = t.dense_only_step_ms;
  if (o.breakdown) {
    BEAM_ASSIGN_OR_RETURN(j["breakdown"], breakdown_report(ctx, w, batch, o));
  }
  return j;
}

// One sequence of prefill_tokens tokens in one step (nothing cached): median of prefill_reps.
Expected<nlohmann::json> prefill_report(const KernelContext& ctx,
                                        const std::shared_ptr<const BeamWeights>& w,
                                        const StepBenchOptions& o) {
  const BeamConfig& c = w->config;
  const int64_t T = o.prefill_tokens;
  BEAM_ASSIGN_OR_RETURN(LocalKvCache cache, LocalKvCache::create(ctx, c, 1, T, o.block_size));
  BEAM_ASSIGN_OR_RETURN(std::unique_ptr<LoraSlots> lora, bench_lora(ctx, c, o));
  BeamModel model(w, ctx, std::move(lora));
  std::mt19937_64 rng(o.seed + 7);
  std::vector<int32_t> tokens = random_tokens(rng, T, c.vocab_size);
  ForwardBatch b;
  b.seqs.push_back(SeqChunk{tokens, 0, 0, cache.block_table(0), cache.block_table(0), false});
  b.seqs.back().lora_slot = bench_lora_slot(o.lora_slots, 0);
  b.capture_routing = true;
  ForwardOutput out;
  BEAM_RETURN_IF_ERROR(model.forward(b, cache.layers(), out));  // warm-up, counts experts
  std::vector<int64_t> touched =
      expert_load(out.routed_experts, c.num_layers_of(MlpKind::kSparse)).touched;
  b.capture_routing = false;
  DeviceTimer timer(ctx);
  std::vector<double> times, enqueue;
  for (int64_t r = 0; r < std::max<int64_t>(1, o.prefill_reps); ++r) {
    timer.start();
    BEAM_RETURN_IF_ERROR(model.forward(b, cache.layers(), out));
    times.push_back(timer.stop());
    enqueue.push_back(out.host_enqueue_ms);
  }
  const double ms = median(times);
  Cost total = lm_head_cost(c, 1);
  double attention_core_flops = 0;
  size_t sparse = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    const int64_t keys = keys_seen_sum(c, c.layer_types[i], 0, T);
    attention_core_flops +=
        4.0 * static_cast<double>(c.num_heads * c.head_dim) * static_cast<double>(keys);
    total += attention_cost(c, {T, keys, T});
    total += c.mlp_layer_types[i] == MlpKind::kDense ? dense_mlp_cost(c, T)
                                                     : moe_cost(c, T, touched[sparse++]);
  }
  const double gemm_flops = total.flops - attention_core_flops;
  return nlohmann::json{
      {"tokens", T},
      {"prefill_ms", ms},
      {"host_enqueue_ms", median(enqueue)},  // forward() until its last device work was queued
      {"tokens_per_s", 1e3 * static_cast<double>(T) / ms},
      {"total_flops", total.flops},
      {"gemm_flops", gemm_flops},
      {"attention_core_flops", attention_core_flops},
      {"bytes", total.bytes},
      {"achieved_tflops", total.flops / (ms * 1e-3) / 1e12},
      {"floor_ms", total.floor_ms()},
      {"fraction_of_floor", total.floor_ms() / ms},
      {"gemm_floor_ms", gemm_flops / kBf16FlopsPerSecond * 1e3},
      {"attention_core_floor_ms", attention_core_flops / kBf16FlopsPerSecond * 1e3},
      {"experts_touched_per_layer", touched},
      {"note",
       "whole-step time; GEMM and attention are not separated inside the step (bench kernels times "
       "the "
       "8K prefill attention alone)"}};
}

}  // namespace

std::shared_ptr<const BeamWeights> layers_of_kind(std::shared_ptr<const BeamWeights> weights,
                                                  MlpKind kind) {
  auto sub = std::make_shared<BeamWeights>(*weights);
  BeamConfig& c = sub->config;
  sub->layers.clear();
  c.layer_types.clear();
  c.mlp_layer_types.clear();
  for (int64_t l = 0; l < weights->config.num_layers; ++l) {
    const size_t i = static_cast<size_t>(l);
    if (weights->config.mlp_layer_types[i] != kind) continue;
    sub->layers.push_back(weights->layers[i]);
    c.layer_types.push_back(weights->config.layer_types[i]);
    c.mlp_layer_types.push_back(kind);
  }
  c.num_layers = static_cast<int64_t>(sub->layers.size());
  return sub;
}

Expected<nlohmann::json> run_step_bench(const KernelContext& ctx,
                                        std::shared_ptr<const BeamWeights> weights,
                                        const StepBenchOptions& o) {
  if (o.context < 1 || o.timed_steps < 1 || o.warmup_steps < 0 || o.prefill_tokens < 0)
    return make_error(
        "bench step: --context and --steps must be >= 1, --warmup and --prefill-tokens >= 0");
  nlohmann::json decode = nlohmann::json::array();
  for (int64_t batch : o.batches) {
    if (batch < 1) return make_error("bench step: batch sizes must be >= 1");
    BEAM_ASSIGN_OR_RETURN(nlohmann::json j, decode_report(ctx, weights, batch, o));
    decode.push_back(std::move(j));
  }
  nlohmann::json result = {{"decode", decode}};
  if (o.prefill_tokens > 0) {
    BEAM_ASSIGN_OR_RETURN(nlohmann::json p, prefill_report(ctx, weights, o));
    result["prefill"] = std::move(p);
  }
  if (o.lora_slots > 0) {
    result["lora"] = {{"slots", o.lora_slots},
                      {"rank", o.lora_rank},
                      {"note", "floors and the LM head alone exclude the LoRA deltas"}};
  }
  result["ceilings"] = {{"hbm_bytes_per_s", kHbmBytesPerSecond},
                        {"bf16_flops_per_s", kBf16FlopsPerSecond}};
  return result;
}

}  // namespace beam
