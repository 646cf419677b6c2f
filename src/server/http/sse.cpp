// SSE framing (see sse.h).
#include "server/http/sse.h"

namespace beam::http {
namespace {

void append_data_lines(std::string& out, std::string_view payload) {
  size_t start = 0;
  for (;;) {
    size_t nl = payload.find('\n', start);
    std::string_view line = payload.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.append("data: ").append(line).append("\n");
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out.append("\n");
}

}  // namespace

std::string sse_data(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  append_data_lines(out, payload);
  return out;
}

std::string sse_event(std::string_view name, std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + name.size() + 16);
  out.append("event: ").append(name).append("\n");
  append_data_lines(out, payload);
  return out;
}

std::string sse_done() { return "data: [DONE]\n\n"; }

}  // namespace beam::http
