// HttpServer over loopback with a raw socket client: complete responses, keep-alive, the body
// limit, chunked streaming, malformed requests, and disconnect notification.
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace beam::http {
namespace {

int connect_to(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  return fd;
}

void send_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

// Reads until `needle` appears or the peer closes.
std::string read_until(int fd, const std::string& needle) {
  std::string out;
  char buf[4096];
  while (out.find(needle) == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(Handler h, int64_t max_body = 1024) {
    HttpServerOptions o;
    o.port = 0;
    o.max_body_bytes = max_body;
    auto s = HttpServer::start(o, std::move(h));
    ASSERT_TRUE(s.ok()) << s.error().message;
    server_ = std::move(*s);
  }
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, CompleteResponsesWithKeepAlive) {
  start([](HttpRequest&& r, std::shared_ptr<Responder> resp) {
    resp->respond(200, "text/plain", r.method + " " + r.path + " q=" + r.query + " body=" + r.body +
                                         " auth=" + r.header("authorization"));
  });
  int fd = connect_to(server_->port());
  send_all(fd, "GET /v1/models?x=1 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n");
  std::string a = read_until(fd, "auth=Bearer k");
  EXPECT_NE(a.find("HTTP/1.1 200 OK"), std::string::npos) << a;
  EXPECT_NE(a.find("GET /v1/models q=x=1 body="), std::string::npos) << a;
  send_all(fd, "POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello");
  std::string b = read_until(fd, "auth=");
  EXPECT_NE(b.find("POST /p q= body=hello"), std::string::npos) << b;
  ::close(fd);
}

TEST_F(HttpServerTest, BodyLimitGives413) {
  start([](HttpRequest&&, std::shared_ptr<Responder> resp) { resp->respond(200, "text/plain", "ok"); }, 16);
  int fd = connect_to(server_->port());
  send_all(fd, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x'));
  std::string a = read_until(fd, "}}");
  EXPECT_NE(a.find("413 Payload Too Large"), std::string::npos) << a;
  EXPECT_NE(a.find("exceeds the limit of 16 bytes"), std::string::npos) << a;
  ::close(fd);
}

TEST_F(HttpServerTest, MalformedRequestGives400) {
  start([](HttpRequest&&, std::shared_ptr<Responder> resp) { resp->respond(200, "text/plain", "ok"); });
  int fd = connect_to(server_->port());
  send_all(fd, "THIS IS NOT HTTP\r\n\r\n");
  std::string a = read_until(fd, "}}");
  EXPECT_NE(a.find("400 Bad Request"), std::string::npos) << a;
  ::close(fd);
}

TEST_F(HttpServerTest, ChunkedStreamFromAnotherThread) {
  start([](HttpRequest&&, std::shared_ptr<Responder> resp) {
    resp->start_stream(200, "text/event-stream");
    std::thread([resp] {
      for (int i = 0; i < 3; ++i) resp->send("data: " + std::to_string(i) + "\n\n");
      resp->end();
    }).detach();
  });
  int fd = connect_to(server_->port());
  send_all(fd, "GET /s HTTP/1.1\r\nHost: a\r\n\r\n");
  std::string a = read_until(fd, "0\r\n\r\n");
  EXPECT_NE(a.find("Transfer-Encoding: chunked"), std::string::npos) << a;
  EXPECT_NE(a.find("data: 0\n\n"), std::string::npos);
  EXPECT_NE(a.find("data: 2\n\n"), std::string::npos);
  ::close(fd);
}

TEST_F(HttpServerTest, DisconnectIsReported) {
  std::promise<void> disconnected;
  std::shared_ptr<Responder> held;
  std::promise<void> got_request;
  start([&](HttpRequest&&, std::shared_ptr<Responder> resp) {
    held = resp;  // never answered: the client gives up
    resp->on_disconnect([&] { disconnected.set_value(); });
    got_request.set_value();
  });
  int fd = connect_to(server_->port());
  send_all(fd, "POST /slow HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(got_request.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  ::close(fd);
  EXPECT_EQ(disconnected.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_TRUE(held->disconnected());
  held->respond(200, "text/plain", "late");  // ignored, no crash
}

}  // namespace
}  // namespace beam::http
