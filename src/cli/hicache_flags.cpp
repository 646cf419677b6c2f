// hierarchical_cache_from_args: SGLang's --enable-hierarchical-cache and --hicache-* flags.
#include "cli/hicache_flags.h"

#include <string>

namespace beam::cli {

Status hierarchical_cache_from_args(const Args& args, EngineOptions* options) {
  const bool on = args.has("enable-hierarchical-cache");
  for (const char* flag : kHierarchicalCacheFlags)
    if (!on && args.has(flag))
      return make_error(std::string("--") + flag + " needs --enable-hierarchical-cache");
  options->enable_hierarchical_cache = on;
  if (!on) return ok_status();
  // Host blocks per device block (the engine's bound).
  BEAM_ASSIGN_OR_RETURN(options->hicache_ratio, args.get_double_in("hicache-ratio", 2.0, 1e-6, 1e6));
  if (args.has("hicache-size")) {
    BEAM_ASSIGN_OR_RETURN(double gb, args.get_double("hicache-size", 0));
    if (!(gb > 0) || gb > 1 << 20)
      return make_error("--hicache-size must be a positive number of GB, got " +
                        args.get_or("hicache-size", ""));
    options->hicache_bytes = static_cast<int64_t>(gb * 1e9);  // SGLang counts GB as 1e9 bytes
  }
  const std::string policy = args.get_or("hicache-write-policy", "write_back");
  for (HostWritePolicy p : {HostWritePolicy::kWriteBack, HostWritePolicy::kWriteThrough,
                            HostWritePolicy::kWriteThroughSelective})
    if (policy == host_write_policy_name(p)) {
      options->hicache_write_policy = p;
      return ok_status();
    }
  return make_error("--hicache-write-policy " + policy +
                    ": expected write_back, write_through or write_through_selective");
}

}  // namespace beam::cli
