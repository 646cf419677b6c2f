// HttpServer implementation: one Connection per socket running on a strand. Requests are parsed by
// Beast; responses are serialised by hand (status line, headers, Content-Length or chunked body)
// and written from a per-connection queue. While a handler is pending, an async wait on the socket
// notices the peer closing, which is how disconnects cancel requests.
#include "server/http/http_server.h"

#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace beam::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

const char* status_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

// What the server and its connections share (outside the anonymous namespace: HttpServer::Impl
// holds one).
struct ServerShared {
  HttpServerOptions options;
  Handler handler;
  std::atomic<int64_t> open_connections{0};
};

namespace {

class Connection;

class ResponderImpl : public Responder {
 public:
  explicit ResponderImpl(std::weak_ptr<Connection> conn) : conn_(std::move(conn)) {}
  void respond(int status, const std::string& content_type, std::string body,
               const std::map<std::string, std::string>& extra_headers) override;
  void start_stream(int status, const std::string& content_type) override;
  void send(std::string chunk) override;
  void end() override;
  void on_disconnect(std::function<void()> fn) override;
  bool disconnected() const override { return disconnected_.load(); }

  // Called on the connection's strand when the peer went away before the response ended.
  void mark_disconnected() {
    std::function<void()> fn;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (disconnected_.exchange(true)) return;
      fn = std::move(on_disconnect_);
    }
    if (fn) fn();
  }

