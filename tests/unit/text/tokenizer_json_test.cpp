// Loading tokenizer.json / tokenizer_config.json: supported components end to end on a synthetic
// byte-level BPE, and errors that name the unsupported component or malformed field.
#include <gtest/gtest.h>

#include "text/tokenizer.h"
#include "tokenizer_test_util.h"

namespace beam::text {
namespace {

using testing::SyntheticTokenizer;
using nlohmann::json;

std::string load_error(const std::string& tokenizer_json, const std::string& config_json = "") {
  auto tok = Tokenizer::from_json(tokenizer_json, config_json);
  EXPECT_FALSE(tok.ok());
  return tok.ok() ? "" : tok.error().message;
}

std::vector<TokenId> encode(const Tokenizer& tok, std::string_view text, bool allow_special = true) {
  auto ids = tok.encode(text, allow_special);
  EXPECT_TRUE(ids.ok());
  return ids.ok() ? *ids : std::vector<TokenId>{};
}

TEST(TokenizerJson, UnsupportedComponentsAreNamed) {
  struct Case {
    const char* field;
    json value;
    const char* message;
  };
  const Case cases[] = {
      {"pre_tokenizer", {{"type", "Metaspace"}, {"replacement", "_"}},
       "tokenizer.json: pre_tokenizer type 'Metaspace' is not supported"},
      {"normalizer", {{"type", "Lowercase"}}, "tokenizer.json: normalizer type 'Lowercase' is not supported"},
      {"normalizer", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}},
       "tokenizer.json: normalizer type 'Strip' is not supported"},
      {"decoder", {{"type", "WordPiece"}}, "tokenizer.json: decoder type 'WordPiece' is not supported"},
      {"post_processor", {{"type", "Nope"}}, "tokenizer.json: post_processor type 'Nope' is not supported"},
  };
  for (const Case& c : cases) {
    SyntheticTokenizer s;
    json root = json::parse(s.json());
    root[c.field] = c.value;
    EXPECT_EQ(load_error(root.dump()), c.message);
  }
  SyntheticTokenizer s;
  json root = json::parse(s.json());
  root["model"]["type"] = "WordPiece";
  EXPECT_EQ(load_error(root.dump()), "tokenizer.json: model type 'WordPiece' is not supported");
}

TEST(TokenizerJson, MalformedDocumentsAreErrors) {
  EXPECT_EQ(load_error("{not json"), "tokenizer.json: not valid JSON");
  EXPECT_EQ(load_error("[]"), "tokenizer.json: must be a JSON object");
  EXPECT_EQ(load_error(R"({"model": {}})"), "tokenizer.json: missing 'normalizer'");
  SyntheticTokenizer s;
  s.merges = {{"a", "b"}};
  json root = json::parse(s.json());
  root["model"]["merges"].push_back("x zz");
  EXPECT_EQ(load_error(root.dump()), "tokenizer.json: model.merges[1]: 'zz' is not in the vocabulary");
  root = json::parse(s.json());
  root["model"]["merges"][0] = "a b c";
  EXPECT_NE(load_error(root.dump()).find("model.merges[0]"), std::string::npos);
  root = json::parse(s.json());
  root["model"]["dropout"] = 0.1;
  EXPECT_NE(load_error(root.dump()).find("dropout must be null"), std::string::npos);
  root = json::parse(s.json());
  root["pre_tokenizer"] = {{"type", "Sequence"},
                           {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "Split"}, {"pattern", {{"String", "x"}}}, {"behavior", "Isolated"}}}}};
  EXPECT_NE(load_error(root.dump()).find("ByteLevel must be last"), std::string::npos);
  root = json::parse(s.json());
  root["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\G"}}}, {"behavior", "Isolated"}};
  EXPECT_NE(load_error(root.dump()).find("pre_tokenizer Split"), std::string::npos);
  root = json::parse(s.json());
  root["added_tokens"] = {{{"content", "<x>"}}};
  EXPECT_NE(load_error(root.dump()).find("added_tokens"), std::string::npos);
  root = json::parse(s.json());
  root["model"]["vocab"]["zz"] = "seven";
  EXPECT_NE(load_error(root.dump()).find("model.vocab"), std::string::npos);
}

TEST(TokenizerJson, ConfigErrorsNameTheConfigFile) {
  SyntheticTokenizer s;
  EXPECT_EQ(load_error(s.json(), "{oops"), "tokenizer_config.json: not valid JSON");
  EXPECT_EQ(load_error(s.json(), R"({"eos_token": "<nope>"})"), "tokenizer_config.json: eos_token '<nope>' is not a token");
  EXPECT_NE(load_error(s.json(), R"({"additional_special_tokens": ["<zz>"]})").find("additional_special_tokens"),
            std::string::npos);
  EXPECT_NE(load_error(s.json(), R"({"clean_up_tokenization_spaces": "yes"})").find("clean_up_tokenization_spaces"),
            std::string::npos);
}

