// ServerMetrics: the counters and latency histograms of the HTTP front end, and the Prometheus
// text exposition of them together with the engine's numbers (tokens, prefix-cache hit rate, KV
// pool blocks, queue depth). Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/engine.h"
#include "server/metrics/histogram.h"

namespace beam::server {

// Status recorded for a request whose client went away before the response ended (nginx's 499).
inline constexpr int kClientClosedStatus = 499;

// Numbers owned by other parts of the server, sampled when /metrics is rendered.
struct ServerGauges {
  bool ready = false;                 // model loaded
  int64_t open_connections = 0;
  int64_t active_generations = 0;     // engine requests the server is still streaming
  // Each data-parallel replica's stats: with several, their queues and KV use are rendered per
  // replica too (label replica="d").
  std::vector<EngineStats> replicas;
};

class ServerMetrics {
 public:
  ServerMetrics();

  // One call per finished HTTP request (status kClientClosedStatus when the client left).
  void record_request(std::string_view endpoint, int status);
  void observe_time_to_first_token(double seconds);
  void observe_inter_token_latency(double seconds);
  void observe_end_to_end(double seconds);
  // One /update_weights_from_disk that served new weights: request to answer (the RL loop's sync).
  void observe_weight_update(double seconds);

  // Requests recorded so far, by (endpoint, status).
  std::map<std::pair<std::string, int>, int64_t> requests() const;

  // The Prometheus text format (version 0.0.4). `engine` is absent while the model loads.
  std::string render(const std::optional<EngineStats>& engine, const ServerGauges& gauges) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  Histogram weight_updates_;
};

// Escapes a Prometheus label value (backslash, quote, newline).
std::string prometheus_label(std::string_view value);

}  // namespace beam::server
