// Added-token matching (see added_vocabulary.h).
#include "text/added_vocabulary.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>

#include "text/utf8.h"

namespace beam::text {

namespace {

// Rust regex \w: Alphabetic, marks, decimal digits, connector punctuation, join controls.
// Alphabetic is approximated by letters, letter numbers and the So letters of Other_Alphabetic.
bool is_word_char(char32_t cp) {
  if (cp == 0x200C || cp == 0x200D) return true;
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
  }
}

// Start of the UTF-8 character that ends at byte `end` (exclusive) of valid text.
size_t previous_char_start(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<uint8_t>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

char32_t char_before(std::string_view text, size_t end) {
  size_t start = previous_char_start(text, end);
  return next_code_point(text, start);
}

char32_t char_at(std::string_view text, size_t pos) { return next_code_point(text, pos); }

}  // namespace

bool is_unicode_whitespace(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

Expected<AddedVocabulary> AddedVocabulary::create(std::vector<AddedToken> tokens,
                                                  const Normalizer& normalizer) {
  AddedVocabulary v;
  v.tokens_ = std::move(tokens);
  std::string scratch;
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const AddedToken& t = v.tokens_[i];
    if (t.content.empty()) continue;  // never matches, as in Hugging Face
    if (!is_valid_utf8(t.content)) {
      return make_error("added token " + std::to_string(t.id) + " is not valid UTF-8");
    }
    Matcher& m = t.normalized ? v.normalized_ : v.raw_;
    std::string content =
        t.normalized ? std::string(normalizer.normalize(t.content, scratch)) : t.content;
    if (content.empty()) continue;
    m.by_first_byte[static_cast<uint8_t>(content[0])].push_back({std::move(content), i});
    ++m.num_tokens;
  }
  for (Matcher* m : {&v.raw_, &v.normalized_}) {
    int num_first_bytes = 0;
    for (int b = 0; b < 256; ++b) {
      auto& list = m->by_first_byte[b];
      if (list.empty()) continue;
      m->is_first_byte[b] = true;
      m->single_first_byte = num_first_bytes++ == 0 ? b : -1;
      std::stable_sort(list.begin(), list.end(), [](const Candidate& a, const Candidate& b) {
        return a.content.size() > b.content.size();
      });
    }
  }
  return v;
}

const AddedVocabulary::Candidate* AddedVocabulary::longest_at(const Matcher& m, std::string_view text,
                                                              size_t pos) const {
  for (const Candidate& c : m.by_first_byte[static_cast<uint8_t>(text[pos])]) {
    if (text.compare(pos, c.content.size(), c.content) == 0) return &c;
  }
  return nullptr;
}

size_t AddedVocabulary::next_candidate(const Matcher& m, std::string_view text, size_t pos) {
  if (m.single_first_byte >= 0) {
    const void* hit = std::memchr(text.data() + pos, m.single_first_byte, text.size() - pos);
    return hit ? static_cast<size_t>(static_cast<const char*>(hit) - text.data()) : text.size();
  }
  while (pos < text.size() && !m.is_first_byte[static_cast<uint8_t>(text[pos])]) ++pos;
  return pos;
}

void AddedVocabulary::split(std::string_view text, AddedTokenStage stage, bool allow_special,
                            std::vector<AddedSegment>& out) const {
  out.clear();
  const Matcher& m = matcher(stage);
  size_t start_offset = 0;  // end of the last emitted token (text before it is emitted)
  size_t pos = 0;
  auto push_text = [&](size_t b, size_t e) {
    if (e > b) out.push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(e), -1});
  };
  while (m.num_tokens > 0 && (pos = next_candidate(m, text, pos)) < text.size()) {
    const Candidate* c = longest_at(m, text, pos);
    if (!c) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[c->token_index];
    size_t start = pos, stop = pos + c->content.size();
    pos = stop;  // the search resumes after a match even when the match is discarded
    if (token.special && !allow_special) continue;
    if (token.single_word) {
      const bool word_before = start > 0 && is_word_char(char_before(text, start));
      const bool word_after = stop < text.size() && is_word_char(char_at(text, stop));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t s = start;
      while (s > start_offset && is_unicode_whitespace(char_before(text, s))) s = previous_char_start(text, s);
      start = s;
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!is_unicode_whitespace(next_code_point(text, next))) break;
        stop = next;
      }
      pos = stop;
    }
    push_text(start_offset, start);
    out.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(stop), token.id});
    start_offset = stop;
  }
  push_text(start_offset, text.size());
}

}  // namespace beam::text
