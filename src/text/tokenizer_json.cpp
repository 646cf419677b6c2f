// tokenizer.json → Tokenizer components (normalizer, pre_tokenizer, model, added_tokens,
// post_processor, decoder). tokenizer_config.json is read in tokenizer_config.cpp.
#include "text/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "text/byte_level.h"
#include "text/tokenizer_config.h"

namespace beam::text {

namespace {

using nlohmann::json;
constexpr std::string_view kFile = "tokenizer.json: ";

Error unsupported(std::string_view component, const json& node) {
  std::string type = node.is_object() && node.contains("type") && node["type"].is_string()
                         ? node["type"].get<std::string>()
                         : node.dump();
  return make_error(std::string(kFile) + std::string(component) + " type '" + type +
                    "' is not supported");
}

Error malformed(std::string_view where, std::string_view what) {
  return make_error(std::string(kFile) + std::string(where) + ": " + std::string(what));
}

std::string type_of(const json& node) {
  if (!node.is_object() || !node.contains("type") || !node["type"].is_string()) return "";
  return node["type"].get<std::string>();
}

// A boolean field that may be absent (→ fallback) but must be a boolean when present.
Expected<bool> get_bool(const json& node, const char* key, bool fallback, std::string_view where) {
  if (!node.contains(key) || node[key].is_null()) return fallback;
  if (!node[key].is_boolean()) return malformed(where, std::string("'") + key + "' must be a boolean");
  return node[key].get<bool>();
}

Status add_normalizer_forms(const json& node, std::vector<NormalizationForm>& forms) {
  if (node.is_null()) return ok_status();
  const std::string type = type_of(node);
  if (type == "NFC") {
    forms.push_back(NormalizationForm::kNfc);
  } else if (type == "NFD") {
    forms.push_back(NormalizationForm::kNfd);
  } else if (type == "NFKC") {
    forms.push_back(NormalizationForm::kNfkc);
  } else if (type == "NFKD") {
    forms.push_back(NormalizationForm::kNfkd);
  } else if (type == "Sequence") {
    if (!node.contains("normalizers") || !node["normalizers"].is_array()) {
      return malformed("normalizer Sequence", "'normalizers' must be an array");
    }
    for (const json& child : node["normalizers"]) BEAM_RETURN_IF_ERROR(add_normalizer_forms(child, forms));
  } else {
    return unsupported("normalizer", node);
  }
  return ok_status();
}

struct ByteLevelSettings {
  bool seen = false;
  bool add_prefix_space = false;
  bool use_regex = true;
};

Expected<SplitBehavior> parse_behavior(const json& node) {
  if (!node.contains("behavior") || !node["behavior"].is_string()) {
    return malformed("pre_tokenizer Split", "'behavior' must be a string");
  }
  const std::string b = node["behavior"].get<std::string>();
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return malformed("pre_tokenizer Split", "unknown behavior '" + b + "'");
}

Expected<Pcre2Regex> parse_split_pattern(const json& node) {
  const json* pattern = node.contains("pattern") ? &node["pattern"] : nullptr;
  if (pattern && pattern->is_object() && pattern->contains("Regex") && (*pattern)["Regex"].is_string()) {
    auto regex = Pcre2Regex::from_oniguruma((*pattern)["Regex"].get<std::string>());
    if (!regex.ok()) return malformed("pre_tokenizer Split", regex.error().message);
    return std::move(regex).value();
  }
  if (pattern && pattern->is_object() && pattern->contains("String") && (*pattern)["String"].is_string()) {
    auto literal = Pcre2Regex::from_literal((*pattern)["String"].get<std::string>());
    if (!literal.ok()) return malformed("pre_tokenizer Split", literal.error().message);
    return std::move(literal).value();
  }
  return malformed("pre_tokenizer Split", "'pattern' must be {\"Regex\": ...} or {\"String\": ...}");
}

Expected<SplitStep> parse_split(const json& node) {
  BEAM_ASSIGN_OR_RETURN(SplitBehavior behavior, parse_behavior(node));
  BEAM_ASSIGN_OR_RETURN(bool invert, get_bool(node, "invert", false, "pre_tokenizer Split"));
  BEAM_ASSIGN_OR_RETURN(Pcre2Regex pattern, parse_split_pattern(node));
  return SplitStep{std::move(pattern), behavior, invert};
}

// Flattens Sequence nodes; ByteLevel must come last (it turns text into bytes).
Status collect_pre_tokenizers(const json& node, std::vector<SplitStep>& splits, ByteLevelSettings& bl) {
  const std::string type = type_of(node);
  if (type == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array()) {
      return malformed("pre_tokenizer Sequence", "'pretokenizers' must be an array");
    }
    for (const json& child : node["pretokenizers"]) BEAM_RETURN_IF_ERROR(collect_pre_tokenizers(child, splits, bl));
    return ok_status();
  }
  if (bl.seen) {
    return malformed("pre_tokenizer", "'" + type + "' after ByteLevel is not supported (ByteLevel must be last)");
  }
  if (type == "Split") {
    BEAM_ASSIGN_OR_RETURN(SplitStep step, parse_split(node));
    splits.push_back(std::move(step));
    return ok_status();
  }
  if (type == "ByteLevel") {
    bl.seen = true;
    BEAM_ASSIGN_OR_RETURN(bl.add_prefix_space, get_bool(node, "add_prefix_space", false, "pre_tokenizer ByteLevel"));
    BEAM_ASSIGN_OR_RETURN(bl.use_regex, get_bool(node, "use_regex", true, "pre_tokenizer ByteLevel"));
    return ok_status();
  }
  return unsupported("pre_tokenizer", node);
}

Expected<PreTokenizer> parse_pre_tokenizer(const json& node) {
  if (node.is_null()) {
    return make_error(std::string(kFile) + "pre_tokenizer null is not supported (byte-level BPE needs ByteLevel)");
  }
  std::vector<SplitStep> splits;
  ByteLevelSettings bl;
  BEAM_RETURN_IF_ERROR(collect_pre_tokenizers(node, splits, bl));
  if (!bl.seen) {
    return make_error(std::string(kFile) + "pre_tokenizer has no ByteLevel step; only byte-level BPE is supported");
  }
  return PreTokenizer::create(std::move(splits), bl.use_regex, bl.add_prefix_space);
}

Status check_decoder(const json& node) {
  if (type_of(node) == "ByteLevel") return ok_status();
  if (node.is_null()) return make_error(std::string(kFile) + "decoder null is not supported (need ByteLevel)");
  return unsupported("decoder", node);
}

}  // namespace

