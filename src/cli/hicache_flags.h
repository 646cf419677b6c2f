// The serve and bench commands' hierarchical-cache flags as SGLang spells them, parsed into the
// engine's settings (EngineOptions::enable_hierarchical_cache, hicache_ratio, hicache_bytes).
#pragma once

#include "cli/args.h"
#include "core/status.h"
#include "runtime/engine.h"

namespace beam::cli {

// The valued flags hierarchical_cache_from_args reads (for Args::parse's accepted set); the switch
// "enable-hierarchical-cache" is a boolean flag.
inline constexpr const char* kHierarchicalCacheFlags[] = {"hicache-ratio", "hicache-size",
                                                          "hicache-write-policy"};

// SGLang's --enable-hierarchical-cache with --hicache-ratio R (host blocks per device block,
// default 2), --hicache-size GB (host bytes, overriding the ratio) and --hicache-write-policy
// (write_back, the default; write_through; write_through_selective). A size or ratio without
// the switch, a non-positive one, or another policy is an error naming the flag.
Status hierarchical_cache_from_args(const Args& args, EngineOptions* options);

}  // namespace beam::cli
