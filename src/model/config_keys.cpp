// ConfigKeys implementation: alias lookup, JSON type checks and error wording.
#include "model/config_keys.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

namespace beam {

using nlohmann::json;

namespace {

constexpr int64_t kMaxSize = std::numeric_limits<int32_t>::max();

}  // namespace

std::string describe_json(const json& v) {
  std::string text = v.dump();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return std::string(v.type_name()) + " " + text;
}

ConfigKeys::ConfigKeys(const json& object, std::string source,
                       const std::vector<KeySpelling>& spellings)
    : object_(object), source_(std::move(source)), spellings_(spellings) {}

Error ConfigKeys::error(std::string_view name, const std::string& what) const {
  return make_error(source_ + ": key '" + std::string(name) + "' " + what);
}

Expected<std::optional<ConfigKeys::Found>> ConfigKeys::find(std::string_view canonical) const {
  std::vector<std::string_view> names = {canonical};
  for (const auto& s : spellings_) {
    if (s.canonical == canonical) names.insert(names.end(), s.aliases.begin(), s.aliases.end());
  }
  std::optional<Found> found;
  for (std::string_view name : names) {
    auto it = object_.find(std::string(name));
    if (it == object_.end()) continue;
    if (found && *found->value != *it) {
      return error(name, "and key '" + found->name + "' name the same setting but disagree (" +
                             it->dump() + " vs " + found->value->dump() + ")");
    }
    if (!found) found = Found{std::string(name), &*it};
  }
  return found;
}

std::string ConfigKeys::spelled(std::string_view canonical) const {
  auto f = find(canonical);
  if (f.ok() && f->has_value()) return (*f)->name;
  return std::string(canonical);
}

Expected<ConfigKeys::Found> ConfigKeys::required(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  if (!f) return error(canonical, "is missing (required)");
  if (f->value->is_null()) return error(f->name, "is null (required)");
  return *f;
}

Expected<int64_t> ConfigKeys::as_int(const Found& f) const {
  const json& v = *f.value;
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return error(f.name, "is out of range: " + v.dump());
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return error(f.name, "must be an integer, got " + describe_json(v));
}

Expected<int64_t> ConfigKeys::as_size(const Found& f) const {
  BEAM_ASSIGN_OR_RETURN(int64_t n, as_int(f));
  if (n < 1 || n > kMaxSize) {
    return error(f.name, "must be a positive size (1.." + std::to_string(kMaxSize) + "), got " +
                             std::to_string(n));
  }
  return n;
}

Expected<int64_t> ConfigKeys::required_int(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(Found f, required(canonical));
  return as_int(f);
}

Expected<int64_t> ConfigKeys::required_size(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(Found f, required(canonical));
  return as_size(f);
}

Expected<std::optional<int64_t>> ConfigKeys::optional_size(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  if (!f || f->value->is_null()) return std::optional<int64_t>();
  BEAM_ASSIGN_OR_RETURN(int64_t n, as_size(*f));
  return std::optional<int64_t>(n);
}

Expected<std::optional<int64_t>> ConfigKeys::optional_int(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  if (!f || f->value->is_null()) return std::optional<int64_t>();
  BEAM_ASSIGN_OR_RETURN(int64_t n, as_int(*f));
  return std::optional<int64_t>(n);
}

Expected<std::optional<double>> ConfigKeys::optional_number(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  if (!f || f->value->is_null()) return std::optional<double>();
  if (!f->value->is_number()) return error(f->name, "must be a number, got " + describe_json(*f->value));
  double x = f->value->get<double>();
  if (!std::isfinite(x)) return error(f->name, "must be finite, got " + f->value->dump());
  return std::optional<double>(x);
}

Expected<std::optional<bool>> ConfigKeys::optional_bool(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  if (!f || f->value->is_null()) return std::optional<bool>();
  if (!f->value->is_boolean()) return error(f->name, "must be true or false, got " + describe_json(*f->value));
  return std::optional<bool>(f->value->get<bool>());
}

Expected<std::optional<std::string>> ConfigKeys::optional_string(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  if (!f || f->value->is_null()) return std::optional<std::string>();
  if (!f->value->is_string()) return error(f->name, "must be a string, got " + describe_json(*f->value));
  return std::optional<std::string>(f->value->get<std::string>());
}

Expected<std::string> ConfigKeys::required_string(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(Found f, required(canonical));
  if (!f.value->is_string()) return error(f.name, "must be a string, got " + describe_json(*f.value));
  return f.value->get<std::string>();
}

Expected<const json*> ConfigKeys::required_array(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(Found f, required(canonical));
  if (!f.value->is_array()) return error(f.name, "must be a list, got " + describe_json(*f.value));
  return f.value;
}

Expected<std::vector<int64_t>> ConfigKeys::token_ids(std::string_view canonical) const {
  BEAM_ASSIGN_OR_RETURN(std::optional<Found> f, find(canonical));
  std::vector<int64_t> ids;
  if (!f || f->value->is_null()) return ids;
  auto one = [&](const json& v) -> Status {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return error(f->name, "must hold non-negative integer token ids, got " + describe_json(v));
    }
    ids.push_back(v.get<int64_t>());
    return ok_status();
  };
  if (f->value->is_array()) {
    for (const json& v : *f->value) BEAM_RETURN_IF_ERROR(one(v));
  } else {
    BEAM_RETURN_IF_ERROR(one(*f->value));
  }
  return ids;
}

Expected<json> parse_json_object(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    return make_error(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) return make_error(source + ": expected a JSON object at the top level, got " + std::string(j.type_name()));
  return j;
}

Expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(path + ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(path + ": read error");
  return ss.str();
}

}  // namespace beam
