// parse_lora_modules / parse_lora_paths: the two servers' spellings of adapters to load at start.
#include "cli/lora_flags.h"

#include <nlohmann/json.hpp>
#include <set>

namespace beam::cli {
namespace {

using nlohmann::json;

// A JSON object value of `flag` with string members among `keys` (plus bool ones among `flags`),
// or an error naming the value.
Expected<json> json_value(const std::string& flag, const std::string& value,
                          const std::set<std::string>& keys,
                          const std::set<std::string>& flags = {}) {
  const json j = json::parse(value, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(flag + ": '" + value + "' is not a JSON object");
  for (const auto& [key, member] : j.items()) {
    if (flags.count(key)) {
      if (!member.is_boolean()) return make_error(flag + ": '" + key + "' must be true or false");
      continue;
    }
    if (!keys.count(key)) {
      std::string known;
      for (const std::string& k : keys) known += (known.empty() ? "" : ", ") + k;
      for (const std::string& k : flags) known += ", " + k;
      return make_error(flag + ": unknown key '" + key + "' (the keys are " + known + ")");
    }
    if (!member.is_string() || member.get<std::string>().empty())
      return make_error(flag + ": '" + key + "' must be a non-empty string in '" + value + "'");
  }
  return j;
}

// NAME=DIR: the adapter, or an error naming the value.
Expected<server::StartupAdapter> name_and_dir(const std::string& flag, const std::string& value) {
  const size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    return make_error(flag + ": expected NAME=DIR or a JSON object, got '" + value + "'");
  return server::StartupAdapter{value.substr(0, eq), value.substr(eq + 1)};
}

}  // namespace

Expected<LoraModules> parse_lora_modules(const std::vector<std::string>& values) {
  const std::string flag = "--lora-modules";
  LoraModules out;
  for (const std::string& value : values) {
    if (!value.empty() && value.front() == '{') {
      BEAM_ASSIGN_OR_RETURN(json j, json_value(flag, value, {"name", "path", "base_model_name"}));
      if (!j.contains("name") || !j.contains("path"))
        return make_error(flag + ": '" + value + "' needs a name and a path");
      out.push_back({j["name"].get<std::string>(), j["path"].get<std::string>()});
      continue;
    }
    for (size_t begin = 0; begin < value.size();) {  // NAME=DIR[,NAME=DIR...]
      size_t end = value.find(',', begin);
      if (end == std::string::npos) end = value.size();
      BEAM_ASSIGN_OR_RETURN(auto pair, name_and_dir(flag, value.substr(begin, end - begin)));
      out.push_back(std::move(pair));
      begin = end + 1;
    }
  }
  return out;
}

Expected<LoraModules> parse_lora_paths(const std::vector<std::string>& values) {
  const std::string flag = "--lora-paths";
  LoraModules out;
  for (const std::string& value : values) {
    if (!value.empty() && value.front() == '{') {
      BEAM_ASSIGN_OR_RETURN(json j,
                            json_value(flag, value, {"lora_name", "lora_path"}, {"pinned"}));
      if (!j.contains("lora_name") || !j.contains("lora_path"))
        return make_error(flag + ": '" + value + "' needs a lora_name and a lora_path");
      out.push_back({j["lora_name"].get<std::string>(), j["lora_path"].get<std::string>(),
                     j.value("pinned", false)});
    } else if (value.find('=') != std::string::npos) {
      BEAM_ASSIGN_OR_RETURN(auto pair, name_and_dir(flag, value));
      out.push_back(std::move(pair));
    } else if (!value.empty()) {
      out.push_back({value, value});
    } else {
      return make_error(flag + ": an empty value");
    }
  }
  return out;
}

}  // namespace beam::cli
