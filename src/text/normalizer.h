// The tokenizer.json normalizer: a sequence of Unicode normalization forms (NFC, NFD, NFKC, NFKD)
// applied with libutf8proc; an empty sequence (normalizer null) is the identity.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace beam::text {

enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };

class Normalizer {
 public:
  Normalizer() = default;
  explicit Normalizer(std::vector<NormalizationForm> forms) : forms_(std::move(forms)) {}

  bool is_identity() const { return forms_.empty(); }
  // Normalizes valid UTF-8 `text`. Returns a view of `text` itself when normalization cannot
  // change it, else a view of `scratch` which receives the result.
  std::string_view normalize(std::string_view text, std::string& scratch) const;

 private:
  std::vector<NormalizationForm> forms_;
};

}  // namespace beam::text
