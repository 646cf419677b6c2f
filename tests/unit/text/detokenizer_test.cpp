// IncrementalDetokenizer: deltas never end inside a UTF-8 character and always concatenate to
// Tokenizer::decode of all ids, however the ids are grouped into steps.
#include "text/incremental_detokenizer.h"

#include <gtest/gtest.h>

#include <random>

#include "text/utf8.h"
#include "tokenizer_test_util.h"

namespace beam::text {
namespace {

using testing::SyntheticTokenizer;

// Feeds `ids` in steps of the given sizes; checks every delta and returns their concatenation.
std::string stream(const Tokenizer& tok, const std::vector<TokenId>& ids, const std::vector<size_t>& steps,
                   bool skip_special) {
  IncrementalDetokenizer detok(tok, skip_special);
  std::string all;
  size_t pos = 0;
  for (size_t n : steps) {
    auto delta = detok.step(std::span<const TokenId>(ids).subspan(pos, std::min(n, ids.size() - pos)));
    EXPECT_TRUE(delta.ok());
    EXPECT_TRUE(is_valid_utf8(*delta)) << ::testing::PrintToString(*delta);
    all += *delta;
    pos = std::min(ids.size(), pos + n);
  }
  const std::string rest = detok.finish();
  EXPECT_TRUE(is_valid_utf8(rest));
  return all + rest;
}

std::vector<size_t> random_steps(std::mt19937& rng, size_t total) {
  std::vector<size_t> steps;
  for (size_t done = 0; done < total;) {
    const size_t n = rng() % 4 == 0 ? 0 : 1 + rng() % 5;  // empty steps happen too
    steps.push_back(n);
    done += n;
  }
  return steps;
}

Tokenizer synthetic(bool cleanup) {
  SyntheticTokenizer s;
  // Merges that cut multi-byte characters in awkward places: 中 = E4 B8 AD, 😀 = F0 9F 98 80.
  s.merges = {{"\xE4", "\xB8"}, {"\x9F", "\x98"}, {"\xF0", "\x9F\x98"}, {" ", "'"}, {"n", "'"}, {" ", "."}};
  s.added_tokens.push_back(testing::added_token(s.next_id(), "<|eot|>", true));
  s.added_tokens.push_back(testing::added_token(s.next_id() + 1, "<tool>", false));
  const std::string config = std::string(R"({"clean_up_tokenization_spaces": )") + (cleanup ? "true}" : "false}");
  auto tok = Tokenizer::from_json(s.json(), config);
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  return std::move(tok).value();
}

TEST(Detokenizer, HoldsBackPartialCharacters) {
  const Tokenizer tok = synthetic(false);
  IncrementalDetokenizer detok(tok, false);
  // 中 arrives as E4B8 (one token) then AD.
  const TokenId e4b8 = 256;
  EXPECT_EQ(*detok.step(std::vector<TokenId>{'a', e4b8}), "a");
  EXPECT_EQ(*detok.step(std::vector<TokenId>{0xAD, 'b'}), "\xE4\xB8\xAD" "b");
  // 😀 as F0 + 9F98 + 80, in one multi-token step with a complete character before it.
  EXPECT_EQ(*detok.step(std::vector<TokenId>{'c', 0xF0, 257}), "c");
  EXPECT_EQ(*detok.step(std::vector<TokenId>{0x80}), "\xF0\x9F\x98\x80");
  EXPECT_EQ(detok.finish(), "");
}

TEST(Detokenizer, IncompleteCharacterBeforeAnAddedTokenOrTheEnd) {
  const Tokenizer tok = synthetic(false);
  const TokenId eot = 262, tool = 263;
  const std::vector<TokenId> ids = {0xE4, eot, 0xE4, 256, tool, 0xF0};
  const std::string expected = *tok.decode(ids, false);
  // E4 then E4 B8: the first E4 is cut short by the second (one U+FFFD), E4 B8 by <tool>.
  EXPECT_EQ(expected, "\xEF\xBF\xBD<|eot|>\xEF\xBF\xBD\xEF\xBF\xBD<tool>\xEF\xBF\xBD");
  EXPECT_EQ(stream(tok, ids, {1, 1, 1, 1, 1, 1}, false), expected);
  // Skipping the special token joins the bytes around it, exactly as decode does.
  const std::vector<TokenId> split_char = {0xE4, eot, 0xB8, 0xAD};
  EXPECT_EQ(*tok.decode(split_char, true), "\xE4\xB8\xAD");
  EXPECT_EQ(stream(tok, split_char, {1, 1, 1, 1}, true), "\xE4\xB8\xAD");
}

TEST(Detokenizer, RandomStepsConcatenateToDecode) {
  for (bool cleanup : {false, true}) {
    const Tokenizer tok = synthetic(cleanup);
    std::mt19937 rng(cleanup ? 5 : 3);
    const std::vector<TokenId> alphabet = {'a', ' ', '.', ',', '\'', 'n', 't', 's', 'm', 'v', 'e', 'r', '?',
                                           0xE4, 0xB8, 0xAD, 0xF0, 0x9F, 0x98, 0x80, 256, 257, 258, 259, 260,
                                           261, 262, 263, 0xFF};
    for (int trial = 0; trial < 400; ++trial) {
      std::vector<TokenId> ids;
      const size_t n = 1 + rng() % 40;
      for (size_t i = 0; i < n; ++i) ids.push_back(alphabet[rng() % alphabet.size()]);
      for (bool skip : {false, true}) {
        const std::string expected = *tok.decode(ids, skip);
        ASSERT_EQ(stream(tok, ids, random_steps(rng, ids.size()), skip), expected)
            << "cleanup " << cleanup << " trial " << trial;
      }
    }
  }
}

// With clean_up_tokenization_spaces a space and the (up to 3) bytes after it wait: a later " ."
// or " n't" could still remove that space.
TEST(Detokenizer, CleanupHoldsBackOnlyTextNearASpace) {
  const Tokenizer tok = synthetic(true);
  IncrementalDetokenizer detok(tok, false);
  EXPECT_EQ(*detok.step(*tok.encode("Hello wo", true)), "Hello");
  EXPECT_EQ(*detok.step(*tok.encode("rld", true)), " world");
  EXPECT_EQ(*detok.step(*tok.encode(" .", true)), "");
  EXPECT_EQ(detok.finish(), ".");
}

TEST(Detokenizer, UnknownIdIsAnErrorAndChangesNothing) {
  const Tokenizer tok = synthetic(false);
  IncrementalDetokenizer detok(tok, false);
  EXPECT_FALSE(detok.step(std::vector<TokenId>{'a', 99999}).ok());
  EXPECT_EQ(*detok.step(std::vector<TokenId>{'b'}), "b");
}

}  // namespace
}  // namespace beam::text
