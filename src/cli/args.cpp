// Args implementation.
#include "cli/args.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace beam::cli {

Expected<Args> Args::parse(int argc, char** argv, const std::set<std::string>& flags,
                           const std::set<std::string>& bool_flags,
                           const std::set<std::string>& list_flags) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) return make_error("unexpected argument '" + s + "'");
    std::string key = s.substr(2), value;
    bool has_value = false;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    if (!flags.count(key) && !bool_flags.count(key)) return make_error("unknown flag --" + key);
    if (bool_flags.count(key)) {
      a.values_[key] = has_value ? value : "true";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) return make_error("flag --" + key + " needs a value");
      value = argv[++i];
    }
    a.values_[key] = value;
    if (list_flags.count(key)) {
      std::vector<std::string>& all = a.lists_[key];
      all.push_back(value);
      for (; i + 1 < argc && std::string_view(argv[i + 1]).rfind("--", 0) != 0; ++i)
        all.emplace_back(argv[i + 1]);
    }
  }
  return a;
}

std::vector<std::string> Args::get_all(const std::string& key) const {
  auto it = lists_.find(key);
  return it == lists_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<std::string> Args::get(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string Args::get_or(const std::string& key, const std::string& fallback) const {
  auto v = get(key);
  return v ? *v : fallback;
}

Expected<int64_t> Args::get_int(const std::string& key, int64_t fallback) const {
  auto v = get(key);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (errno || end == v->c_str() || *end) return make_error("--" + key + ": not an integer: '" + *v + "'");
  return static_cast<int64_t>(x);
}

Expected<double> Args::get_double(const std::string& key, double fallback) const {
  auto v = get(key);
  if (!v) return fallback;
  errno = 0;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (errno || end == v->c_str() || *end) return make_error("--" + key + ": not a number: '" + *v + "'");
  return x;
}

Expected<int64_t> Args::get_int_in(const std::string& key, int64_t fallback, int64_t lo,
                                   int64_t hi) const {
  BEAM_ASSIGN_OR_RETURN(const int64_t x, get_int(key, fallback));
  if (x < lo || x > hi)
    return make_error("--" + key + " must be in [" + std::to_string(lo) + ", " +
                      std::to_string(hi) + "], got " + std::to_string(x));
  return x;
}

Expected<double> Args::get_double_in(const std::string& key, double fallback, double lo,
                                     double hi) const {
  BEAM_ASSIGN_OR_RETURN(const double x, get_double(key, fallback));
  if (!(x >= lo && x <= hi)) {
    std::ostringstream why;
    why << "--" << key << " must be in [" << lo << ", " << hi << "], got "
        << get_or(key, std::to_string(x));
    return make_error(why.str());
  }
  return x;
}

Expected<int> Args::get_threads() const {
  BEAM_ASSIGN_OR_RETURN(const int64_t n, get_int_in("threads", 0, 0, kMaxThreads));
  return static_cast<int>(n);
}

Expected<std::optional<int64_t>> Args::get_mebibytes(const std::string& key) const {
  if (!has(key)) return std::optional<int64_t>();
  BEAM_ASSIGN_OR_RETURN(const int64_t mb, get_int_in(key, 0, 1, int64_t{1} << 30));
  return std::optional<int64_t>(mb << 20);
}

Expected<Device> Args::get_device() const {
  const std::string v = get_or("device", "cpu");
  if (v == "cpu") return Device::kCpu;
  if (v == "cuda") return Device::kCuda;
  return make_error("--device: expected cpu or cuda, got '" + v + "'");
}

Expected<AttentionProbs> Args::get_attention_probs() const {
  const std::string v = get_or("attention-probs", "fp32");
  if (v == "fp32") return AttentionProbs::kFp32;
  if (v == "bf16") return AttentionProbs::kBf16;
  return make_error("--attention-probs: expected fp32 or bf16, got '" + v + "'");
}

BatchInvariance Args::get_batch_invariance() const {
  return has("enable-deterministic-inference") ? BatchInvariance::kAlways
                                               : BatchInvariance::kCpuOnly;
}

Expected<bool> Args::get_dummy_weights() const {
  const std::string v = get_or("load-format", "auto");
  if (v == "auto" || v == "safetensors") return false;
  if (v == "dummy") return true;
  return make_error("--load-format: expected auto, safetensors or dummy, got '" + v + "'");
}

Expected<std::vector<int64_t>> Args::parse_int_list(const std::string& key,
                                                    const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string tok;
  while (std::getline(ss, tok, ',')) {
    errno = 0;
    char* end = nullptr;
    long long x = std::strtoll(tok.c_str(), &end, 10);
    if (tok.empty() || errno || *end) return make_error("--" + key + ": bad integer '" + tok + "'");
    out.push_back(x);
  }
  if (out.empty()) return make_error("--" + key + ": empty list");
  return out;
}

bool Args::wants_help(int argc, char** argv) {
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--help" || a == "-h") return true;
  }
  return false;
}

}  // namespace beam::cli
