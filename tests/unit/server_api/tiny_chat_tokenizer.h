// The tiny-chat fixture tokenizer (tests/server/fixtures/tiny-chat), loaded once; aborts the test
// binary (after a failure naming why) when it cannot be loaded.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "text/tokenizer.h"

namespace beam::server {

inline const text::Tokenizer& tiny_chat_tokenizer() {
  static const text::Tokenizer tok = [] {
    auto t = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) +
                                   "/tests/server/fixtures/tiny-chat");
    if (!t.ok()) {
      ADD_FAILURE() << t.error().message;
      std::abort();
    }
    return std::move(t).value();
  }();
  return tok;
}

}  // namespace beam::server
