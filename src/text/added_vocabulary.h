// Added tokens (tokenizer.json "added_tokens"): found in the input before pre-tokenization with
// leftmost-longest matching, honouring single_word, lstrip, rstrip and normalized the way
// Hugging Face's AddedVocabulary does. Immutable and thread-safe after create.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "text/normalizer.h"
#include "text/token_id.h"

namespace beam::text {

struct AddedToken {
  TokenId id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched against the normalized text (else the raw text)
};

// Which text a split runs on: raw input (tokens with normalized=false) or the normalizer's
// output (tokens with normalized=true).
enum class AddedTokenStage { kRaw, kNormalized };

// A piece of the split: an added token (token >= 0) or text between tokens (token == -1).
struct AddedSegment {
  uint32_t begin;
  uint32_t end;
  TokenId token;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;
  // Normalized contents of tokens with normalized=true come from `normalizer`.
  static Expected<AddedVocabulary> create(std::vector<AddedToken> tokens, const Normalizer& normalizer);

  bool empty(AddedTokenStage stage) const { return matcher(stage).num_tokens == 0; }
  // Splits valid UTF-8 `text` into added tokens and the text between them (empty text pieces
  // are dropped). With allow_special=false a special token's match is skipped and stays text.
  void split(std::string_view text, AddedTokenStage stage, bool allow_special,
             std::vector<AddedSegment>& out) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Candidate {
    std::string content;  // as matched (normalized for the normalized stage)
    size_t token_index;
  };
  struct Matcher {
    // Candidates by first byte, longest first.
    std::array<std::vector<Candidate>, 256> by_first_byte;
    std::array<bool, 256> is_first_byte{};
    int single_first_byte = -1;  // the only first byte when all tokens share one (memchr scan)
    size_t num_tokens = 0;
  };
  const Matcher& matcher(AddedTokenStage stage) const {
    return stage == AddedTokenStage::kRaw ? raw_ : normalized_;
  }
  // The candidate with the longest content that starts at `pos`, or nullptr.
  const Candidate* longest_at(const Matcher& m, std::string_view text, size_t pos) const;
  // The first position >= pos where some token could start (text.size() if none).
  static size_t next_candidate(const Matcher& m, std::string_view text, size_t pos);

  std::vector<AddedToken> tokens_;
  Matcher raw_;
  Matcher normalized_;
};

// Unicode White_Space (what Rust's char::is_whitespace and Oniguruma's \s accept).
bool is_unicode_whitespace(char32_t cp);

}  // namespace beam::text