namespace {

// Lookups by std::string_view without building a std::string.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
using SpellingMap = std::unordered_map<std::string, TokenId, StringHash, std::equal_to<>>;

// The BPE model section, resolved to ids.
struct ParsedModel {
  SpellingMap vocab;  // vocabulary spelling → id
  std::vector<BpeMerge> merges;
  BpeModel::Options options;
};

// The two spellings of a merge: views into the JSON document, valid while it lives.
Expected<std::pair<std::string_view, std::string_view>> merge_parts(const json& m, size_t rank) {
  const std::string where = "model.merges[" + std::to_string(rank) + "]";
  if (m.is_string()) {
    const std::string_view s = m.get_ref<const std::string&>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return malformed(where, "'" + std::string(s) + "' is not two tokens separated by one space");
    }
    return std::pair{s.substr(0, space), s.substr(space + 1)};
  }
  if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
    return std::pair<std::string_view, std::string_view>{m[0].get_ref<const std::string&>(),
                                                         m[1].get_ref<const std::string&>()};
  }
  return malformed(where, "must be \"a b\" or [\"a\", \"b\"]");
}

Status parse_model_options(const json& model, ParsedModel& out) {
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    return malformed("model", "BPE dropout must be null (dropout makes encoding random)");
  }
  BEAM_ASSIGN_OR_RETURN(bool byte_fallback, get_bool(model, "byte_fallback", false, "model"));
  if (byte_fallback) return malformed("model", "BPE byte_fallback is not supported");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && !model[key].is_null() &&
        !(model[key].is_string() && model[key].get<std::string>().empty())) {
      return malformed("model", std::string("BPE ") + key + " is not supported");
    }
  }
  BEAM_ASSIGN_OR_RETURN(out.options.fuse_unk, get_bool(model, "fuse_unk", false, "model"));
  BEAM_ASSIGN_OR_RETURN(out.options.ignore_merges, get_bool(model, "ignore_merges", false, "model"));
  if (model.contains("unk_token") && !model["unk_token"].is_null()) {
    if (!model["unk_token"].is_string()) return malformed("model", "'unk_token' must be a string or null");
    auto it = out.vocab.find(model["unk_token"].get<std::string>());
    if (it == out.vocab.end()) return malformed("model", "unk_token is not in the vocabulary");
    out.options.unk_id = it->second;
  }
  return ok_status();
}

