// In-process batch files (see run_batch.h).
#include "server/app/run_batch.h"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>

#include "server/api/json_fields.h"

namespace beam::server {
namespace {

// The inference routes a batch line may name (vLLM's run-batch takes these kinds).
constexpr const char* kBatchUrls[] = {"/v1/chat/completions",
                                      "/v1/completions",
                                      "/v1/embeddings",
                                      "/v1/responses",
                                      "/v1/messages",
                                      "/pooling",
                                      "/score",
                                      "/v1/score",
                                      "/rerank",
                                      "/v1/rerank",
                                      "/v2/rerank"};

struct Answer {
  std::string line;  // the output line
  bool ok = false;   // answered with a 2xx
};

// The answers of the lines in flight, by line index; the writer waits for the next in order.
struct Answers {
  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, Answer> done;  // line index -> answer
  int64_t in_flight = 0;
};

// Collects one request's answer (a whole body, or a stream's chunks) and files its output line.
class BatchResponder final : public http::Responder {
 public:
  BatchResponder(Answers* answers, int64_t index, std::string custom_id)
      : answers_(answers), index_(index), custom_id_(std::move(custom_id)) {}

  void respond(int status, const std::string&, std::string body,
               const std::map<std::string, std::string>&) override {
    file(status, std::move(body));
  }
  void start_stream(int status, const std::string&) override { status_ = status; }
  void send(std::string chunk) override { stream_ += chunk; }
  void end() override { file(status_, std::move(stream_)); }
  void on_disconnect(std::function<void()>) override {}
  bool disconnected() const override { return false; }

 private:
  void file(int status, std::string body) {
    Json parsed = Json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) parsed = body;  // not JSON: kept as text
    const Json line = {{"id", "batch_req_" + std::to_string(index_)},
                       {"custom_id", custom_id_},
                       {"response",
                        {{"status_code", status},
                         {"request_id", "batch_" + std::to_string(index_)},
                         {"body", std::move(parsed)}}},
                       {"error", nullptr}};
    std::lock_guard<std::mutex> lock(answers_->mu);
    answers_->done[index_] = Answer{dump_json(line), status >= 200 && status < 300};
    --answers_->in_flight;
    answers_->cv.notify_all();
  }

  Answers* answers_;
  int64_t index_;
  std::string custom_id_;
  int status_ = 200;
  std::string stream_;
};

// The output line of an input line that could not be sent.
Answer error_line(int64_t index, const Json& custom_id, const std::string& message) {
  return {dump_json(Json{{"id", "batch_req_" + std::to_string(index)},
                         {"custom_id", custom_id},
                         {"response", nullptr},
                         {"error", {{"code", "invalid_request"}, {"message", message}}}}),
          false};
}

// The request of a line, or why it cannot be sent.
ApiExpected<http::HttpRequest> line_request(const Json& line) {
  if (!line.is_object()) return invalid_request("the line is not a JSON object");
  FieldReader r(line, "");
  std::string custom_id, method = "POST", url;
  r.require("custom_id", &custom_id);
  r.read("method", &method);
  r.require("url", &url);
  if (r.failed()) return r.take_error();
  if (method != "POST") return invalid_request("'method' must be POST, got " + method, "method");
  if (std::find(std::begin(kBatchUrls), std::end(kBatchUrls), url) == std::end(kBatchUrls))
    return invalid_request("'url' " + url + " is not an inference endpoint a batch may call",
                           "url");
  const Json* body = r.get("body");
  if (!body || !body->is_object()) return invalid_request("'body' must be a JSON object", "body");
  if (body->contains("stream") && (*body)["stream"] == true)
    return invalid_request("'body.stream' must not be true in a batch", "body.stream");
  http::HttpRequest req;
  req.method = "POST";
  req.path = url;
  req.headers["content-type"] = "application/json";
  req.body = dump_json(*body);
  req.remote = "run-batch";
  return req;
}

}  // namespace

Expected<BatchCounts> run_batch(ServerApp& app, std::istream& in, std::ostream& out,
                                int64_t max_in_flight) {
  Answers answers;
  BatchCounts counts;
  int64_t next_out = 0;
  // Writes the answered lines that are next in order; with `all`, waits for every one.
  auto flush = [&](bool all) -> Status {
    std::unique_lock<std::mutex> lock(answers.mu);
    for (;;) {
      auto it = answers.done.find(next_out);
      if (it == answers.done.end()) {
        if (!all || next_out == counts.lines) return ok_status();
        answers.cv.wait(lock);
        continue;
      }
      const Answer answer = std::move(it->second);
      answers.done.erase(it);
      (answer.ok ? counts.ok : counts.failed) += 1;
      out << answer.line << '\n';
      if (!out) return make_error("run-batch: the output could not be written");
      ++next_out;
    }
  };
  std::string text;
  while (std::getline(in, text)) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) continue;
    const int64_t index = counts.lines++;
    const Json line = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    const Json custom_id =
        line.is_object() && line.contains("custom_id") ? line["custom_id"] : Json(nullptr);
    ApiExpected<http::HttpRequest> req =
        line.is_discarded() ? ApiExpected<http::HttpRequest>(invalid_request("not JSON"))
                            : line_request(line);
    if (!req.ok()) {
      std::lock_guard<std::mutex> lock(answers.mu);
      answers.done[index] = error_line(
          index, custom_id, "line " + std::to_string(index + 1) + ": " + req.error().message);
    } else {
      {
        std::unique_lock<std::mutex> lock(answers.mu);
        answers.cv.wait(lock, [&] { return answers.in_flight < max_in_flight; });
        ++answers.in_flight;
      }
      app.submit(std::move(req).value(),
                 std::make_shared<BatchResponder>(&answers, index, custom_id.get<std::string>()));
    }
    BEAM_RETURN_IF_ERROR(flush(false));
  }
  BEAM_RETURN_IF_ERROR(flush(true));
  return counts;
}

}  // namespace beam::server
