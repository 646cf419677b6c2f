// RateWindow (see rate_window.h).
#include "runtime/rate_window.h"

namespace beam {

void RateWindow::add(double t_s, int64_t total) {
  samples_.push_back({t_s, total});
  while (samples_.front().t_s < t_s - span_s_) samples_.pop_front();
}

double RateWindow::rate(double now_s) const {
  if (samples_.size() < 2 || now_s - samples_.back().t_s > span_s_) return 0;
  const Sample& first = samples_.front();
  const Sample& last = samples_.back();
  const double dt = last.t_s - first.t_s;
  return dt > 0 ? static_cast<double>(last.total - first.total) / dt : 0;
}

}  // namespace beam