Expected<ParsedModel> parse_model(const json& model) {
  if (!model.is_object()) return malformed("model", "must be an object");
  if (model.contains("type") && type_of(model) != "BPE") return unsupported("model", model);
  if (!model.contains("vocab") || !model["vocab"].is_object()) return malformed("model", "'vocab' must be an object");
  if (!model.contains("merges") || !model["merges"].is_array()) return malformed("model", "'merges' must be an array");
  ParsedModel out;
  out.vocab.reserve(model["vocab"].size());
  for (const auto& [spelling, id] : model["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return malformed("model.vocab", "id of '" + spelling + "' is not a non-negative 32-bit integer");
    }
    out.vocab.emplace(spelling, static_cast<TokenId>(id.get<int64_t>()));
  }
  BEAM_RETURN_IF_ERROR(parse_model_options(model, out));
  const json& merges = model["merges"];
  out.merges.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    BEAM_ASSIGN_OR_RETURN(auto parts, merge_parts(merges[rank], rank));
    joined.assign(parts.first);
    joined += parts.second;
    auto a = out.vocab.find(parts.first), b = out.vocab.find(parts.second), r = out.vocab.find(joined);
    if (a == out.vocab.end() || b == out.vocab.end() || r == out.vocab.end()) {
      const std::string_view missing = a == out.vocab.end() ? parts.first : b == out.vocab.end() ? parts.second : joined;
      return malformed("model.merges[" + std::to_string(rank) + "]", "'" + std::string(missing) + "' is not in the vocabulary");
    }
    out.merges.push_back({a->second, b->second, r->second});
  }
  return out;
}

Expected<std::vector<AddedToken>> parse_added_tokens(const json& root) {
  std::vector<AddedToken> tokens;
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return tokens;
  if (!root["added_tokens"].is_array()) return malformed("added_tokens", "must be an array");
  for (const json& t : root["added_tokens"]) {
    const std::string where = "added_tokens";
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || t["id"].get<int64_t>() < 0 ||
        t["id"].get<int64_t>() > INT32_MAX || !t.contains("content") || !t["content"].is_string()) {
      return malformed(where, "entry " + t.dump() + " needs an integer 'id' and a string 'content'");
    }
    AddedToken a;
    a.id = static_cast<TokenId>(t["id"].get<int64_t>());
    a.content = t["content"].get<std::string>();
    BEAM_ASSIGN_OR_RETURN(a.special, get_bool(t, "special", false, where));
    BEAM_ASSIGN_OR_RETURN(a.single_word, get_bool(t, "single_word", false, where));
    BEAM_ASSIGN_OR_RETURN(a.lstrip, get_bool(t, "lstrip", false, where));
    BEAM_ASSIGN_OR_RETURN(a.rstrip, get_bool(t, "rstrip", false, where));
    BEAM_ASSIGN_OR_RETURN(a.normalized, get_bool(t, "normalized", !a.special, where));
    tokens.push_back(std::move(a));
  }
  return tokens;
}

