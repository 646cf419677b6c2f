// Builds a Tokenizer from the contents of tokenizer.json and tokenizer_config.json; every
// unsupported component or malformed field is an error naming the file, component and type.
#pragma once

#include <string_view>

#include "core/status.h"
#include "text/tokenizer.h"

namespace beam::text {

class TokenizerBuilder {
 public:
  static Expected<Tokenizer> build(std::string_view tokenizer_json, std::string_view config_json);
};

}  // namespace beam::text
