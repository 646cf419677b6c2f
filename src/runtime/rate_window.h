// RateWindow: a count's rate of change over the last few seconds (e.g. generated tokens per
// second for SGLang's last_gen_throughput). Fed time-ordered samples of a cumulative count.
#pragma once

#include <cstdint>
#include <deque>

namespace beam {

class RateWindow {
 public:
  explicit RateWindow(double span_s) : span_s_(span_s) {}

  // A sample: the cumulative count at time t_s (seconds, non-decreasing across calls).
  void add(double t_s, int64_t total);
  // Count per second between the newest sample and the oldest one within span_s of it; 0 with
  // fewer than two such samples, or when the newest is more than span_s older than now_s
  // (nothing happened lately).
  double rate(double now_s) const;

 private:
  struct Sample {
    double t_s;
    int64_t total;
  };
  double span_s_;
  std::deque<Sample> samples_;
};

}  // namespace beam