 private:
  std::weak_ptr<Connection> conn_;
  std::mutex mu_;
  std::function<void()> on_disconnect_;
  std::atomic<bool> disconnected_{false};
  std::atomic<bool> ended_{false};
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, std::shared_ptr<ServerShared> shared)
      : socket_(std::move(socket)),
        strand_(asio::make_strand(socket_.get_executor())),
        timer_(strand_),
        shared_(std::move(shared)) {
    shared_->open_connections++;
  }
  ~Connection() { shared_->open_connections--; }

  void start() { asio::dispatch(strand_, [self = shared_from_this()] { self->read_request(); }); }

  // Queue bytes for writing; `last` marks the end of the current response.
  void write(std::string bytes, bool last) {
    asio::post(strand_, [self = shared_from_this(), bytes = std::move(bytes), last]() mutable {
      if (self->closed_) return;
      if (!bytes.empty()) self->queue_.push_back(std::move(bytes));
      if (last) self->response_done_ = true;
      self->pump();
    });
  }

 private:
  void read_request() {
    if (closed_) return;
    parser_.emplace();
    parser_->body_limit(static_cast<uint64_t>(shared_->options.max_body_bytes));
    parser_->header_limit(64 * 1024);
    response_done_ = false;
    timer_.expires_after(std::chrono::seconds(shared_->options.idle_timeout_s));
    timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) self->close();
    });
    beast::http::async_read_header(socket_, buffer_, *parser_,
                                   asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                                     self->on_header(ec);
                                   }));
  }

  // Clients that send "Expect: 100-continue" (curl does above 1 KiB) wait for this before the body.
  void on_header(beast::error_code ec) {
    if (ec || parser_->is_done()) return on_read(ec);
    auto expect = parser_->get().find(beast::http::field::expect);
    const bool wants_continue = expect != parser_->get().end() && beast::iequals(expect->value(), "100-continue");
    if (!wants_continue) return read_body();
    static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
    asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                      asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code wec, size_t) {
                        if (wec) return self->on_read(wec);
                        self->read_body();
                      }));
  }

  void read_body() {
    beast::http::async_read(socket_, buffer_, *parser_,
                            asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                              self->on_read(ec);
                            }));
  }

  void on_read(beast::error_code ec) {
    timer_.cancel();
    if (ec == beast::http::error::body_limit) {
      keep_alive_ = false;
      write_early_error(413, std::string(parser_->get().target()),
                        "request body exceeds the limit of " + std::to_string(shared_->options.max_body_bytes) + " bytes");
      return;
    }
    if (ec) {
      if (ec != beast::http::error::end_of_stream && ec != asio::error::operation_aborted &&
          ec != asio::error::eof && ec != asio::error::connection_reset)
        keep_alive_ = false;
      if (ec == beast::http::error::end_of_stream || ec == asio::error::eof) {
        close();
        return;
      }
      if (ec == asio::error::operation_aborted) return;
      write_early_error(400, "", "malformed HTTP request: " + ec.message());
      return;
    }
    auto msg = parser_->release();
    keep_alive_ = msg.keep_alive();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    std::string target(msg.target());
    auto q = target.find('?');
    req.path = target.substr(0, q);
    if (q != std::string::npos) req.query = target.substr(q + 1);
    for (const auto& f : msg) {
      std::string name(f.name_string());
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.headers[name] = std::string(f.value());
    }
    req.body = std::move(msg.body());
    beast::error_code ignored;
    auto ep = socket_.remote_endpoint(ignored);
    req.remote = ignored ? "?" : ep.address().to_string() + ":" + std::to_string(ep.port());
    responder_ = std::make_shared<ResponderImpl>(weak_from_this());
    watch_disconnect();
    shared_->handler(std::move(req), responder_);
  }

  // While the response is pending, a readable socket with no bytes means the peer closed.
  // A wait that completed before finish_response() cancelled it belongs to an earlier request:
  // `exchange` tells it apart, so it never judges the next request's socket.
  void watch_disconnect() {
    socket_.async_wait(tcp::socket::wait_read,
                       asio::bind_executor(strand_, [self = shared_from_this(), exchange = exchange_](beast::error_code ec) {
                         if (ec || self->closed_ || self->response_done_ || exchange != self->exchange_) return;
                         beast::error_code aec;
                         size_t avail = self->socket_.available(aec);
                         if (aec || avail == 0) {
                           self->keep_alive_ = false;
                           if (self->responder_) self->responder_->mark_disconnected();
                           self->close();
                         }
                         // Bytes available: a pipelined request; it is read after this response.
                       }));
  }

  void write_early_error(int status, std::string target, const std::string& message) {
    const std::string path = target.substr(0, target.find('?'));
    if (shared_->options.early_error_body) {
      write_simple(status, shared_->options.early_error_body(status, path, message));
      return;
    }
    std::string escaped;
    for (char c : message) {
      if (c == '"' || c == '\\') escaped += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) escaped += c;
    }
    write_simple(status, "{\"error\":{\"message\":\"" + escaped + "\",\"type\":\"invalid_request_error\",\"code\":" +
                             std::to_string(status) + "}}");
  }

  void write_simple(int status, std::string body) {
    std::string head = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) +
                       "\r\nContent-Type: application/json\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
    queue_.push_back(head + body);
    response_done_ = true;
    pump();
  }

  void pump() {
    if (writing_ || closed_) return;
    if (queue_.empty()) {
      if (response_done_) finish_response();
      return;
    }
    writing_ = true;
    asio::async_write(socket_, asio::buffer(queue_.front()),
                      asio::bind_executor(strand_, [self = shared_from_this()](beast::error_code ec, size_t) {
                        self->writing_ = false;
                        self->queue_.pop_front();
                        if (ec) {
                          if (self->responder_) self->responder_->mark_disconnected();
                          self->close();
                          return;
                        }
                        self->pump();
                      }));
  }

  void finish_response() {
    responder_.reset();
    ++exchange_;
    if (!keep_alive_) {
      close();
      return;
    }
    beast::error_code ignored;
    socket_.cancel(ignored);  // ends watch_disconnect; no write is pending here
    read_request();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    timer_.cancel();
    if (responder_) responder_->mark_disconnected();
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  tcp::socket socket_;
  asio::strand<asio::any_io_executor> strand_;
  asio::steady_timer timer_;
  std::shared_ptr<ServerShared> shared_;
  beast::flat_buffer buffer_;
  std::optional<beast::http::request_parser<beast::http::string_body>> parser_;
  std::shared_ptr<ResponderImpl> responder_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool response_done_ = false;
  bool keep_alive_ = true;
  bool closed_ = false;
  uint64_t exchange_ = 0;  // requests answered on this connection
};

