// `beamserve chat-template`: renders a model's chat template for a conversation and prints the
// prompt exactly (no newline added). --enable-thinking, when absent, leaves the variable undefined.
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_path.h"
#include "cli/usage.h"
#include "text/chat_template.h"

namespace beam::cli {
namespace {

int chat_template_fail(const std::string& message) {
  std::fprintf(stderr, "chat-template: %s\n", message.c_str());
  return 1;
}

Expected<nlohmann::ordered_json> read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  auto json = nlohmann::ordered_json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return make_error(path + ": invalid JSON");
  return json;
}

}  // namespace

int cmd_chat_template(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"model", "messages", "tools", "enable-thinking"}, {"add-generation-prompt"});
  if (!args.ok() || !args->has("messages")) {
    std::fprintf(stderr, "chat-template: %s\n%s",
                 args.ok() ? "--messages is required" : args.error().message.c_str(),
                 kChatTemplateUsage);
    return 2;
  }
  text::ChatTemplateInputs inputs;
  auto messages = read_json(*args->get("messages"));
  if (!messages.ok()) return chat_template_fail(messages.error().message);
  if (!messages->is_array())
    return chat_template_fail(*args->get("messages") + ": expected a JSON array of messages");
  inputs.messages = std::move(messages).value();
  if (auto tools_path = args->get("tools")) {
    auto tools = read_json(*tools_path);
    if (!tools.ok()) return chat_template_fail(tools.error().message);
    inputs.tools = std::move(tools).value();
  }
  inputs.add_generation_prompt = args->get_or("add-generation-prompt", "false") == "true";
  if (auto thinking = args->get("enable-thinking")) {
    if (*thinking != "true" && *thinking != "false")
      return chat_template_fail("--enable-thinking must be true or false");
    inputs.variables["enable_thinking"] = *thinking == "true";
  }
  auto dir = resolve_model_dir(args->get("model"));
  if (!dir.ok()) return chat_template_fail(dir.error().message);
  auto tmpl = text::ChatTemplate::load(*dir);
  if (!tmpl.ok()) return chat_template_fail(tmpl.error().message);
  auto prompt = tmpl->render(inputs);
  if (!prompt.ok()) return chat_template_fail(prompt.error().message);
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  return 0;
}

}  // namespace beam::cli
