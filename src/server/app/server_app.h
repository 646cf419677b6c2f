// ServerApp: `beamserve serve` as an object — listens at once (so /health can answer 503 while
// loading), loads the model in the background, routes requests (API key check, 404/405, one
// exchange per request), and shuts down in order: HTTP, workers, engine.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "core/status.h"
#include "server/app/model_loader.h"
#include "server/http/http_server.h"

namespace beam::server {

struct ServeOptions {
  ModelLoadOptions model;
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                 // 0: any free port (see ServerApp::port)
  std::optional<std::string> api_key;   // required on every endpoint but /health when set
  int64_t max_body_bytes = int64_t{32} << 20;
  int io_threads = 1;
  int worker_threads = 2;               // request parsing, rendering, detokenizing, encoding
  double health_stall_s = 30;           // /health fails when work waits this long without a step
  bool listen = true;  // false: no HTTP server; requests come through ServerApp::submit only
};

class ServerApp {
 public:
  static Expected<std::unique_ptr<ServerApp>> start(const ServeOptions& options);
  ~ServerApp();

  uint16_t port() const;  // 0 when not listening
  // Blocks until the model is loaded; the load error otherwise.
  Status wait_loaded();
  // Routes a request as if it came over HTTP (API key check included); `responder` gets the
  // answer. For in-process callers such as `beamserve run-batch`.
  void submit(http::HttpRequest request, std::shared_ptr<http::Responder> responder);

 private:
  struct State;
  explicit ServerApp(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace beam::server
