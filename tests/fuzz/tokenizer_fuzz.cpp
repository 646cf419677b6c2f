// libFuzzer target for the tokenizer (src/text tokenizer files). The first input byte picks a mode:
//   0: encode + decode on a byte-level BPE with the Qwen pre-tokenizer regex and added tokens:
//      decode(encode(x)) must equal x with invalid UTF-8 replaced (no normalizer, no strip flags);
//   1: incremental detokenization of ids taken from the input, in steps taken from the input,
//      must concatenate to decode() and never emit invalid UTF-8;
//   2: the input as an Oniguruma pattern: translate, compile, match on a fixed text;
//   3: the input as tokenizer.json: load must succeed or fail with an error, never crash.
// Any mismatch aborts (a finding). Built with clang -fsanitize=fuzzer,address,undefined.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/incremental_detokenizer.h"
#include "text/pcre2_regex.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

using beam::text::TokenId;
using beam::text::Tokenizer;

void fail(const char* what) {
  std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
  std::abort();
}

// Vocabulary: the 256 bytes plus merges of frequent pairs, Qwen's Split regex, two added tokens.
std::string fuzz_tokenizer_json() {
  beam::text::ByteLevelAlphabet alphabet;
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[alphabet.to_token(std::string(1, static_cast<char>(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {
      {" ", " "}, {"  ", "  "}, {"t", "h"}, {"th", "e"}, {" ", "the"}, {"\xE4", "\xB8"}, {"\xF0", "\x9F"},
      {"\n", "\n"}, {"i", "n"}, {"in", "g"}, {"1", "2"}, {"'", "s"}, {"\xC3", "\xA9"}, {"\xCC", "\x81"}, {"e", "\xCC\x81"}};
  nlohmann::json merge_list = nlohmann::json::array();
  int id = 256;
  for (const auto& [a, b] : merges) {
    const std::string joined = alphabet.to_token(a + b);
    if (!vocab.contains(joined)) vocab[joined] = id++;
    merge_list.push_back(alphabet.to_token(a) + " " + alphabet.to_token(b));
  }
  nlohmann::json added = nlohmann::json::array();
  added.push_back({{"id", id}, {"content", "<|im_start|>"}, {"special", true}, {"normalized", false}});
  added.push_back({{"id", id + 1}, {"content", "<think>"}, {"special", false}, {"normalized", false}});
  const char* regex =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  nlohmann::json root = {
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         {{{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"}, {"invert", false}},
          {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"dropout", nullptr}, {"vocab", vocab}, {"merges", merge_list}}}};
  return root.dump();
}

const Tokenizer& fuzz_tokenizer() {
  static const Tokenizer* tok = [] {
    auto t = Tokenizer::from_json(fuzz_tokenizer_json(), R"({"clean_up_tokenization_spaces": false})");
    if (!t.ok()) {
      std::fprintf(stderr, "%s\n", t.error().message.c_str());
      std::abort();
    }
    return new Tokenizer(std::move(t).value());
  }();
  return *tok;
}

void encode_decode(std::string_view input, bool allow_special) {
  const Tokenizer& tok = fuzz_tokenizer();
  auto ids = tok.encode(input, allow_special);
  if (!ids.ok()) fail("encode failed");
  auto text = tok.decode(*ids, /*skip_special=*/false);
  if (!text.ok()) fail("decode failed");
  if (*text != beam::text::to_valid_utf8(input)) fail("decode(encode(x)) != x");
}

void detokenize(std::string_view input) {
  const Tokenizer& tok = fuzz_tokenizer();
  std::vector<TokenId> ids;
  std::vector<size_t> steps;
  for (size_t i = 0; i + 1 < input.size(); i += 2) {
    ids.push_back(static_cast<uint8_t>(input[i]) % tok.vocab_size());
    steps.push_back(static_cast<uint8_t>(input[i + 1]) % 4);
  }
  for (bool skip : {false, true}) {
    beam::text::IncrementalDetokenizer detok(tok, skip);
    std::string streamed;
    size_t pos = 0;
    for (size_t n : steps) {
      n = std::min(n, ids.size() - pos);
      auto delta = detok.step(std::span<const TokenId>(ids).subspan(pos, n));
      if (!delta.ok()) fail("detokenizer step failed");
      if (!beam::text::is_valid_utf8(*delta)) fail("delta is not valid UTF-8");
      streamed += *delta;
      pos += n;
    }
    auto rest = detok.step(std::span<const TokenId>(ids).subspan(pos));
    if (!rest.ok()) fail("detokenizer step failed");
    streamed += *rest + detok.finish();
    if (streamed != *tok.decode(ids, skip)) fail("deltas != decode");
  }
}

void regex(std::string_view pattern) {
  auto re = beam::text::Pcre2Regex::from_oniguruma(pattern);
  if (!re.ok()) return;
  beam::text::RegexMatchData md;
  std::vector<beam::text::ByteRange> matches;
  const std::string text = "Hello, world! it's 2024\n\n  \xE4\xB8\xAD\xE6\x96\x87 caf\xC3\xA9 \xF0\x9F\x98\x80 x_y-z";
  if (!re->find_all(text, md, matches).ok()) return;  // resource limits are errors, not crashes
  uint32_t prev = 0;
  for (auto [b, e] : matches) {
    if (b < prev || e <= b || e > text.size()) fail("bad match range");
    prev = e;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      encode_decode(input, (data[0] & 4) != 0);
      break;
    case 1:
      detokenize(input);
      break;
    case 2:
      regex(input);
      break;
    case 3:
      (void)Tokenizer::from_json(input, "");
      break;
  }
  return 0;
}
