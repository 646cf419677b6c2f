// Histogram: a Prometheus histogram (fixed upper bounds, cumulative buckets on output, sum and
// count). Not thread-safe on its own; ServerMetrics guards it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace beam::server {

class Histogram {
 public:
  // `upper_bounds` ascending; a +Inf bucket is always added.
  explicit Histogram(std::vector<double> upper_bounds);

  void observe(double value);
  int64_t count() const { return count_; }
  double sum() const { return sum_; }

  // Appends `<name>_bucket{le="…"}`, `<name>_sum` and `<name>_count` lines.
  void render(std::string& out, std::string_view name) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

// Latency buckets in seconds, 1 ms … 60 s.
std::vector<double> latency_buckets_s();

// Prometheus number formatting: integers without a fraction, "+Inf", "NaN".
std::string prometheus_number(double value);

}  // namespace beam::server
