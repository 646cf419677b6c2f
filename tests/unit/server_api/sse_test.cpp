// SSE framing: data lines, event names, newlines inside payloads, the [DONE] marker.
#include <gtest/gtest.h>

#include "server/http/sse.h"

namespace beam::http {
namespace {

TEST(Sse, DataEvent) { EXPECT_EQ(sse_data("{\"a\":1}"), "data: {\"a\":1}\n\n"); }

TEST(Sse, NamedEvent) {
  EXPECT_EQ(sse_event("message_start", "{}"), "event: message_start\ndata: {}\n\n");
}

TEST(Sse, PayloadNewlinesBecomeSeveralDataLines) {
  // A client joins data lines with "\n", so the payload survives intact.
  EXPECT_EQ(sse_data("line1\nline2"), "data: line1\ndata: line2\n\n");
  EXPECT_EQ(sse_data("a\r\nb"), "data: a\ndata: b\n\n");
  EXPECT_EQ(sse_data(""), "data: \n\n");
}

TEST(Sse, Done) { EXPECT_EQ(sse_done(), "data: [DONE]\n\n"); }

}  // namespace
}  // namespace beam::http
