// Server-sent events framing (text/event-stream): one event per call, "data:" lines split at
// newlines so any payload frames correctly, optional "event:" name, and the OpenAI end marker.
#pragma once

#include <string>
#include <string_view>

namespace beam::http {

inline constexpr std::string_view kSseContentType = "text/event-stream";

// "data: <payload>\n\n" (a payload with newlines becomes several data lines).
std::string sse_data(std::string_view payload);
// "event: <name>\ndata: <payload>\n\n".
std::string sse_event(std::string_view name, std::string_view payload);
// "data: [DONE]\n\n": OpenAI's end-of-stream marker.
std::string sse_done();

}  // namespace beam::http
