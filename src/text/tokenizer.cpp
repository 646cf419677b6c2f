// Tokenizer: the encode pipeline (added tokens → normalizer → pre-tokenizer → BPE →
// post-processor) and decoding.
#include "text/tokenizer.h"

#include <fstream>
#include <sstream>

#include "text/byte_level.h"
#include "text/tokenization_cleanup.h"
#include "text/tokenizer_json.h"
#include "text/utf8.h"

namespace beam::text {

namespace {

Expected<std::string> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error("cannot read " + path.string());
  return ss.str();
}

constexpr size_t kMinCachedWordBytes = 4;

}  // namespace

// Working memory of one encode call.
struct Tokenizer::EncodeScratch {
  std::vector<AddedSegment> raw_segments;
  std::vector<AddedSegment> normalized_segments;
  std::string normalized;
  PreTokenizerScratch pre;
  BpeScratch bpe;
  WordCache* cache = nullptr;  // leased for the call
};

Expected<Tokenizer> Tokenizer::load(const std::filesystem::path& model_dir) {
  const auto json_path = model_dir / "tokenizer.json";
  BEAM_ASSIGN_OR_RETURN(std::string tokenizer_json, read_file(json_path));
  std::string config_json;
  const auto config_path = model_dir / "tokenizer_config.json";
  if (std::filesystem::exists(config_path)) {
    BEAM_ASSIGN_OR_RETURN(config_json, read_file(config_path));
  }
  auto tok = TokenizerBuilder::build(tokenizer_json, config_json);
  if (!tok.ok()) return make_error(model_dir.string() + "/" + tok.error().message);
  return tok;
}

Expected<Tokenizer> Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json) {
  return TokenizerBuilder::build(tokenizer_json, config_json);
}

Expected<std::vector<TokenId>> Tokenizer::encode(std::string_view text, bool allow_special,
                                                 bool add_special_tokens) const {
  if (text.size() >= (size_t{1} << 32)) return make_error("encode: text is 4 GiB or longer");
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = to_valid_utf8(text);
    text = repaired;
  }
  std::vector<TokenId> ids;
  ids.reserve(text.size() / 3 + 8);
  if (add_special_tokens) ids.insert(ids.end(), prefix_ids_.begin(), prefix_ids_.end());
  EncodeScratch scratch;
  WordCachePool::Lease lease = caches_->acquire();
  scratch.cache = &*lease;
  BEAM_RETURN_IF_ERROR(encode_section(text, allow_special, scratch, ids));
  if (add_special_tokens) ids.insert(ids.end(), suffix_ids_.begin(), suffix_ids_.end());
  return ids;
}

// Raw text: added tokens with normalized=false are found first; the text between them is
// normalized and continues in encode_normalized.
Status Tokenizer::encode_section(std::string_view text, bool allow_special, EncodeScratch& s,
                                 std::vector<TokenId>& out) const {
  if (added_.empty(AddedTokenStage::kRaw)) return encode_normalized(text, allow_special, s, out);
  added_.split(text, AddedTokenStage::kRaw, allow_special, s.raw_segments);
  for (const AddedSegment& seg : s.raw_segments) {  // encode_normalized leaves raw_segments alone
    if (seg.token >= 0) {
      out.push_back(seg.token);
      continue;
    }
    BEAM_RETURN_IF_ERROR(encode_normalized(text.substr(seg.begin, seg.end - seg.begin), allow_special, s, out));
  }
  return ok_status();
}

Status Tokenizer::encode_normalized(std::string_view raw, bool allow_special, EncodeScratch& s,
                                    std::vector<TokenId>& out) const {
  std::string_view text = normalizer_.normalize(raw, s.normalized);
  auto on_word = [&](std::string_view word) { encode_word(word, s, out); };
  if (added_.empty(AddedTokenStage::kNormalized)) return pre_tokenizer_->run(text, s.pre, on_word);
  added_.split(text, AddedTokenStage::kNormalized, allow_special, s.normalized_segments);
  for (const AddedSegment& seg : s.normalized_segments) {
    if (seg.token >= 0) {
      out.push_back(seg.token);
      continue;
    }
    BEAM_RETURN_IF_ERROR(pre_tokenizer_->run(text.substr(seg.begin, seg.end - seg.begin), s.pre, on_word));
  }
  return ok_status();
}

void Tokenizer::encode_word(std::string_view word, EncodeScratch& s, std::vector<TokenId>& out) const {
  // Short words merge faster than a cache lookup (their first pairs come from the dense byte-pair
  // table); very long ones are rare and would crowd the cache.
  if (word.size() < kMinCachedWordBytes || word.size() > WordCache::kMaxWordBytes) {
    model_->encode_word(word, s.bpe, out);
    return;
  }
  const uint64_t hash = WordCache::hash(word);
  if (s.cache->lookup(word, hash, out)) return;
  const size_t before = out.size();
  model_->encode_word(word, s.bpe, out);
  s.cache->insert(word, hash, std::span<const TokenId>(out).subspan(before));
}

const TokenPiece* Tokenizer::piece(TokenId id) const {
  if (id < 0 || id >= vocab_size() || !pieces_[id].exists) return nullptr;
  return &pieces_[id];
}

std::optional<TokenId> Tokenizer::token_to_id(std::string_view token) const {
  auto added = added_by_content_.find(std::string(token));
  if (added != added_by_content_.end()) return added->second;
  if (!is_valid_utf8(token)) return std::nullopt;
  auto bytes = ByteLevelAlphabet().to_bytes(token);
  if (!bytes) return std::nullopt;
  return model_->token_id(*bytes);
}

std::vector<std::string> Tokenizer::id_to_tokens(std::span<const TokenId> ids) const {
  const ByteLevelAlphabet alphabet;
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (TokenId id : ids) {
    const TokenPiece* p = piece(id);
    if (!p || !p->exists)
      out.emplace_back();
    else
      out.push_back(p->added ? p->bytes : alphabet.to_token(p->bytes));
  }
  return out;
}

Expected<std::string> Tokenizer::decode(std::span<const TokenId> ids, bool skip_special) const {
  std::string text;
  Utf8Decoder decoder;
  for (TokenId id : ids) {
    const TokenPiece* p = piece(id);
    if (!p) return make_error("decode: token id " + std::to_string(id) + " has no token");
    if (p->special && skip_special) continue;
    if (p->added) {
      decoder.flush(text);
      text += p->bytes;
    } else {
      decoder.feed(p->bytes, text);
    }
  }
  decoder.flush(text);
  if (config_.clean_up_tokenization_spaces) return clean_up_tokenization(text);
  return text;
}

}  // namespace beam::text
