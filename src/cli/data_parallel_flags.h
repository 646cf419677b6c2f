// The serve and bench serve commands' data-parallel flags as vLLM and SGLang spell them, parsed
// into the engine's settings (EngineOptions::data_parallel_size, load_balance).
#pragma once

#include "cli/args.h"
#include "core/status.h"
#include "runtime/engine.h"

namespace beam::cli {

// The valued flags data_parallel_from_args reads (for Args::parse's accepted set).
inline constexpr const char* kDataParallelFlags[] = {"data-parallel-size", "dp-size",
                                                     "load-balance-method"};

// vLLM's --data-parallel-size N or SGLang's --dp-size N (replicas of the engine, default 1; one
// of the two), and SGLang's --load-balance-method cache_aware|round_robin|shortest_queue|
// minimum_tokens (default cache_aware, its router's default). Both names given, N outside [1, 64],
// or another method is an error naming the flag.
Status data_parallel_from_args(const Args& args, EngineOptions* options);

}  // namespace beam::cli
