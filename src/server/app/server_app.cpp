// ServerApp: routing, API key, lifecycle (see server_app.h).
#include "server/app/server_app.h"

#include <thread>

#include <boost/asio/post.hpp>

#include "core/logging.h"
#include "server/anthropic/messages_observer.h"
#include "server/app/admin_endpoints.h"
#include "server/app/server_state.h"
#include "server/native/native_endpoints.h"
#include "server/openai/chat_endpoint.h"
#include "server/openai/completions.h"
#include "server/openai/embeddings.h"
#include "server/openai/responses_observer.h"
#include "server/openai/score.h"

namespace beam::server {
namespace {

// Where a route runs: inline on the io thread (cheap, never blocks) or on a worker.
enum class RunOn { kIoThread, kWorker };

struct Route {
  const char* path;
  const char* method;
  ErrorFlavor flavor;
  RunOn run_on;
  bool needs_model;
  void (*model_handler)(const EndpointEnv&, const std::shared_ptr<Exchange>&);
  void (*state_handler)(const ServerState&, const std::shared_ptr<Exchange>&);
};

constexpr Route kRoutes[] = {
    {"/health", "GET", ErrorFlavor::kOpenAi, RunOn::kIoThread, false, nullptr, handle_health},
    {"/metrics", "GET", ErrorFlavor::kOpenAi, RunOn::kIoThread, false, nullptr, handle_metrics},
    {"/v1/models", "GET", ErrorFlavor::kOpenAi, RunOn::kIoThread, true, nullptr, handle_models},
    {"/v1/chat/completions", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_chat_completions, nullptr},
    {"/v1/completions", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_completions,
     nullptr},
    {"/v1/embeddings", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_embeddings,
     nullptr},
    {"/pooling", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_pooling, nullptr},
    {"/score", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_score, nullptr},
    {"/v1/score", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_score, nullptr},
    {"/rerank", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_rerank, nullptr},
    {"/v1/rerank", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_rerank, nullptr},
    {"/v2/rerank", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_rerank, nullptr},
    {"/v1/responses", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_responses,
     nullptr},
    {"/v1/messages", "POST", ErrorFlavor::kAnthropic, RunOn::kWorker, true, handle_messages,
     nullptr},
    {"/v1/messages/count_tokens", "POST", ErrorFlavor::kAnthropic, RunOn::kWorker, true,
     handle_count_tokens, nullptr},
    {"/tokenize", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_tokenize, nullptr},
    {"/detokenize", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_detokenize, nullptr},
    {"/generate", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_generate, nullptr},
    {"/update_weights_from_disk", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_update_weights_from_disk, nullptr},
    {"/health_generate", "GET", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_health_generate,
     nullptr},
    {"/get_model_info", "GET", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_get_model_info,
     nullptr},
    {"/get_server_info", "GET", ErrorFlavor::kOpenAi, RunOn::kIoThread, true, nullptr,
     handle_server_info},
    {"/get_load", "GET", ErrorFlavor::kOpenAi, RunOn::kIoThread, true, nullptr, handle_get_load},
    {"/get_weight_version", "GET", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_get_weight_version, nullptr},
    {"/get_weights_by_name", "GET", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_get_weights_by_name, nullptr},
    {"/abort_request", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_abort_request,
     nullptr},
    {"/flush_cache", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_flush_cache,
     nullptr},
    {"/reset_prefix_cache", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_flush_cache,
     nullptr},
    {"/v1/load_lora_adapter", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_load_lora_adapter, nullptr},
    {"/v1/unload_lora_adapter", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_unload_lora_adapter, nullptr},
    {"/load_lora_adapter", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_sglang_load_lora_adapter, nullptr},
    {"/unload_lora_adapter", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_sglang_unload_lora_adapter, nullptr},
    {"/sleep", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_sleep, nullptr},
    {"/wake_up", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_wake_up, nullptr},
    {"/is_sleeping", "GET", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_is_sleeping,
     nullptr},
    {"/release_memory_occupation", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_release_memory_occupation, nullptr},
    {"/resume_memory_occupation", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_resume_memory_occupation, nullptr},
    {"/pause", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_pause, nullptr},
    {"/resume", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_resume, nullptr},
    {"/is_paused", "GET", ErrorFlavor::kOpenAi, RunOn::kWorker, true, handle_is_paused, nullptr},
    {"/pause_generation", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_pause_generation, nullptr},
    {"/continue_generation", "POST", ErrorFlavor::kOpenAi, RunOn::kWorker, true,
     handle_continue_generation, nullptr},
};

// The route of a path: exact match, or /v1/models/<id>.
const Route* find_route(const std::string& path) {
  const std::string exact = path.rfind("/v1/models/", 0) == 0 ? "/v1/models" : path;
  for (const Route& r : kRoutes) {
    if (exact == r.path) return &r;
  }
  return nullptr;
}

// Constant-time comparison: the key check does not leak how many bytes matched.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % std::max<size_t>(1, b.size())]);
  return diff == 0;
}

bool authorized(const ServeOptions& options, const http::HttpRequest& req) {
  if (!options.api_key) return true;
  const std::string bearer = req.header("authorization");
  const std::string prefix = "Bearer ";
  if (bearer.size() > prefix.size() && bearer.compare(0, prefix.size(), prefix) == 0 &&
      same_secret(bearer.substr(prefix.size()), *options.api_key))
    return true;
  const std::string key = req.header("x-api-key");
  return !key.empty() && same_secret(key, *options.api_key);
}

ErrorFlavor flavor_for_path(const std::string& path) {
  return path.rfind("/v1/messages", 0) == 0 ? ErrorFlavor::kAnthropic : ErrorFlavor::kOpenAi;
}

void dispatch(ServerState& state, http::HttpRequest&& req, std::shared_ptr<http::Responder> responder) {
  const Route* route = find_route(req.path);
  const std::string endpoint = route ? route->path : "other";
  const ErrorFlavor flavor = route ? route->flavor : flavor_for_path(req.path);
  auto exchange = std::make_shared<Exchange>(std::move(req), std::move(responder), endpoint, flavor, &state.metrics);
  const http::HttpRequest& r = exchange->request();
  if (!route) {
    return exchange->respond_error(api_error(ErrorKind::kNotFound, "no route for " + r.method + " " + r.path));
  }
  if (r.method != route->method) {
    return exchange->respond_error(api_error(ErrorKind::kMethodNotAllowed, std::string(route->path) + " accepts " +
                                                                              route->method + ", not " + r.method));
  }
  if (endpoint != "/health" && !authorized(state.options, r)) {
    return exchange->respond_error(api_error(ErrorKind::kAuthentication,
                                            "missing or invalid API key: send 'Authorization: Bearer <key>' or "
                                            "'x-api-key: <key>'", "", "invalid_api_key"));
  }
  if (route->needs_model && !state.model()) {
    return exchange->respond_error(api_error(ErrorKind::kUnavailable, "the model is still loading; retry shortly"));
  }
  if (route->state_handler) return route->state_handler(state, exchange);
  boost::asio::post(state.workers, [&state, exchange, handler = route->model_handler] {
    try {
      handler(state.env(), exchange);
    } catch (const std::exception& e) {
      // Handlers return errors as values; an exception here is a bug, but one request's bug must
      // not take the server down.
      log_error(std::string("unexpected exception in ") + exchange->endpoint() + ": " + e.what());
      exchange->respond_error(api_error(ErrorKind::kServer, "internal error: " + std::string(e.what())));
    }
  });
}

}  // namespace

