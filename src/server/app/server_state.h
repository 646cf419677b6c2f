// ServerState: what the routes share — options, the model once loaded (or the load error),
// metrics, job counters, the worker pool and the id source. Owned by ServerApp.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/thread_pool.hpp>

#include "server/api/endpoint_env.h"
#include "server/app/server_app.h"
#include "server/http/http_server.h"

namespace beam::server {

struct ServerState {
  explicit ServerState(const ServeOptions& o) : options(o), workers(static_cast<size_t>(std::max(1, o.worker_threads))) {}

  // The model, or null while loading / after a failed load.
  const ServedModel* model() const { return model_ptr.load(); }
  EndpointEnv env() const {
    return EndpointEnv{model(), &metrics, &counters, &workers, &ids, &jobs};
  }

  ServeOptions options;
  mutable ServerMetrics metrics;
  mutable GenerationCounters counters;
  mutable boost::asio::thread_pool workers;
  mutable IdSource ids;
  mutable JobRegistry jobs;
  std::unique_ptr<ServedModel> owned_model;
  std::atomic<const ServedModel*> model_ptr{nullptr};
  mutable std::mutex load_mu;
  std::condition_variable load_cv;
  bool load_done = false;
  std::optional<std::string> load_error;
  std::unique_ptr<http::HttpServer> http;  // declared last among users of the rest: stops first
};

}  // namespace beam::server
