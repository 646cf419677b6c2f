// Command-line flags: "--key value", "--key=value" and bare "--flag"; unknown flags are errors. A
// list flag takes every value of each occurrence, argparse's nargs='+' ("--key a b --key c").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "kernels/api/context.h"

namespace beam::cli {

class Args {
 public:
  // Parses argv after the subcommand. `flags` lists every accepted key; `bool_flags` those that
  // take no value; `list_flags` (among `flags`) those whose values accumulate.
  static Expected<Args> parse(int argc, char** argv, const std::set<std::string>& flags,
                              const std::set<std::string>& bool_flags = {},
                              const std::set<std::string>& list_flags = {});

  bool has(const std::string& key) const { return values_.count(key) > 0; }
  // The value (a flag given twice: the last one).
  std::optional<std::string> get(const std::string& key) const;
  // Every value of a list flag, in order (empty when absent).
  std::vector<std::string> get_all(const std::string& key) const;
  std::string get_or(const std::string& key, const std::string& fallback) const;
  Expected<int64_t> get_int(const std::string& key, int64_t fallback) const;
  Expected<double> get_double(const std::string& key, double fallback) const;
  // The same, and an error naming the flag and its range when the value is outside [lo, hi]
  // (a number past every sensible setting would overflow what is computed from it, or ask for
  // a million threads); NaN is outside every range.
  Expected<int64_t> get_int_in(const std::string& key, int64_t fallback, int64_t lo,
                               int64_t hi) const;
  Expected<double> get_double_in(const std::string& key, double fallback, double lo,
                                 double hi) const;
  // --threads: the engine's CPU threads, 0 (the default) for every core; at most kMaxThreads.
  Expected<int> get_threads() const;
  static constexpr int64_t kMaxThreads = 1024;
  // --KEY in MiB as bytes (1 MiB to 1 PiB); nullopt when absent.
  Expected<std::optional<int64_t>> get_mebibytes(const std::string& key) const;
  // --device cpu|cuda (Device::kCpu when absent); the one parser of the flag for every command.
  Expected<Device> get_device() const;
  // --attention-probs fp32|bf16 (KernelContext::attention_probs; fp32 when absent).
  Expected<AttentionProbs> get_attention_probs() const;
  // --enable-deterministic-inference: BatchInvariance::kAlways, else kCpuOnly.
  BatchInvariance get_batch_invariance() const;
  // --load-format auto|safetensors (the checkpoint; the default) or dummy (random weights from
  // config.json alone, vLLM's and SGLang's dummy format): true for dummy.
  Expected<bool> get_dummy_weights() const;
  // Parses "1,2,3" into integers.
  static Expected<std::vector<int64_t>> parse_int_list(const std::string& key,
                                                       const std::string& text);
  // Whether `--help` or `-h` is among argv (a command then prints its usage, cli/usage.h).
  static bool wants_help(int argc, char** argv);

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> lists_;  // list flags' values
};

}  // namespace beam::cli
