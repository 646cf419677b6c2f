// clean_up_tokenization_spaces: the space removals transformers (and the JS port) apply to
// decoded text when tokenizer_config.json asks for it (" ." → ".", " n't" → "n't", ...).
#pragma once

#include <string>
#include <string_view>

namespace beam::text {

// Applies the ten replacements in transformers' order, each over the whole text.
std::string clean_up_tokenization(std::string_view text);

// Every replaced pattern starts with a space and is at most this many bytes long; text can be
// cleaned in pieces cut where the last kCleanupReach - 1 bytes before the cut hold no space.
inline constexpr size_t kCleanupReach = 4;

}  // namespace beam::text
