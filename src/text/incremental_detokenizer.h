// Streaming detokenization for one generated sequence: token ids in (one or several per step,
// as speculative decoding emits blocks), text deltas out. A delta never ends inside a UTF-8
// character, and the concatenation of all deltas plus finish() equals Tokenizer::decode of all
// ids. One owner thread (the request's); the Tokenizer must outlive it.
#pragma once

#include <span>
#include <string>

#include "core/status.h"
#include "text/token_id.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace beam::text {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special);

  // Consumes `ids` and returns the text that became final. Bytes of an incomplete character are
  // held back (and, with clean_up_tokenization_spaces, the last few bytes after a space, which a
  // later token could still change). Fails on an id with no token; the state is then unchanged.
  Expected<std::string> step(std::span<const TokenId> ids);
  // Ends the sequence: returns everything still held (an incomplete character becomes U+FFFD).
  std::string finish();

 private:
  // Moves the part of pending_ that later tokens cannot change into the returned delta.
  std::string release(bool final);

  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool cleanup_;
  Utf8Decoder decoder_;
  std::string pending_;    // complete characters not returned yet (uncleaned)
  std::string emitted_tail_;  // the last bytes of returned raw text, for the cleanup cut rule
};

}  // namespace beam::text
