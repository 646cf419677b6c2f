// `beamserve bench kernels`: each forward-pass op (and, on the GPU, sampling and prompt scoring)
// once at beam-slice's decode and prefill shapes, on random device tensors, timed with DeviceTimer
// (median of --reps after warm-up), next to the op's floor (runtime/bench/roofline.h). Modest by
// design: bench step is the main measurement.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <vector>

#include "cli/bench_commands.h"
#include "cli/bench_common.h"
#include "kernels/api/attention.h"
#include "kernels/api/device_memory.h"
#include "kernels/api/fill.h"
#include "kernels/api/fixed_attention.h"
#include "kernels/api/gemm.h"
#include "kernels/api/moe.h"
#include "kernels/api/sampling.h"
#include "runtime/bench/device_timer.h"
#include "runtime/bench/roofline.h"

namespace beam::cli {
namespace {

// Device tensors of one run (kept alive until the end, or until the Scope they were made in
// ends) and the op timings.
class KernelBench {
 public:
  KernelBench(const KernelContext& ctx, int64_t reps) : ctx_(ctx), reps_(reps), timer_(ctx) {}

  // Frees the tensors made during its lifetime when it ends: one case's inputs, so that a run's
  // cases need not fit the device together (decode attention at long contexts: each case's K/V
  // alone is tens of GB). cudaFree synchronizes, so no queued op still reads them.
  class Scope {
   public:
    explicit Scope(KernelBench& kb) : kb_(kb), mark_(kb.buffers_.size()) {}
    ~Scope() { kb_.buffers_.resize(mark_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    KernelBench& kb_;
    size_t mark_;
  };

  // A bf16 / f32 tensor of normal(mean, std) values.
  Expected<TensorView> tensor(DType dt, Shape shape, float std = 0.02f, float mean = 0.0f) {
    BEAM_ASSIGN_OR_RETURN(TensorView t, empty(dt, shape));
    fill_random(ctx_, t, ++seed_, std, mean);
    return t;
  }
  // A tensor of any dtype, unfilled (outputs and scratch).
  Expected<TensorView> empty(DType dt, Shape shape) {
    BEAM_ASSIGN_OR_RETURN(
        DeviceBuffer b, allocate_buffer(ctx_, static_cast<size_t>(shape.numel()) * dtype_size(dt)));
    buffers_.push_back(b);
    return b.view(dt, shape);
  }
  template <typename T>
  Expected<TensorView> upload(DType dt, const std::vector<T>& v) {
    BEAM_ASSIGN_OR_RETURN(DeviceBuffer b, allocate_buffer(ctx_, v.size() * sizeof(T)));
    buffers_.push_back(b);
    TensorView t = b.view(dt, {static_cast<int64_t>(v.size())});
    copy_tensor(ctx_, t, TensorView{const_cast<T*>(v.data()), dt, t.shape, Device::kCpu});
    return t;
  }

  // Times op (median of reps after two warm-ups, CUDA events around each call, so host launch
  // latency counts) and records it with its cost. On CUDA with in_graph, also "graph_ms": the op
  // captured once in a CUDA graph and replayed reps times back to back, per call: its device time
  // without host latency, as inside a decode step's graph (weights that fit the 60 MB L2 may stay
  // cached between replays). in_graph needs a capture-safe op (no host planning or uploads); on
  // CUDA an op without it gets "queued_ms" instead: reps calls queued back to back, per call, so
  // the host plans each call while the device runs the one before, as inside a model step.
  void time(const std::string& name, const Cost& cost, const std::function<void()>& op,
            bool in_graph = true) {
    op();
    op();
    std::vector<double> t;
    for (int64_t r = 0; r < reps_; ++r) {
      timer_.start();
      op();
      t.push_back(timer_.stop());
    }
    std::sort(t.begin(), t.end());
    const double ms = t[t.size() / 2];
    rows_.push_back({{"op", name},
                     {"ms", ms},
                     {"bytes", cost.bytes},
                     {"flops", cost.flops},
                     {"floor_ms", cost.floor_ms()},
                     {"ratio", ms / cost.floor_ms()},
                     {"tb_per_s", cost.bytes / (ms * 1e-3) / 1e12},
                     {"tflops", cost.flops / (ms * 1e-3) / 1e12}});
    std::fprintf(stderr, "%-44s %9.4f ms  floor %9.4f ms  ratio %6.2f", name.c_str(), ms,
                 cost.floor_ms(), ms / cost.floor_ms());
    if (in_graph && ctx_.device == Device::kCuda) {
      Expected<double> g = graph_ms(op);
      nlohmann::json& row = rows_.back();
      if (g.ok()) {
        row["graph_ms"] = *g;
        row["graph_ratio"] = *g / cost.floor_ms();
        std::fprintf(stderr, "  in graph %9.4f ms  ratio %6.2f", *g, *g / cost.floor_ms());
      } else {
        row["graph_error"] = g.error().message;
      }
    } else if (ctx_.device == Device::kCuda) {
      timer_.start();
      for (int64_t r = 0; r < reps_; ++r) op();
      const double q = timer_.stop() / static_cast<double>(reps_);
      rows_.back()["queued_ms"] = q;
      rows_.back()["queued_ratio"] = q / cost.floor_ms();
      std::fprintf(stderr, "  queued %9.4f ms  ratio %6.2f", q, q / cost.floor_ms());
    }
    std::fprintf(stderr, "\n");
  }
  // Adds fields to the row time() recorded last.
  void annotate(const nlohmann::json& fields) { rows_.back().update(fields); }
  const KernelContext& ctx() const { return ctx_; }
  nlohmann::json rows() const { return rows_; }

 private:
  // Mean device ms per replay of op captured once, over reps back-to-back replays after two.
  Expected<double> graph_ms(const std::function<void()>& op) {
    begin_graph_capture(ctx_);
    op();
    BEAM_ASSIGN_OR_RETURN(StepGraph graph, end_graph_capture(ctx_));
    launch_graph(ctx_, graph);
    launch_graph(ctx_, graph);
    timer_.start();
    for (int64_t r = 0; r < reps_; ++r) launch_graph(ctx_, graph);
    return timer_.stop() / static_cast<double>(reps_);
  }

  KernelContext ctx_;
  int64_t reps_;
  DeviceTimer timer_;
  uint64_t seed_ = 100;
  std::vector<DeviceBuffer> buffers_;
  nlohmann::json rows_ = nlohmann::json::array();
};

Cost gemm_cost(int64_t m, int64_t n, int64_t k, int64_t weight_bytes) {
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
  return {N * K * static_cast<double>(weight_bytes) + (M * K + M * N) * 2, 2 * M * N * K};
}

// Decode GEMMs (M = batch) at the attention, dense MLP and LM head shapes.
Status bench_linears(KernelBench& kb, const BeamConfig& c, const std::vector<int64_t>& batches) {
  const int64_t H = c.hidden_size, qkvg = 2 * c.q_width() + 2 * c.kv_width();
  struct Shape2 {
    const char* name;
    int64_t n, k;
  };
  const Shape2 shapes[] = {{"qkvg", qkvg, H},
                           {"o_proj", H, c.q_width()},
                           {"dense_gate_up", 2 * c.intermediate_size, H},
                           {"dense_down", H, c.intermediate_size},
                           {"lm_head", c.vocab_size, H}};
  for (const Shape2& s : shapes) {
    BEAM_ASSIGN_OR_RETURN(TensorView w, kb.tensor(DType::kBF16, {s.n, s.k}));
    for (int64_t m : batches) {
      BEAM_ASSIGN_OR_RETURN(TensorView x, kb.tensor(DType::kBF16, {m, s.k}, 1.0f));
      BEAM_ASSIGN_OR_RETURN(TensorView y, kb.tensor(DType::kBF16, {m, s.n}));
      kb.time(std::string("linear ") + s.name + " M=" + std::to_string(m),
              gemm_cost(m, s.n, s.k, 2), [&, x, y, w] { linear(kb.ctx(), x, w, y); });
    }
  }
  // The model's q/k/v/gate projection: one linear_split into four outputs.
  BEAM_ASSIGN_OR_RETURN(TensorView w, kb.tensor(DType::kBF16, {qkvg, H}));
  const int64_t widths[] = {c.q_width(), c.kv_width(), c.kv_width(), c.q_width()};
  for (int64_t m : batches) {
    BEAM_ASSIGN_OR_RETURN(TensorView x, kb.tensor(DType::kBF16, {m, H}, 1.0f));
    std::vector<TensorView> outs;
    for (int64_t n : widths) {
      BEAM_ASSIGN_OR_RETURN(TensorView y, kb.tensor(DType::kBF16, {m, n}));
      outs.push_back(y);
    }
    kb.time("linear_split qkvg M=" + std::to_string(m), gemm_cost(m, qkvg, H, 2),
            [&, x, w, outs] { linear_split(kb.ctx(), x, w, outs); });
  }
  return ok_status();
}

// A trained router's load imbalance, modelled: expert e's popularity is exp(sigma * z_e) with
// z_e ~ N(0, 1) (lognormal, sigma = 1: at T = 128 and top-8 the hottest expert takes ~38 rows
// on average over seeds, 46 with bench_moe's, where uniform routing gives ~13), and each token
// takes top_k distinct experts by Gumbel-top-k sampling from those popularities. Deterministic
// for a seed.
std::vector<int32_t> skewed_routing(int64_t T, int64_t E, int64_t top_k, uint32_t seed) {
  constexpr double kSigma = 1.0;
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(1e-12, 1.0);
  std::vector<double> log_popularity(static_cast<size_t>(E));
  for (double& l : log_popularity) l = kSigma * normal(rng);
  std::vector<int32_t> ids, order(static_cast<size_t>(E));
  std::vector<double> key(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    for (size_t e = 0; e < key.size(); ++e)
      key[e] = log_popularity[e] - std::log(-std::log(uniform(rng)));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(),
                      [&key](int32_t a, int32_t b) { return key[a] > key[b]; });
    ids.insert(ids.end(), order.begin(), order.begin() + top_k);
  }
  return ids;
}

// Router + grouped top-k + routed experts at batch T (floor: the experts the routing touched),
// each experts row with the routing's distinct experts and hottest expert's rows; from T = 32
// also the experts under skewed_routing (the model's random-weight router routes nearly
// uniformly; a trained one does not).
Status bench_moe(KernelBench& kb, const BeamConfig& c, const std::vector<int64_t>& batches) {
  const int64_t H = c.hidden_size, E = c.num_experts, K = c.num_experts_per_tok,
                Im = c.moe_intermediate_size;
  BEAM_ASSIGN_OR_RETURN(TensorView router, kb.tensor(DType::kF32, {E, H}));
  BEAM_ASSIGN_OR_RETURN(TensorView bias, kb.tensor(DType::kF32, {E}));
  BEAM_ASSIGN_OR_RETURN(TensorView gate_up, kb.tensor(DType::kBF16, {E, 2 * Im, H}));
  BEAM_ASSIGN_OR_RETURN(TensorView down, kb.tensor(DType::kBF16, {E, H, Im}));
  const RouterParams rp{c.num_groups, c.topk_groups, K, c.norm_topk_prob, c.routed_scaling_factor};
  for (int64_t t : batches) {
    BEAM_ASSIGN_OR_RETURN(TensorView x, kb.tensor(DType::kBF16, {t, H}, 1.0f));
    BEAM_ASSIGN_OR_RETURN(TensorView logits, kb.tensor(DType::kF32, {t, E}));
    BEAM_ASSIGN_OR_RETURN(TensorView ids, kb.tensor(DType::kF32, {t, K}));
    ids.dtype = DType::kI32;
    BEAM_ASSIGN_OR_RETURN(TensorView wts, kb.tensor(DType::kF32, {t, K}));
    BEAM_ASSIGN_OR_RETURN(TensorView out, kb.tensor(DType::kBF16, {t, H}));
    linear(kb.ctx(), x, router, logits);
    moe_route(kb.ctx(), logits, bias, rp, ids, wts);
    std::vector<int32_t> host(static_cast<size_t>(t * K));
    copy_tensor(kb.ctx(), TensorView{host.data(), DType::kI32, ids.shape, Device::kCpu}, ids);
    Cost router_cost = gemm_cost(t, E, H, 4);
    kb.time("moe router+route T=" + std::to_string(t), router_cost, [&, x, ids, wts] {
      moe_router_route(kb.ctx(), x, router, bias, rp, ids, wts);
    });
    // The experts on `routing` (ids on the device, their host copy).
    auto time_experts = [&](const std::string& what, const TensorView& routed,
                            const std::vector<int32_t>& routing) {
      const ExpertLoad load = expert_load(routing, 1);
      const int64_t touched = load.touched[0];
      Cost experts = moe_cost(c, t, touched);
      experts.bytes -= static_cast<double>(E * H + E) * 4;  // the router is timed above
      experts.flops -= 2.0 * static_cast<double>(t * E * H);
      kb.time("moe_experts T=" + std::to_string(t) + what + " (" + std::to_string(touched) +
                  " experts)",
              experts, [&, x, routed, wts, out] {
                moe_experts(kb.ctx(), x, gate_up, down, routed, wts, out);
              });
      kb.annotate({{"experts_touched", touched}, {"hottest_expert_rows", load.max_rows[0]}});
    };
    time_experts("", ids, host);
    if (t >= 32 && K <= E) {
      const std::vector<int32_t> skewed = skewed_routing(t, E, K, static_cast<uint32_t>(t));
      BEAM_ASSIGN_OR_RETURN(TensorView skewed_ids, kb.upload(DType::kI32, skewed));
      time_experts(" skewed", skewed_ids.reshape({t, K}), skewed);
    }
  }
  return ok_status();
}

// paged_attention alone: `seqs` sequences, each with q_count queries ending at key kv_len − 1,
// P entering P·V as `probs` says (KernelContext::attention_probs).
Status bench_attention_case(KernelBench& kb, const BeamConfig& c, AttentionKind kind, int64_t seqs,
                            int64_t q_count, int64_t kv_len, AttentionProbs probs,
                            const std::string& name) {
  const KernelBench::Scope scope(kb);
  const int64_t bs = 64, Nq = c.num_heads, Nkv = c.num_kv_heads, D = c.head_dim;
  const int64_t blocks_per_seq = (kv_len + bs - 1) / bs, T = seqs * q_count;
  BEAM_ASSIGN_OR_RETURN(TensorView k,
                        kb.tensor(DType::kBF16, {seqs * blocks_per_seq, bs, Nkv, D}, 1.0f));
  BEAM_ASSIGN_OR_RETURN(TensorView v,
                        kb.tensor(DType::kBF16, {seqs * blocks_per_seq, bs, Nkv, D}, 1.0f));
  BEAM_ASSIGN_OR_RETURN(TensorView q, kb.tensor(DType::kBF16, {T, Nq, D}, 1.0f));
  BEAM_ASSIGN_OR_RETURN(TensorView o, kb.tensor(DType::kBF16, {T, Nq, D}));
  auto tables = std::make_shared<std::vector<int32_t>>(static_cast<size_t>(seqs * blocks_per_seq));
  for (size_t i = 0; i < tables->size(); ++i) (*tables)[i] = static_cast<int32_t>(i);
  std::vector<AttentionSeq> list;
  int64_t keys = 0;
  for (int64_t s = 0; s < seqs; ++s) {
    const auto table = std::span<const int32_t>(*tables).subspan(
        static_cast<size_t>(s * blocks_per_seq), static_cast<size_t>(blocks_per_seq));
    list.push_back(AttentionSeq{s * q_count, q_count, kv_len - q_count, 0, kv_len, table});
    if (q_count == 1) list.back().prompt_rows = 0;  // a decode row (--enable-deterministic-inference)
    keys += keys_seen_sum(c, kind, kv_len - q_count, q_count);
  }
  const int64_t window = kind == AttentionKind::kSliding ? c.sliding_window : 0;
  const int64_t rows_read = seqs * std::min(kv_len, window > 0 ? window + q_count - 1 : kv_len);
  Cost cost{static_cast<double>(rows_read * c.kv_bytes_per_token_per_layer() + 2 * T * Nq * D * 2),
            4.0 * static_cast<double>(Nq * D) * static_cast<double>(keys)};
  PagedKv kv{k, v, bs};
  KernelContext ctx = kb.ctx();
  ctx.attention_probs = probs;
  kb.time(name, cost, [&] { paged_attention(ctx, q, kv, list, window, o); }, false);
  if (q_count == 1 && ctx.device == Device::kCuda) {
    // The decode graphs' path: planned into a fixed slot outside the graph, then captured.
    const int slot = kind == AttentionKind::kSliding ? 1 : 0;
    plan_fixed_attention(ctx, slot, kv, T, Nq, D, list, window);
    kb.time(name + " fixed", cost, [&] { fixed_paged_attention(ctx, slot, q, kv, window, o); });
  }
  return ok_status();
}

// Decode rows of each batch at `context` keys; with chunk_rows > 0 a prefill chunk of that many
// rows ending at `context` keys (chunked prefill's tail, speculative verification); with prefill >
// 0 a prompt of that many tokens.
Status bench_attention(KernelBench& kb, const BeamConfig& c, const std::vector<int64_t>& batches,
                       int64_t context, int64_t chunk_rows, int64_t prefill) {
  const AttentionProbs probs = kb.ctx().attention_probs;
  if (chunk_rows > 0) {
    const std::string t = " T=" + std::to_string(chunk_rows) + " ctx=" + std::to_string(context);
    BEAM_RETURN_IF_ERROR(bench_attention_case(kb, c, AttentionKind::kSliding, 1, chunk_rows,
                                              context, probs, "attention chunk sliding" + t));
    BEAM_RETURN_IF_ERROR(bench_attention_case(kb, c, AttentionKind::kFull, 1, chunk_rows, context,
                                              probs, "attention chunk full" + t));
  }
  for (int64_t b : batches) {
    BEAM_RETURN_IF_ERROR(bench_attention_case(
        kb, c, AttentionKind::kSliding, b, 1, context, probs,
        "attention decode sliding B=" + std::to_string(b) + " ctx=" + std::to_string(context)));
    BEAM_RETURN_IF_ERROR(bench_attention_case(
        kb, c, AttentionKind::kFull, b, 1, context, probs,
        "attention decode full B=" + std::to_string(b) + " ctx=" + std::to_string(context)));
  }
  if (prefill > 0) {
    // Both ways P may enter P·V (fp32, the default; bf16 as FlashAttention), each kind in turn.
    const std::string t = " T=" + std::to_string(prefill);
    for (AttentionProbs pr : {AttentionProbs::kFp32, AttentionProbs::kBf16}) {
      const std::string suffix = pr == AttentionProbs::kBf16 ? t + " P=bf16" : t;
      BEAM_RETURN_IF_ERROR(bench_attention_case(kb, c, AttentionKind::kSliding, 1, prefill, prefill,
                                                pr, "attention prefill sliding" + suffix));
      BEAM_RETURN_IF_ERROR(bench_attention_case(kb, c, AttentionKind::kFull, 1, prefill, prefill,
                                                pr, "attention prefill full" + suffix));
    }
    BEAM_RETURN_IF_ERROR(bench_linears(kb, c, {prefill}));
  }
  return ok_status();
}

// Peaked logits like a model's: token i of row r has logit -2 ln(rank), its rank a permutation
// of the vocabulary that differs by row (probabilities ∝ rank^-2: the top token ~61%, top-p 0.9
// a handful of tokens).
std::vector<float> peaked_logits(int64_t rows, int64_t vocab) {
  std::vector<float> out(static_cast<size_t>(rows * vocab));
  constexpr int64_t kStride = 1000003;  // prime, so i -> i * kStride mod vocab permutes the row
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < vocab; ++i) {
      const int64_t rank = 1 + (i * kStride + r * 7919) % vocab;
      out[static_cast<size_t>(r * vocab + i)] =
          static_cast<float>(-2.0 * std::log(static_cast<double>(rank)));
    }
  return out;
}

// Sampling and scoring over [rows, vocab] f32 logits (CUDA only: the CPU samples in runtime/):
// greedy alone, and a greedy and a top-p draw with 20 logprobs a row, at each batch; the draw on
// flat rows (fill_random's bounded N(0, 3) logits: a nucleus of thousands of tokens, the radix
// selects) and on peaked ones (peaked_logits: a few tokens, the draw's candidates), and with
// top-k 20 (Qwen's recommended 20 / 0.95 / T 0.6, flat rows); and prompt-logprob scoring of 512
// rows (a step's cap) with 0 and 20 alternatives. Floor: one read of the rows' logits.
Status bench_sampling(KernelBench& kb, const BeamConfig& c, const std::vector<int64_t>& batches) {
  if (kb.ctx().device != Device::kCuda) return ok_status();
  const int64_t V = c.vocab_size;
  const auto logits_cost = [V](int64_t rows) { return Cost{static_cast<double>(rows * V) * 4, 0}; };
  for (int64_t rows : batches) {
    KernelBench::Scope scope(kb);
    BEAM_ASSIGN_OR_RETURN(TensorView flat, kb.tensor(DType::kF32, {rows, V}, 3.0f));
    BEAM_ASSIGN_OR_RETURN(TensorView peaked, kb.upload(DType::kF32, peaked_logits(rows, V)));
    peaked = peaked.reshape({rows, V});
    BEAM_ASSIGN_OR_RETURN(TensorView scratch, kb.empty(DType::kF32, {rows, V}));
    BEAM_ASSIGN_OR_RETURN(TensorView out, kb.empty(DType::kI32, {rows, kSampledRowWords}));
    struct Mode {
      const char* name;
      bool peaked;            // the peaked logits, else the flat ones
      float inv_temperature;  // 0: greedy
      double top_p;
      int64_t top_k;
      int32_t num_top_logprobs;  // -1: none
    };
    constexpr int32_t kTop = kMaxSampledTopLogprobs;
    for (const Mode& m : {Mode{"greedy", false, 0.0f, 1.0, 0, -1},
                          Mode{"greedy +20 logprobs", false, 0.0f, 1.0, 0, kTop},
                          Mode{"top_p 0.9 +20 logprobs", false, 1.0f, 0.9, 0, kTop},
                          Mode{"top_p 0.9 peaked", true, 1.0f, 0.9, 0, -1},
                          Mode{"top_p 0.9 peaked +20 logprobs", true, 1.0f, 0.9, 0, kTop},
                          Mode{"top_k 20 top_p 0.95 T=0.6", false, 1.0f / 0.6f, 0.95, 20, -1}}) {
      const TensorView logits = m.peaked ? peaked : flat;
      std::vector<SamplingRowParams> params(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        SamplingRowParams& p = params[static_cast<size_t>(r)];
        p.logits_row = static_cast<int32_t>(r);
        p.num_top_logprobs = m.num_top_logprobs;
        p.uniform = 0.5;
        p.top_p = m.top_p;
        p.top_k = m.top_k;
        p.inv_temperature = m.inv_temperature;
      }
      kb.time(
          std::string("sample_tokens ") + m.name + " rows=" + std::to_string(rows),
          logits_cost(rows),
          [&, logits, scratch, out, params] {
            sample_tokens(kb.ctx(), logits, params, {}, {}, scratch, out);
          },
          false);
    }
  }
  constexpr int64_t kScoreRows = 512;
  KernelBench::Scope scope(kb);
  BEAM_ASSIGN_OR_RETURN(TensorView logits, kb.tensor(DType::kF32, {kScoreRows, V}, 3.0f));
  BEAM_ASSIGN_OR_RETURN(TensorView out, kb.empty(DType::kI32, {kScoreRows, kSampledRowWords}));
  for (int32_t num_top : {0, kMaxSampledTopLogprobs}) {
    std::vector<ScoreRowParams> params(static_cast<size_t>(kScoreRows));
    for (int64_t r = 0; r < kScoreRows; ++r) {
      params[static_cast<size_t>(r)].logits_row = static_cast<int32_t>(r);
      params[static_cast<size_t>(r)].token = static_cast<int32_t>((r * 7919) % V);
      params[static_cast<size_t>(r)].num_top = num_top;
    }
    kb.time(
        "score_tokens top " + std::to_string(num_top) + " rows=" + std::to_string(kScoreRows),
        logits_cost(kScoreRows),
        [&, logits, out, params] { score_tokens(kb.ctx(), logits, params, out); }, false);
  }
  return ok_status();
}

}  // namespace

int bench_kernels(int argc, char** argv) {
  auto flags = bench_common_flags();
  flags.insert({"batches", "context", "chunk-rows", "prefill-tokens", "reps"});
  auto args = Args::parse(argc, argv, flags, bench_common_bool_flags());
  if (!args.ok()) return bench_fail(args.error().message);
  auto batches = Args::parse_int_list("batches", args->get_or("batches", "1,32,128"));
  auto context = args->get_int("context", 512);
  auto prefill = args->get_int("prefill-tokens", 8192);
  auto chunk_rows = args->get_int("chunk-rows", 0);
  auto reps = args->get_int("reps", 20);
  for (const auto* e : {&context, &chunk_rows, &prefill, &reps})
    if (!e->ok()) return bench_fail(e->error().message);
  if (!batches.ok()) return bench_fail(batches.error().message);
  if (*reps < 1 || *context < 1 || *prefill < 0 || *chunk_rows < 0 || *chunk_rows > *context)
    return bench_fail(
        "--reps, --context must be >= 1, --prefill-tokens >= 0, --chunk-rows in [0, --context]");
  auto config = slice_config_from_args(*args, 6);
  if (!config.ok()) return bench_fail(config.error().message);
  auto dev = open_bench_device(*args);
  if (!dev.ok()) return bench_fail(dev.error().message);
  KernelBench kb((*dev)->ctx, *reps);
  Status st = bench_linears(kb, *config, *batches);
  // The routed experts also at the prefill size (compute-bound: the floor is FLOPs / 798 TFLOP/s).
  std::vector<int64_t> moe_sizes = *batches;
  if (*prefill > 0) moe_sizes.push_back(*prefill);
  if (st.ok() && config->num_experts > 0) st = bench_moe(kb, *config, moe_sizes);
  if (st.ok()) st = bench_attention(kb, *config, *batches, *context, *chunk_rows, *prefill);
  if (st.ok()) st = bench_sampling(kb, *config, *batches);
  if (!st.ok()) return bench_fail(st.error().message);
  nlohmann::json report =
      report_header("kernels", *args, (*dev)->ctx, *config, command_line("kernels", argc, argv));
  report["ops"] = kb.rows();
  report["ceilings"] = {{"hbm_bytes_per_s", kHbmBytesPerSecond},
                        {"bf16_flops_per_s", kBf16FlopsPerSecond}};
  return emit_report(report, *args);
}

}  // namespace beam::cli
