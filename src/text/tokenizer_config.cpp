// tokenizer_config.json parsing (see tokenizer_config.h).
#include "text/tokenizer_config.h"

#include <nlohmann/json.hpp>

namespace beam::text {

namespace {

using nlohmann::json;

Error config_error(const std::string& what) { return make_error("tokenizer_config.json: " + what); }

// A special-token field: "text", {"content": "text", ...} (a serialized AddedToken) or null.
Expected<std::optional<std::string>> token_text(const json& root, const char* key) {
  if (!root.contains(key) || root[key].is_null()) return std::optional<std::string>();
  const json& v = root[key];
  if (v.is_string()) return std::optional<std::string>(v.get<std::string>());
  if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    return std::optional<std::string>(v["content"].get<std::string>());
  }
  return config_error(std::string("'") + key + "' must be a string, an object with 'content', or null");
}

Status merge_added_tokens_decoder(const json& root, std::vector<AddedToken>& added) {
  if (!root.contains("added_tokens_decoder") || root["added_tokens_decoder"].is_null()) return ok_status();
  const json& table = root["added_tokens_decoder"];
  if (!table.is_object()) return config_error("'added_tokens_decoder' must be an object");
  for (const auto& [key, t] : table.items()) {
    TokenId id = -1;
    try {
      size_t used = 0;
      const long long v = std::stoll(key, &used);
      if (used == key.size() && v >= 0 && v <= INT32_MAX) id = static_cast<TokenId>(v);
    } catch (const std::exception&) {
    }
    if (id < 0) return config_error("added_tokens_decoder key '" + key + "' is not a token id");
    if (!t.is_object() || !t.contains("content") || !t["content"].is_string()) {
      return config_error("added_tokens_decoder[" + key + "] needs a string 'content'");
    }
    const std::string content = t["content"].get<std::string>();
    auto same_id = std::find_if(added.begin(), added.end(), [&](const AddedToken& a) { return a.id == id; });
    if (same_id != added.end()) {
      if (same_id->content != content) {
        return config_error("added_tokens_decoder[" + key + "] is '" + content + "' but tokenizer.json has '" +
                            same_id->content + "'");
      }
      continue;  // tokenizer.json's flags win, as when transformers loads tokenizer.json
    }
    AddedToken a;
    a.id = id;
    a.content = content;
    a.special = t.value("special", false);
    a.single_word = t.value("single_word", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !a.special);
    added.push_back(std::move(a));
  }
  return ok_status();
}

Status mark_additional_special(const json& root, std::vector<AddedToken>& added) {
  if (!root.contains("additional_special_tokens") || root["additional_special_tokens"].is_null()) {
    return ok_status();
  }
  const json& list = root["additional_special_tokens"];
  if (!list.is_array()) return config_error("'additional_special_tokens' must be an array");
  for (const json& entry : list) {
    std::string content;
    if (entry.is_string()) {
      content = entry.get<std::string>();
    } else if (entry.is_object() && entry.contains("content") && entry["content"].is_string()) {
      content = entry["content"].get<std::string>();
    } else {
      return config_error("additional_special_tokens entry " + entry.dump() + " is not a token");
    }
    auto it = std::find_if(added.begin(), added.end(), [&](const AddedToken& a) { return a.content == content; });
    if (it == added.end()) {
      return config_error("additional_special_tokens entry '" + content + "' is not an added token");
    }
    it->special = true;
  }
  return ok_status();
}

Status parse_chat_templates(const json& root, TokenizerConfig& config) {
  if (!root.contains("chat_template") || root["chat_template"].is_null()) return ok_status();
  const json& v = root["chat_template"];
  if (v.is_string()) {
    config.chat_template = v.get<std::string>();
    return ok_status();
  }
  if (!v.is_array()) return config_error("'chat_template' must be a string or a list of {name, template}");
  for (const json& entry : v) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("template") || !entry["template"].is_string()) {
      return config_error("chat_template entry must be {\"name\": ..., \"template\": ...}");
    }
    const std::string name = entry["name"].get<std::string>();
    config.named_chat_templates[name] = entry["template"].get<std::string>();
    if (name == "default") config.chat_template = entry["template"].get<std::string>();
  }
  return ok_status();
}

Expected<std::optional<bool>> optional_bool(const json& root, const char* key) {
  if (!root.contains(key) || root[key].is_null()) return std::optional<bool>();
  if (!root[key].is_boolean()) return config_error(std::string("'") + key + "' must be a boolean");
  return std::optional<bool>(root[key].get<bool>());
}

Status resolve_special_names(const json& root, const std::vector<AddedToken>& added,
                             const std::function<std::optional<TokenId>(std::string_view)>& vocab_id,
                             TokenizerConfig& config) {
  struct Field {
    const char* key;
    std::optional<std::string>* text;
    std::optional<TokenId>* id;
  };
  const Field fields[] = {{"bos_token", &config.bos_token, &config.bos_id},
                          {"eos_token", &config.eos_token, &config.eos_id},
                          {"pad_token", &config.pad_token, &config.pad_id},
                          {"unk_token", &config.unk_token, &config.unk_id}};
  for (const Field& f : fields) {
    BEAM_ASSIGN_OR_RETURN(*f.text, token_text(root, f.key));
    if (!*f.text) continue;
    auto it = std::find_if(added.begin(), added.end(), [&](const AddedToken& a) { return a.content == **f.text; });
    *f.id = it != added.end() ? std::optional<TokenId>(it->id) : vocab_id(**f.text);
    if (!*f.id) return config_error(std::string(f.key) + " '" + **f.text + "' is not a token");
  }
  return ok_status();
}

}  // namespace

Expected<TokenizerConfig> parse_tokenizer_config(
    std::string_view config_json, std::vector<AddedToken>& added,
    const std::function<std::optional<TokenId>(std::string_view)>& vocab_id) {
  TokenizerConfig config;
  if (config_json.empty()) return config;
  json root = json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return config_error("not valid JSON");
  if (!root.is_object()) return config_error("must be a JSON object");
  try {
    BEAM_RETURN_IF_ERROR(merge_added_tokens_decoder(root, added));
    BEAM_RETURN_IF_ERROR(mark_additional_special(root, added));
    BEAM_RETURN_IF_ERROR(parse_chat_templates(root, config));
    BEAM_RETURN_IF_ERROR(resolve_special_names(root, added, vocab_id, config));
    BEAM_ASSIGN_OR_RETURN(auto cleanup, optional_bool(root, "clean_up_tokenization_spaces"));
    if (cleanup) config.clean_up_tokenization_spaces = *cleanup;
    BEAM_ASSIGN_OR_RETURN(config.add_bos_token, optional_bool(root, "add_bos_token"));
    BEAM_ASSIGN_OR_RETURN(config.add_eos_token, optional_bool(root, "add_eos_token"));
  } catch (const json::exception& e) {
    return config_error(std::string("malformed field: ") + e.what());
  }
  return config;
}

}  // namespace beam::text
