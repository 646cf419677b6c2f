// The end of an OpenAI SSE stream (end_openai_stream, shared by chat and legacy completions): an
// engine failure after the stream started reaches the client as an error event before [DONE].
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "recording_responder.h"
#include "server/api/exchange.h"
#include "server/http/sse.h"
#include "server/metrics/server_metrics.h"
#include "server/openai/chat_observer.h"

namespace beam::server {
namespace {

// Records what the exchange writes.
struct StreamFixture {
  ServerMetrics metrics;
  std::shared_ptr<RecordingResponder> responder = std::make_shared<RecordingResponder>();
  Exchange exchange{http::HttpRequest{}, responder, "/v1/chat/completions", ErrorFlavor::kOpenAi,
                    &metrics};

  StreamFixture() {
    exchange.start_stream("text/event-stream");
    exchange.send(http::sse_data("{\"choices\":[]}"));  // some output went out already
  }
};

TEST(OpenAiStream, EngineFailureSendsAnErrorEventBeforeDone) {
  StreamFixture f;
  end_openai_stream(f.exchange, std::string("forward failed"), nullptr, GenerationUsage{});
  const std::vector<std::string>& c = f.responder->chunks;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_NE(c[1].find("\"error\""), std::string::npos) << c[1];
  EXPECT_NE(c[1].find("the engine failed the request: forward failed"), std::string::npos) << c[1];
  EXPECT_NE(c[1].find("server_error"), std::string::npos) << c[1];
  EXPECT_EQ(c[2], http::sse_done());
  EXPECT_TRUE(f.responder->ended);
}

TEST(OpenAiStream, UsageChunkComesAfterTheErrorAndBeforeDone) {
  StreamFixture f;
  GenerationUsage usage;
  usage.prompt_tokens = 2;
  usage.completion_tokens = 1;
  end_openai_stream(f.exchange, std::string("x"), Json{{"choices", Json::array()}}, usage);
  const std::vector<std::string>& c = f.responder->chunks;
  ASSERT_EQ(c.size(), 4u);
  EXPECT_NE(c[1].find("\"error\""), std::string::npos);
  EXPECT_EQ(Json::parse(c[2].substr(6)),
            (Json{{"choices", Json::array()},
                  {"usage",
                   {{"prompt_tokens", 2},
                    {"completion_tokens", 1},
                    {"total_tokens", 3},
                    {"prompt_tokens_details", {{"cached_tokens", 0}}}}}}));
  EXPECT_EQ(c[2].substr(0, 6), "data: ");
  EXPECT_EQ(c[3], http::sse_done());
}

TEST(OpenAiStream, CleanEndWithoutUsageIsDone) {
  StreamFixture f;
  end_openai_stream(f.exchange, std::nullopt, nullptr, GenerationUsage{});
  const std::vector<std::string>& c = f.responder->chunks;
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[1], http::sse_done());
  EXPECT_TRUE(f.responder->ended);
}

}  // namespace
}  // namespace beam::server