std::string header_block(int status, const std::string& content_type,
                         const std::map<std::string, std::string>& extra) {
  std::string h = "HTTP/1.1 " + std::to_string(status) + " " + status_reason(status) + "\r\n";
  h += "Content-Type: " + content_type + "\r\n";
  for (const auto& [k, v] : extra) h += k + ": " + v + "\r\n";
  return h;
}

void ResponderImpl::respond(int status, const std::string& content_type, std::string body,
                            const std::map<std::string, std::string>& extra_headers) {
  if (ended_.exchange(true)) return;
  auto conn = conn_.lock();
  if (!conn) return;
  std::string h = header_block(status, content_type, extra_headers);
  h += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  conn->write(h + body, true);
}

void ResponderImpl::start_stream(int status, const std::string& content_type) {
  auto conn = conn_.lock();
  if (!conn || ended_) return;
  std::string h = header_block(status, content_type, {{"Cache-Control", "no-cache"}});
  h += "Transfer-Encoding: chunked\r\n\r\n";
  conn->write(std::move(h), false);
}

void ResponderImpl::send(std::string chunk) {
  if (chunk.empty() || ended_) return;
  auto conn = conn_.lock();
  if (!conn) return;
  char size[20];
  std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
  conn->write(size + chunk + "\r\n", false);
}

void ResponderImpl::end() {
  if (ended_.exchange(true)) return;
  auto conn = conn_.lock();
  if (!conn) return;
  conn->write("0\r\n\r\n", true);
}

void ResponderImpl::on_disconnect(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!disconnected_) {
      on_disconnect_ = std::move(fn);
      return;
    }
  }
  fn();
}

}  // namespace

class HttpServer::Impl {
 public:
  Impl(const HttpServerOptions& options, Handler handler)
      : shared_(std::make_shared<ServerShared>()), acceptor_(io_) {
    shared_->options = options;
    shared_->handler = std::move(handler);
  }
  ~Impl() { stop(); }

  // Stops accepting, closes the connections and joins the io threads; later calls do nothing.
  void stop() {
    if (stopped_) return;
    stopped_ = true;
    asio::post(io_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    work_.reset();
    io_.stop();
    for (auto& t : threads_) t.join();
  }

  Status listen() {
    beast::error_code ec;
    auto addr = asio::ip::make_address(shared_->options.host, ec);
    if (ec) return make_error("--host: not an IP address: '" + shared_->options.host + "'");
    tcp::endpoint ep(addr, shared_->options.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return make_error("cannot listen on " + shared_->options.host + ":" +
                        std::to_string(shared_->options.port) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    accept();
    for (int i = 0; i < std::max(1, shared_->options.num_threads); ++i) threads_.emplace_back([this] { io_.run(); });
    return ok_status();
  }

  void accept() {
    acceptor_.async_accept(asio::make_strand(io_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (!ec) {
        beast::error_code ignored;
        socket.set_option(tcp::no_delay(true), ignored);
        std::make_shared<Connection>(std::move(socket), shared_)->start();
      }
      accept();
    });
  }

  uint16_t port_ = 0;
  std::shared_ptr<ServerShared> shared_;
  asio::io_context io_;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work_{io_.get_executor()};
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  bool stopped_ = false;  // stop() ran
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;
void HttpServer::stop() { impl_->stop(); }

Expected<std::unique_ptr<HttpServer>> HttpServer::start(const HttpServerOptions& options, Handler handler) {
  auto impl = std::make_unique<Impl>(options, std::move(handler));
  BEAM_RETURN_IF_ERROR(impl->listen());
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

uint16_t HttpServer::port() const { return impl_->port_; }
int64_t HttpServer::open_connections() const { return impl_->shared_->open_connections.load(); }

}  // namespace beam::http