TEST(TokenizerJson, EncodesAndDecodesASyntheticByteLevelBpe) {
  SyntheticTokenizer s;
  s.merges = {{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}};
  s.added_tokens.push_back(testing::added_token(s.next_id(), "<|end|>", true));
  auto tok = Tokenizer::from_json(s.json(), R"({"eos_token": "<|end|>", "clean_up_tokenization_spaces": false})");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  const TokenId hello = s.id_of("hello"), sp_w = s.id_of(" w"), end = s.next_id();
  EXPECT_EQ(encode(*tok, "hello world<|end|>"),
            (std::vector<TokenId>{hello, sp_w, 'o', 'r', 'l', 'd', end}));
  EXPECT_EQ(encode(*tok, "<|end|>", /*allow_special=*/false),
            (std::vector<TokenId>{'<', '|', 'e', 'n', 'd', '|', '>'}));
  EXPECT_EQ(tok->config().eos_id, end);
  EXPECT_EQ(*tok->decode(encode(*tok, "hello world<|end|>"), false), "hello world<|end|>");
  EXPECT_EQ(*tok->decode(encode(*tok, "hello world<|end|>"), /*skip_special=*/true), "hello world");
  EXPECT_EQ(tok->token_to_id("Ġw"), sp_w);
  EXPECT_EQ(tok->token_to_id("<|end|>"), end);
  EXPECT_FALSE(tok->token_to_id("nope").has_value());
  // convert_ids_to_tokens: the vocabulary spellings, each the token_to_id of its id.
  EXPECT_EQ(tok->id_to_tokens(std::vector<TokenId>{hello, sp_w, 'o', end, end + 1}),
            (std::vector<std::string>{"hello", "Ġw", "o", "<|end|>", ""}));
  EXPECT_FALSE(tok->decode(std::vector<TokenId>{end + 1}, false).ok());
  EXPECT_FALSE(tok->decode(std::vector<TokenId>{-1}, false).ok());
}

TEST(TokenizerJson, InvalidUtf8InputIsReplacedBeforeEncoding) {
  SyntheticTokenizer s;
  auto tok = Tokenizer::from_json(s.json(), "");
  ASSERT_TRUE(tok.ok());
  // 0xFF → U+FFFD (EF BF BD), encoded as its three bytes.
  EXPECT_EQ(encode(*tok, "a\xFF"), (std::vector<TokenId>{'a', 0xEF, 0xBF, 0xBD}));
  EXPECT_EQ(encode(*tok, "\xE4\xB8"), (std::vector<TokenId>{0xEF, 0xBF, 0xBD}));
}

TEST(TokenizerJson, TemplateProcessingAddsBos) {
  SyntheticTokenizer s;
  const int bos = s.next_id();
  s.added_tokens.push_back(testing::added_token(bos, "<s>", true));
  s.post_processor = json::parse(R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel"},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
       "pair": [],
       "special_tokens": {"<s>": {"id": "<s>", "ids": [)" + std::to_string(bos) + R"(], "tokens": ["<s>"]}}}]})");
  auto tok = Tokenizer::from_json(s.json(), "");
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(*tok->encode("a", true, /*add_special_tokens=*/true), (std::vector<TokenId>{bos, 'a'}));
  EXPECT_EQ(*tok->encode("a", true, /*add_special_tokens=*/false), (std::vector<TokenId>{'a'}));
}

TEST(TokenizerJson, ConfigFieldsAndChatTemplates) {
  SyntheticTokenizer s;
  s.added_tokens.push_back(testing::added_token(s.next_id(), "<a>", false));
  const json config = {
      {"bos_token", {{"content", "<a>"}, {"__type", "AddedToken"}}},
      {"pad_token", nullptr},
      {"chat_template", {{{"name", "default"}, {"template", "{{ x }}"}}, {{"name", "tool_use"}, {"template", "T"}}}},
      {"added_tokens_decoder", {{std::to_string(s.next_id() + 1), {{"content", "<b>"}, {"special", true}}}}},
      {"additional_special_tokens", {"<a>"}}};
  auto tok = Tokenizer::from_json(s.json(), config.dump());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  EXPECT_EQ(tok->config().bos_id, s.next_id());
  EXPECT_FALSE(tok->config().pad_id.has_value());
  EXPECT_EQ(tok->config().chat_template, "{{ x }}");
  EXPECT_EQ(tok->config().named_chat_templates.at("tool_use"), "T");
  EXPECT_TRUE(tok->clean_up_tokenization_spaces());  // default when the config does not say
  // <b> comes from added_tokens_decoder; <a> became special through additional_special_tokens.
  EXPECT_EQ(*tok->encode("<a><b>", true), (std::vector<TokenId>{s.next_id(), s.next_id() + 1}));
  EXPECT_EQ(*tok->decode(std::vector<TokenId>{s.next_id(), 'x', s.next_id() + 1}, true), "x");
}

TEST(TokenizerJson, CleanUpTokenizationSpaces) {
  SyntheticTokenizer s;
  auto tok = Tokenizer::from_json(s.json(), R"({"clean_up_tokenization_spaces": true})");
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(*tok->decode(encode(*tok, "a , b . I 'm sure they 're ok ' yes ' don 't"), false),
            "a, b. I'm sure they're ok'yes'don 't");
}

}  // namespace
}  // namespace beam::text
