// GET /get_weights_by_name (SGLang's): a served tensor's first rows, for RL loops that check a
// weight sync against the trainer's copy. See native_endpoints.h.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "server/api/query_string.h"
#include "server/native/native_endpoints.h"

namespace beam::server {
namespace {

constexpr int64_t kDefaultRows = 100;          // SGLang's truncate_size default
constexpr int64_t kMaxValues = int64_t{1} << 24;  // ~160 MB of JSON at most

// The name and row limit from the JSON body (SGLang's client sends one with the GET) or, without
// a body, the query string (?name=...&truncate_size=N).
ApiExpected<std::pair<std::string, int64_t>> read_request(const http::HttpRequest& request) {
  std::string name;
  int64_t rows = kDefaultRows;
  if (request.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    ApiExpected<Json> body = parse_json_body(request.body);
    if (!body.ok()) return body.error();
    FieldReader r(*body, "");
    r.require("name", &name);
    r.read("truncate_size", &rows);
    if (r.failed()) return r.take_error();
  } else {
    const std::vector<std::string> names = query_values(request.query, "name");
    if (names.empty()) return invalid_request("'name' is required", "name");
    name = names.back();
    const std::vector<std::string> sizes = query_values(request.query, "truncate_size");
    if (!sizes.empty()) {
      try {
        size_t used = 0;
        rows = std::stoll(sizes.back(), &used);
        if (used != sizes.back().size()) throw std::invalid_argument("trailing characters");
      } catch (const std::exception&) {
        return invalid_request("'truncate_size': expected an integer, got \"" + sizes.back() + "\"",
                               "truncate_size");
      }
    }
  }
  if (rows < 1)
    return invalid_request("'truncate_size' must be >= 1, got " + std::to_string(rows),
                           "truncate_size");
  return std::pair{name, rows};
}

// values as SGLang's tensor.tolist(): a list for a vector, a list of rows for a matrix.
Json nested(const WeightValues& w) {
  if (w.shape.rank == 1) return Json(w.values);
  const int64_t cols = w.shape[1];
  Json rows = Json::array();
  for (int64_t r = 0; r < w.shape[0]; ++r)
    rows.push_back(std::vector<float>(w.values.begin() + r * cols, w.values.begin() + (r + 1) * cols));
  return rows;
}

}  // namespace

void handle_get_weights_by_name(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  if (!env.model->weight_updates_enabled)
    return exchange->respond_error(invalid_request(
        "reading weights is off: start the server with --enable-weight-updates"));
  ApiExpected<std::pair<std::string, int64_t>> request = read_request(exchange->request());
  if (!request.ok()) return exchange->respond_error(request.error());
  const auto& [name, rows] = *request;
  const BeamConfig& c = env.model->engine->config();
  const int64_t widest = std::max({c.hidden_size, c.q_width(), c.intermediate_size,
                                   c.moe_intermediate_size});
  if (rows > kMaxValues / widest)
    return exchange->respond_error(invalid_request(
        "'truncate_size' " + std::to_string(rows) + ": rows of up to " + std::to_string(widest) +
            " values could pass the " + std::to_string(kMaxValues) + " values a request may read",
        "truncate_size"));
  Expected<WeightValues> values = env.model->engine->read_weight(name, rows);
  if (!values.ok()) return exchange->respond_error(invalid_request(values.error().message, "name"));
  exchange->respond_json(200, dump_json(nested(*values)));
}

}  // namespace beam::server
