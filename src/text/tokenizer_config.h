// tokenizer_config.json: special-token names (bos/eos/pad/unk), chat templates, decode flags,
// and the added_tokens_decoder / additional_special_tokens that complete tokenizer.json's list.
#pragma once

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "text/added_vocabulary.h"
#include "text/tokenizer.h"

namespace beam::text {

// Parses `config_json` (empty = no file). Adds tokens of added_tokens_decoder that `added` lacks,
// marks additional_special_tokens as special, and resolves special-token names to ids through
// `added` first, then `vocab_id` (a BPE vocabulary spelling → id lookup).
Expected<TokenizerConfig> parse_tokenizer_config(
    std::string_view config_json, std::vector<AddedToken>& added,
    const std::function<std::optional<TokenId>(std::string_view)>& vocab_id);

}  // namespace beam::text