struct ServerApp::State {
  explicit State(const ServeOptions& o) : server(o) {}
  ServerState server;
  std::thread loader;
};

ServerApp::ServerApp(std::unique_ptr<State> state) : state_(std::move(state)) {}

ServerApp::~ServerApp() {
  if (state_->loader.joinable()) state_->loader.join();
  ServerState& s = state_->server;
  // The io threads and workers read s.http (/metrics' open connections): stopped before it goes.
  if (s.http) s.http->stop();  // no new requests; open connections closed (their jobs cancel)
  s.workers.stop();            // no handler touches the engine after this
  s.workers.join();
  s.http.reset();
}

Expected<std::unique_ptr<ServerApp>> ServerApp::start(const ServeOptions& options) {
  auto state = std::make_unique<State>(options);
  ServerState* s = &state->server;
  http::HttpServerOptions http_options;
  http_options.host = options.host;
  http_options.port = options.port;
  http_options.max_body_bytes = options.max_body_bytes;
  http_options.num_threads = options.io_threads;
  http_options.early_error_body = [s](int status, const std::string& path, const std::string& message) {
    const Route* route = find_route(path);
    s->metrics.record_request(route ? route->path : "other", status);
    log_info("early " + std::to_string(status) + " " + path + ": " + message);
    ApiError e = api_error(status == 413 ? ErrorKind::kRequestTooLarge : ErrorKind::kInvalidRequest, message);
    return flavor_for_path(path) == ErrorFlavor::kAnthropic ? anthropic_error_body(e) : openai_error_body(e);
  };
  if (options.listen) {
    BEAM_ASSIGN_OR_RETURN(s->http, http::HttpServer::start(http_options, [s](http::HttpRequest&& req,
                                                                             std::shared_ptr<http::Responder> responder) {
                            dispatch(*s, std::move(req), std::move(responder));
                          }));
    log_info("listening on http://" + options.host + ":" + std::to_string(s->http->port()) +
             " (loading " + options.model.model_dir + ")");
  } else {
    log_info("loading " + options.model.model_dir + " (not listening)");
  }
  state->loader = std::thread([s] {
    Expected<std::unique_ptr<ServedModel>> model = load_served_model(s->options.model);
    std::lock_guard<std::mutex> lock(s->load_mu);
    if (model.ok()) {
      s->owned_model = std::move(model).value();
      s->model_ptr.store(s->owned_model.get());
      log_info("model '" + s->owned_model->name + "' ready: context " + std::to_string(s->owned_model->max_context_tokens) +
               " tokens, KV capacity " + std::to_string(s->owned_model->kv_capacity_tokens) + " tokens" +
               (s->owned_model->tokenizer ? "" : ", no tokenizer (only /generate)"));
    } else {
      s->load_error = model.error().message;
      log_error("loading the model failed: " + model.error().message);
    }
    s->load_done = true;
    s->load_cv.notify_all();
  });
  return std::unique_ptr<ServerApp>(new ServerApp(std::move(state)));
}

uint16_t ServerApp::port() const {
  return state_->server.http ? state_->server.http->port() : 0;
}

void ServerApp::submit(http::HttpRequest request, std::shared_ptr<http::Responder> responder) {
  dispatch(state_->server, std::move(request), std::move(responder));
}

Status ServerApp::wait_loaded() {
  ServerState& s = state_->server;
  std::unique_lock<std::mutex> lock(s.load_mu);
  s.load_cv.wait(lock, [&] { return s.load_done; });
  if (s.load_error) return make_error(*s.load_error);
  return ok_status();
}

}  // namespace beam::server
