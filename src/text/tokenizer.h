// Tokenizer: a Hugging Face byte-level BPE tokenizer loaded from a model directory's
// tokenizer.json (+ tokenizer_config.json), producing the same ids as the Hugging Face libraries.
// Immutable after load except for an internal thread-safe word cache: share one per model.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "text/added_vocabulary.h"
#include "text/bpe_model.h"
#include "text/normalizer.h"
#include "text/pre_tokenizer.h"
#include "text/token_id.h"
#include "text/word_cache.h"

namespace beam::text {

// What decoding one id produces: raw bytes of a BPE token, or the verbatim text of an added one.
struct TokenPiece {
  std::string bytes;
  bool added = false;
  bool special = false;  // skipped by decode(..., skip_special=true)
  bool exists = false;   // false for ids with no token (gaps in the id space)
};

// Settings from tokenizer_config.json that are not part of the encoding pipeline.
struct TokenizerConfig {
  std::optional<TokenId> bos_id, eos_id, pad_id, unk_id;
  std::optional<std::string> bos_token, eos_token, pad_token, unk_token;
  std::optional<std::string> chat_template;                    // the default template
  std::map<std::string, std::string> named_chat_templates;     // list form: name → template
  bool clean_up_tokenization_spaces = true;                    // as the JS port's default
  std::optional<bool> add_bos_token, add_eos_token;
};

class Tokenizer {
 public:
  // Loads model_dir/tokenizer.json and, when present, model_dir/tokenizer_config.json.
  static Expected<Tokenizer> load(const std::filesystem::path& model_dir);
  // Builds from file contents; config_json may be empty (no tokenizer_config.json).
  static Expected<Tokenizer> from_json(std::string_view tokenizer_json, std::string_view config_json);

  // Token ids of `text` (bytes; invalid UTF-8 is replaced by U+FFFD per maximal invalid subpart,
  // as TextDecoder and Python's errors="replace" do). allow_special=false leaves the text of
  // special tokens as plain text (user content cannot inject control tokens); non-special added
  // tokens are still matched. add_special_tokens applies the post-processor (e.g. a BOS).
  // Fails only if the regex engine hits a resource limit or text exceeds 4 GiB.
  Expected<std::vector<TokenId>> encode(std::string_view text, bool allow_special,
                                        bool add_special_tokens = false) const;

  // Text of `ids` (added tokens verbatim, BPE bytes decoded as UTF-8 with replacement).
  // Fails on an id that has no token.
  Expected<std::string> decode(std::span<const TokenId> ids, bool skip_special) const;

  // The decode contribution of one id (for incremental detokenization); nullptr if no token.
  const TokenPiece* piece(TokenId id) const;
  // The id of a token by its vocabulary spelling (BPE tokens in ByteLevel characters).
  std::optional<TokenId> token_to_id(std::string_view token) const;
  // The vocabulary spellings of `ids` (transformers' convert_ids_to_tokens: added tokens as
  // written, BPE tokens in ByteLevel characters, "Ġ" for a space); "" for an id with no token.
  std::vector<std::string> id_to_tokens(std::span<const TokenId> ids) const;
  // One past the largest id that has a token.
  int32_t vocab_size() const { return static_cast<int32_t>(pieces_.size()); }
  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }
  const TokenizerConfig& config() const { return config_; }
  bool clean_up_tokenization_spaces() const { return config_.clean_up_tokenization_spaces; }

 private:
  friend class TokenizerBuilder;
  Tokenizer() = default;

  struct EncodeScratch;
  Status encode_section(std::string_view text, bool allow_special, EncodeScratch& s,
                        std::vector<TokenId>& out) const;
  Status encode_normalized(std::string_view text, bool allow_special, EncodeScratch& s,
                           std::vector<TokenId>& out) const;
  void encode_word(std::string_view word, EncodeScratch& s, std::vector<TokenId>& out) const;

  Normalizer normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  AddedVocabulary added_;
  std::vector<TokenId> prefix_ids_, suffix_ids_;  // post-processor for one sequence
  std::vector<TokenPiece> pieces_;                // by id
  std::unordered_map<std::string, TokenId> added_by_content_;
  TokenizerConfig config_;
  std::unique_ptr<WordCachePool> caches_;
};

}  // namespace beam::text