// Ids a TemplateProcessing / Roberta / Bert post-processor puts around a single sequence.
Status add_post_processor(const json& node, const ParsedModel& model, std::vector<TokenId>& prefix,
                          std::vector<TokenId>& suffix) {
  if (node.is_null()) return ok_status();
  const std::string type = type_of(node);
  if (type == "ByteLevel") return ok_status();  // only adjusts offsets
  if (type == "Sequence") {
    if (!node.contains("processors") || !node["processors"].is_array()) {
      return malformed("post_processor Sequence", "'processors' must be an array");
    }
    for (const json& child : node["processors"]) BEAM_RETURN_IF_ERROR(add_post_processor(child, model, prefix, suffix));
    return ok_status();
  }
  if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      if (!node.contains(key) || !node[key].is_array() || node[key].size() != 2 || !node[key][1].is_number_integer()) {
        return malformed("post_processor " + type, std::string("'") + key + "' must be [token, id]");
      }
    }
    prefix.insert(prefix.begin(), node["cls"][1].get<TokenId>());
    suffix.push_back(node["sep"][1].get<TokenId>());
    return ok_status();
  }
  if (type != "TemplateProcessing") return unsupported("post_processor", node);
  const std::string where = "post_processor TemplateProcessing";
  if (!node.contains("single") || !node["single"].is_array()) return malformed(where, "'single' must be an array");
  const json specials = node.contains("special_tokens") ? node["special_tokens"] : json::object();
  bool seen_sequence = false;
  std::vector<TokenId> before, after;
  for (const json& item : node["single"]) {
    if (item.contains("Sequence")) {
      if (seen_sequence || item["Sequence"].value("id", "") != "A") {
        return malformed(where, "'single' must hold sequence A exactly once");
      }
      seen_sequence = true;
    } else if (item.contains("SpecialToken") && item["SpecialToken"].contains("id")) {
      const std::string name = item["SpecialToken"]["id"].get<std::string>();
      if (!specials.is_object() || !specials.contains(name) || !specials[name].contains("ids") ||
          !specials[name]["ids"].is_array()) {
        return malformed(where, "special token '" + name + "' has no ids in 'special_tokens'");
      }
      for (const json& id : specials[name]["ids"]) (seen_sequence ? after : before).push_back(id.get<TokenId>());
    } else {
      return malformed(where, "unknown template item " + item.dump());
    }
  }
  if (!seen_sequence) return malformed(where, "'single' has no sequence A");
  // A later processor wraps the output of the earlier ones.
  prefix.insert(prefix.begin(), before.begin(), before.end());
  suffix.insert(suffix.end(), after.begin(), after.end());
  return ok_status();
}

}  // namespace

namespace {

// Fills tok.pieces_ (by id) from the BPE vocabulary and the added tokens; an id given two
// different meanings is an error.
Status build_pieces(const ParsedModel& model, const std::vector<AddedToken>& added,
                    const ByteLevelAlphabet& alphabet, std::vector<TokenPiece>& pieces,
                    std::unordered_map<std::string, TokenId>& model_vocab_bytes) {
  model_vocab_bytes.reserve(model.vocab.size());
  TokenId max_id = -1;
  for (const auto& [spelling, id] : model.vocab) max_id = std::max(max_id, id);
  for (const AddedToken& a : added) max_id = std::max(max_id, a.id);
  pieces.assign(static_cast<size_t>(max_id + 1), TokenPiece{});
  for (const auto& [spelling, id] : model.vocab) {
    TokenPiece& p = pieces[id];
    if (p.exists) return malformed("model.vocab", "id " + std::to_string(id) + " is used twice");
    p.exists = true;
    if (auto bytes = alphabet.to_bytes(spelling)) {
      p.bytes = *bytes;
      model_vocab_bytes.emplace(*bytes, id);
    } else {
      p.bytes = spelling;  // not ByteLevel-encodable: never produced, decodes as its UTF-8
    }
  }
  for (const AddedToken& a : added) {
    TokenPiece& p = pieces[a.id];
    p.exists = true;
    p.bytes = a.content;
    p.added = true;
    p.special = a.special;
  }
  return ok_status();
}

}  // namespace

