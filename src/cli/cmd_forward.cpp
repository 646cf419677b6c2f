// `beamserve forward`: one prefill over the given tokens on the CPU or GPU 0; writes fp32 logits
// [T, vocab] as .npy.
#include <cstdio>
#include <utility>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "core/npy.h"
#include "core/thread_pool.h"
#include "model/beam/beam_model.h"
#include "model/beam/local_kv_cache.h"
#include "runtime/engine_device.h"

namespace beam::cli {

int cmd_forward(int argc, char** argv) {
  auto args = Args::parse(
      argc, argv,
      {"model", "tokens", "start-pos", "logits-out", "threads", "device", "attention-probs"});
  if (!args.ok()) {
    std::fprintf(stderr, "forward: %s\n%s", args.error().message.c_str(), kForwardUsage);
    return 2;
  }
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "forward: %s\n", m.c_str());
    return 1;
  };
  if (!args->has("model") || !args->has("tokens") || !args->has("logits-out"))
    return fail("--model, --tokens and --logits-out are required");
  auto start_pos = args->get_int("start-pos", 0);
  auto threads = args->get_threads();
  auto device = args->get_device();
  if (!start_pos.ok()) return fail(start_pos.error().message);
  if (!threads.ok()) return fail(threads.error().message);
  if (!device.ok()) return fail(device.error().message);
  auto probs = args->get_attention_probs();
  if (!probs.ok()) return fail(probs.error().message);
  if (*start_pos < 0) return fail("--start-pos must be >= 0");
  auto ids = Args::parse_int_list("tokens", *args->get("tokens"));
  if (!ids.ok()) return fail(ids.error().message);
  auto weights = load_beam_weights(*args->get("model"));
  if (!weights.ok()) return fail(weights.error().message);

  auto dev = open_engine_device(*device, std::move(*weights));  // host copy dropped on CUDA
  if (!dev.ok()) return fail(dev.error().message);
  dev->attention_probs = *probs;

  std::vector<int32_t> tokens(ids->begin(), ids->end());
  int64_t T = static_cast<int64_t>(tokens.size());
  ThreadPool pool(static_cast<int>(*threads));
  BeamModel model(dev->weights, dev->context(&pool));
  auto kv = LocalKvCache::create(model.context(), model.config(), 1, T);
  if (!kv.ok()) return fail(kv.error().message);
  ForwardBatch batch;
  batch.seqs.push_back(SeqChunk{tokens, *start_pos, 0, kv->block_table(0), kv->block_table(0), true});
  ForwardOutput out;
  if (auto st = model.forward(batch, kv->layers(), out); !st.ok()) return fail(st.error().message);
  auto st = write_npy_f32(*args->get("logits-out"), {T, out.vocab_size}, out.logits.data());
  if (!st.ok()) return fail(st.error().message);
  return 0;
}

}  // namespace beam::cli
