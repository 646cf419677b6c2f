// data_parallel_from_args: --data-parallel-size / --dp-size and --load-balance-method.
#include "cli/data_parallel_flags.h"

#include <string>

namespace beam::cli {

Status data_parallel_from_args(const Args& args, EngineOptions* options) {
  if (args.has("data-parallel-size") && args.has("dp-size"))
    return make_error(
        "--data-parallel-size and --dp-size (SGLang's name) are one setting: give one");
  const char* size_flag = args.has("dp-size") ? "dp-size" : "data-parallel-size";
  BEAM_ASSIGN_OR_RETURN(int64_t dp, args.get_int(size_flag, 1));
  if (dp < 1 || dp > 64)
    return make_error(std::string("--") + size_flag + " must be in [1, 64], got " +
                      std::to_string(dp));
  options->data_parallel_size = static_cast<int>(dp);
  const std::string method =
      args.get_or("load-balance-method", load_balance_name(options->load_balance));
  const std::optional<LoadBalance> policy = parse_load_balance(method);
  if (!policy)
    return make_error("--load-balance-method must be cache_aware, round_robin, shortest_queue or "
                      "minimum_tokens, got '" + method + "'");
  options->load_balance = *policy;
  return ok_status();
}

}  // namespace beam::cli
