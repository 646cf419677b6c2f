// Drafts from other requests' text (SGLang's NGRAM corpus): the token sequences of finished
// requests, prompt and output, kept up to a token budget; a decode whose own text and siblings'
// match its suffix shorter than here drafts what followed the suffix here.
// Drafts are only ever verified, so the corpus changes how fast a request finishes, never what it
// produces.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <vector>

#include "runtime/speculative/ngram_proposer.h"

namespace beam {

class NgramCorpus {
 public:
  // Keeps the last `capacity` tokens added (>= 1) and indexes their n-grams of min_match..
  // max_match tokens (config's), each length in a lossy table of its own (the most recent
  // occurrence of a hash wins). Memory: 4 bytes per token of the ring and 8 per table slot,
  // 2 * capacity slots a length (a power of two), at most kMaxSlots in all; pages are touched
  // only as tokens arrive.
  NgramCorpus(int64_t capacity, const Speculation& config);

  // Appends one request's tokens as a document: no match spans two documents. A document longer
  // than the capacity keeps its last `capacity` tokens.
  void add(std::span<const int32_t> tokens);

  // Writes up to out.size() drafts for the tokens after `tokens`: the tokens that followed the
  // most recent indexed occurrence of its longest suffix of min_match..max_match tokens, longer
  // than `longer_than` tokens (within one document, still in the ring); returns how many (0: no
  // such occurrence).
  int64_t propose(std::span<const int32_t> tokens, std::span<int32_t> out,
                  int64_t longer_than = 0) const;

  int64_t size() const { return static_cast<int64_t>(std::min<uint64_t>(end_, capacity_)); }

  static constexpr int64_t kMaxSlots = int64_t{1} << 24;  // 128 MB of table

 private:
  struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
  };
  // Token at absolute position pos (end_ - capacity_ <= pos < end_), or kSeparator.
  int32_t at(uint64_t pos) const { return ring_[pos % static_cast<uint64_t>(capacity_)]; }
  void push(int32_t token);
  // Table index of the n-gram gram[0, n) (its length's slots).
  uint64_t slot(const int32_t* gram, int64_t n) const;

  static constexpr int32_t kSeparator = -1;

  int64_t capacity_, min_match_, max_match_;
  uint64_t slots_per_length_mask_;  // slots a length - 1 (a power of two)
  std::unique_ptr<int32_t[], FreeDeleter> ring_;
  // Per length n (index n - min_match): slots of the absolute end (exclusive) of an n-gram with a
  // token after it in its document (0: empty); zero pages from calloc, touched only as n-grams
  // arrive.
  std::unique_ptr<uint64_t[], FreeDeleter> table_;
  uint64_t end_ = 0;  // absolute position after the last token added
  // The current document's last max_match tokens (the n-grams ending at the next token).
  std::vector<int32_t> recent_;
};

}  // namespace beam