Expected<Tokenizer> TokenizerBuilder::build(std::string_view tokenizer_json, std::string_view config_json) {
  json root = json::parse(tokenizer_json, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return make_error(std::string(kFile) + "not valid JSON");
  if (!root.is_object()) return make_error(std::string(kFile) + "must be a JSON object");
  for (const char* key : {"model", "normalizer", "pre_tokenizer", "decoder"}) {
    if (!root.contains(key)) return make_error(std::string(kFile) + "missing '" + key + "'");
  }
  try {
    Tokenizer tok;
    std::vector<NormalizationForm> forms;
    BEAM_RETURN_IF_ERROR(add_normalizer_forms(root["normalizer"], forms));
    tok.normalizer_ = Normalizer(std::move(forms));
    BEAM_ASSIGN_OR_RETURN(PreTokenizer pre, parse_pre_tokenizer(root["pre_tokenizer"]));
    tok.pre_tokenizer_ = std::make_unique<PreTokenizer>(std::move(pre));
    BEAM_RETURN_IF_ERROR(check_decoder(root["decoder"]));
    BEAM_ASSIGN_OR_RETURN(ParsedModel model, parse_model(root["model"]));
    BEAM_ASSIGN_OR_RETURN(std::vector<AddedToken> added, parse_added_tokens(root));
    const ByteLevelAlphabet alphabet;
    auto vocab_id = [&](std::string_view spelling) -> std::optional<TokenId> {
      auto it = model.vocab.find(spelling);
      return it == model.vocab.end() ? std::nullopt : std::optional<TokenId>(it->second);
    };
    BEAM_ASSIGN_OR_RETURN(tok.config_, parse_tokenizer_config(config_json, added, vocab_id));
    std::unordered_map<std::string, TokenId> vocab_bytes;
    BEAM_RETURN_IF_ERROR(build_pieces(model, added, alphabet, tok.pieces_, vocab_bytes));
    for (const AddedToken& a : added) tok.added_by_content_.emplace(a.content, a.id);
    BEAM_ASSIGN_OR_RETURN(AddedVocabulary vocabulary, AddedVocabulary::create(std::move(added), tok.normalizer_));
    tok.added_ = std::move(vocabulary);
    BEAM_RETURN_IF_ERROR(add_post_processor(root.value("post_processor", json()), model, tok.prefix_ids_,
                                            tok.suffix_ids_));
    for (TokenId id : tok.prefix_ids_) {
      if (!tok.piece(id)) return malformed("post_processor", "id " + std::to_string(id) + " has no token");
    }
    for (TokenId id : tok.suffix_ids_) {
      if (!tok.piece(id)) return malformed("post_processor", "id " + std::to_string(id) + " has no token");
    }
    BEAM_ASSIGN_OR_RETURN(BpeModel bpe, BpeModel::create(std::move(vocab_bytes), model.merges, model.options));
    tok.model_ = std::make_unique<BpeModel>(std::move(bpe));
    tok.caches_ = std::make_unique<WordCachePool>(/*num_caches=*/4, /*slots_per_cache=*/1 << 16);
    return tok;
  } catch (const json::exception& e) {
    return make_error(std::string(kFile) + "malformed: " + e.what());
  }
}

}  // namespace beam::text
