// Renders many chat-template cases in one process for the reference comparison
// (check_reference.mjs): reads a JSON array of cases, prints a JSON array of results.
// A case: {"model_dir", "messages", "tools"?, "add_generation_prompt", "variables"}.
// A result: {"ok": true, "output": "..."} or {"ok": false, "error": "..."}.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "text/chat_template.h"

namespace {

using nlohmann::ordered_json;

ordered_json render_case(const ordered_json& c, std::map<std::string, beam::Expected<beam::text::ChatTemplate>>& cache) {
  std::string dir = c.at("model_dir").get<std::string>();
  auto it = cache.find(dir);
  if (it == cache.end()) it = cache.emplace(dir, beam::text::ChatTemplate::load(dir)).first;
  if (!it->second.ok()) return {{"ok", false}, {"error", it->second.error().message}};
  beam::text::ChatTemplateInputs inputs;
  inputs.messages = c.at("messages");
  if (c.contains("tools") && !c["tools"].is_null()) inputs.tools = c["tools"];
  inputs.add_generation_prompt = c.value("add_generation_prompt", false);
  if (c.contains("variables")) inputs.variables = c["variables"];
  auto out = it->second->render(inputs);
  if (!out.ok()) return {{"ok", false}, {"error", out.error().message}};
  return {{"ok", true}, {"output", *out}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: template_render_batch CASES.json\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  auto cases = ordered_json::parse(ss.str(), nullptr, false);
  if (!in || cases.is_discarded() || !cases.is_array()) {
    std::fprintf(stderr, "template_render_batch: %s is not a JSON array\n", argv[1]);
    return 2;
  }
  std::map<std::string, beam::Expected<beam::text::ChatTemplate>> cache;
  ordered_json results = ordered_json::array();
  for (const auto& c : cases) results.push_back(render_case(c, cache));
  std::cout << results.dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  return 0;
}
