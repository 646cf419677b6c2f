// An http::Responder that keeps what an exchange sent: the status, the body or stream chunks,
// and whether the stream ended.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "server/http/http_server.h"

namespace beam::server {

class RecordingResponder : public http::Responder {
 public:
  void respond(int status, const std::string&, std::string body,
               const std::map<std::string, std::string>&) override {
    this->status = status;
    chunks.push_back(std::move(body));
  }
  void start_stream(int status, const std::string&) override { this->status = status; }
  void send(std::string chunk) override { chunks.push_back(std::move(chunk)); }
  void end() override { ended = true; }
  void on_disconnect(std::function<void()>) override {}
  bool disconnected() const override { return false; }

  int status = 0;
  std::vector<std::string> chunks;
  bool ended = false;
};

}  // namespace beam::server
