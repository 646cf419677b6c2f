// Histogram (see histogram.h).
#include "server/metrics/histogram.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace beam::server {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), value);  // le semantics
  counts_[static_cast<size_t>(it - bounds_.begin())]++;
  sum_ += value;
  count_++;
}

void Histogram::render(std::string& out, std::string_view name) const {
  int64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    const std::string le = i < bounds_.size() ? prometheus_number(bounds_[i]) : "+Inf";
    out.append(name).append("_bucket{le=\"").append(le).append("\"} ").append(std::to_string(cumulative)).append("\n");
  }
  out.append(name).append("_sum ").append(prometheus_number(sum_)).append("\n");
  out.append(name).append("_count ").append(std::to_string(count_)).append("\n");
}

std::vector<double> latency_buckets_s() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::string prometheus_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return std::to_string(static_cast<int64_t>(value));
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", value);
  return buf;
}

}  // namespace beam::server
