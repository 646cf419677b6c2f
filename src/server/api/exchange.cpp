// Exchange (see exchange.h).
#include "server/api/exchange.h"

#include <cstdio>

#include "core/logging.h"

namespace beam::server {

Exchange::Exchange(http::HttpRequest request, std::shared_ptr<http::Responder> responder, std::string endpoint,
                   ErrorFlavor flavor, ServerMetrics* metrics)
    : request_(std::move(request)),
      responder_(std::move(responder)),
      endpoint_(std::move(endpoint)),
      flavor_(flavor),
      metrics_(metrics),
      received_(std::chrono::steady_clock::now()) {}

void Exchange::respond_json(int status, std::string body) {
  respond_text(status, "application/json", std::move(body));
}

void Exchange::respond_text(int status, const std::string& content_type, std::string body) {
  if (finished_.load()) return;
  responder_->respond(status, content_type, std::move(body));
  finish(status);
}

void Exchange::respond_error(const ApiError& error) {
  if (!error.message.empty()) note("error", "\"" + error.message.substr(0, 200) + "\"");
  respond_json(http_status(error.kind),
               flavor_ == ErrorFlavor::kAnthropic ? anthropic_error_body(error) : openai_error_body(error));
}

void Exchange::start_stream(const std::string& content_type) {
  if (stream_started_ || finished_.load()) return;
  stream_started_ = true;
  responder_->start_stream(stream_status_, content_type);
}

void Exchange::send(std::string chunk) {
  if (finished_.load()) return;
  responder_->send(std::move(chunk));
}

void Exchange::end_stream() {
  if (finished_.load()) return;
  responder_->end();
  finish(stream_status_);
}

void Exchange::note(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(notes_mu_);
  for (auto& [k, v] : notes_) {
    if (k != key) continue;
    v = value;  // a later note of a key replaces it (a beam search notes each step's prompt)
    return;
  }
  notes_.emplace_back(key, value);
}

void Exchange::finish(int status) {
  if (finished_.exchange(true)) return;
  if (responder_->disconnected()) status = kClientClosedStatus;
  metrics_->record_request(endpoint_, status);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - received_).count();
  char head[64];
  std::snprintf(head, sizeof head, " %d %.1fms", status, ms);
  std::string line = request_.method + " " + request_.path + head + " remote=" + request_.remote;
  {
    std::lock_guard<std::mutex> lock(notes_mu_);
    for (const auto& [k, v] : notes_) line += " " + k + "=" + v;
  }
  log_info(line);
}

}  // namespace beam::server
