// Exchange: one HTTP request and its response, finished exactly once: the response (JSON, error
// or SSE stream), the metrics count by endpoint and status (499 when the client left first) and
// the request's single log line. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "server/api/api_error.h"
#include "server/http/http_server.h"
#include "server/metrics/server_metrics.h"

namespace beam::server {

// Which error body shape an endpoint speaks.
enum class ErrorFlavor { kOpenAi, kAnthropic };

class Exchange {
 public:
  Exchange(http::HttpRequest request, std::shared_ptr<http::Responder> responder, std::string endpoint,
           ErrorFlavor flavor, ServerMetrics* metrics);

  const http::HttpRequest& request() const { return request_; }
  const std::string& endpoint() const { return endpoint_; }
  std::chrono::steady_clock::time_point received() const { return received_; }
  ErrorFlavor flavor() const { return flavor_; }

  void respond_json(int status, std::string body);
  void respond_text(int status, const std::string& content_type, std::string body);
  void respond_error(const ApiError& error);
  // Streaming: start once, send any number of chunks, then end.
  void start_stream(const std::string& content_type);
  bool stream_started() const { return stream_started_; }
  void send(std::string chunk);
  void end_stream();

  // Adds "key=value" to the request's log line (a key noted again keeps its place, new value).
  void note(const std::string& key, const std::string& value);
  void on_disconnect(std::function<void()> fn) { responder_->on_disconnect(std::move(fn)); }
  bool disconnected() const { return responder_->disconnected(); }

 private:
  void finish(int status);

  http::HttpRequest request_;
  std::shared_ptr<http::Responder> responder_;
  std::string endpoint_;
  ErrorFlavor flavor_;
  ServerMetrics* metrics_;
  std::chrono::steady_clock::time_point received_;
  std::atomic<bool> finished_{false};
  bool stream_started_ = false;
  int stream_status_ = 200;
  std::mutex notes_mu_;
  std::vector<std::pair<std::string, std::string>> notes_;  // in the order first noted
};

}  // namespace beam::server
