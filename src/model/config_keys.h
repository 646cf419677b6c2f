// ConfigKeys: typed, alias-aware reads of one JSON object (config.json, generation_config.json)
// whose errors name the file and the key as it is spelled in that file.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace beam {

// One setting: its canonical key and the other spellings accepted for it.
struct KeySpelling {
  std::string_view canonical;
  std::vector<std::string_view> aliases;
};

// Reads keys of a JSON object. `spellings` is the alias table (canonical keys absent from it
// have no aliases). A key whose value is null counts as absent for the optional_* reads.
class ConfigKeys {
 public:
  ConfigKeys(const nlohmann::json& object, std::string source,
             const std::vector<KeySpelling>& spellings);

  // A present key: the spelling found in the file and its value.
  struct Found {
    std::string name;
    const nlohmann::json* value = nullptr;
  };
  // Finds the canonical key or one alias; two spellings with different values are an error.
  Expected<std::optional<Found>> find(std::string_view canonical) const;

  Expected<int64_t> required_int(std::string_view canonical) const;
  // Integer in [1, 2^31 - 1] (keeps every product of sizes inside int64).
  Expected<int64_t> required_size(std::string_view canonical) const;
  Expected<std::optional<int64_t>> optional_size(std::string_view canonical) const;
  Expected<std::optional<int64_t>> optional_int(std::string_view canonical) const;
  Expected<std::optional<double>> optional_number(std::string_view canonical) const;
  Expected<std::optional<bool>> optional_bool(std::string_view canonical) const;
  Expected<std::optional<std::string>> optional_string(std::string_view canonical) const;
  Expected<std::string> required_string(std::string_view canonical) const;
  Expected<const nlohmann::json*> required_array(std::string_view canonical) const;
  // A token id or a list of token ids ([] when absent or null).
  Expected<std::vector<int64_t>> token_ids(std::string_view canonical) const;

  // "<source>: key '<name>' <what>".
  Error error(std::string_view name, const std::string& what) const;
  const std::string& source() const { return source_; }
  // The spelling of `canonical` used in this file (the canonical name when absent).
  std::string spelled(std::string_view canonical) const;

 private:
  Expected<Found> required(std::string_view canonical) const;
  Expected<int64_t> as_int(const Found& f) const;
  Expected<int64_t> as_size(const Found& f) const;

  const nlohmann::json& object_;
  std::string source_;
  const std::vector<KeySpelling>& spellings_;
};

// The whole text of a file, or an error naming the path.
Expected<std::string> read_text_file(const std::string& path);
// `text` parsed as a JSON object, or an error naming `source` and what is wrong.
Expected<nlohmann::json> parse_json_object(const std::string& text, const std::string& source);

// A short rendering of a JSON value for error messages ("string \"abc\"", "number 3.5").
std::string describe_json(const nlohmann::json& v);

}  // namespace beam
