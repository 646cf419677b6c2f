// HttpServer: an asynchronous HTTP/1.1 server on Boost.Asio/Beast — no thread per connection,
// keep-alive, body-size limit, chunked SSE streaming, and client-disconnect notification.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "core/status.h"

namespace beam::http {

struct HttpRequest {
  std::string method;                          // "GET", "POST", ...
  std::string path;                            // target without the query string
  std::string query;                           // after '?', undecoded
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string remote;                          // peer address, for logs

  std::string header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? std::string() : it->second;
  }
};

// The reply side of one request. Thread-safe: engine threads may write stream chunks. Exactly one
// of respond() or start_stream() … end() is used. Calls after the client left are ignored.
class Responder {
 public:
  virtual ~Responder() = default;
  // A complete response with Content-Length.
  virtual void respond(int status, const std::string& content_type, std::string body,
                       const std::map<std::string, std::string>& extra_headers = {}) = 0;
  // Starts a chunked response (e.g. text/event-stream); send() appends, end() finishes it.
  virtual void start_stream(int status, const std::string& content_type) = 0;
  virtual void send(std::string chunk) = 0;
  virtual void end() = 0;
  // fn runs once (on the server's thread) if the client disconnects before the response ended;
  // if it already disconnected, fn runs right away.
  virtual void on_disconnect(std::function<void()> fn) = 0;
  virtual bool disconnected() const = 0;
};

using Handler = std::function<void(HttpRequest&& request, std::shared_ptr<Responder> responder)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;              // 0 = pick a free port (see HttpServer::port())
  int64_t max_body_bytes = 32 << 20;
  int num_threads = 1;               // io threads; handlers must not block
  int64_t idle_timeout_s = 600;      // keep-alive connections idle this long are closed
  // Errors the server answers itself, before any handler runs (413: body over the limit, 400:
  // malformed HTTP): returns the JSON body for (status, request path or "", message). Called once
  // per such error, so it may also count them. Unset: an OpenAI-shaped error body.
  std::function<std::string(int status, const std::string& path, const std::string& message)> early_error_body;
};

// Owns its io threads. Handler runs on an io thread for every parsed request.
class HttpServer {
 public:
  static Expected<std::unique_ptr<HttpServer>> start(const HttpServerOptions& options, Handler handler);
  ~HttpServer();  // stop()
  // Stops accepting, closes connections, joins the io threads (no handler call starts or runs on
  // them afterwards); later calls do nothing. One thread calls it (the owner's).
  void stop();
  uint16_t port() const;
  int64_t open_connections() const;

 private:
  class Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "200 OK" style reason phrases for the statuses the server uses.
const char* status_reason(int status);

}  // namespace beam::http
