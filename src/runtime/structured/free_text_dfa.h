// The free text of structural tags (structural_tag.h) as one automaton over UTF-8 bytes: text
// scanned left to right for the strings that end it or may not appear in it (an Aho-Corasick
// automaton crossed with a UTF-8 validator).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/structured/byte_dfa.h"

namespace beam {

// Most states of one free-text automaton (about the bytes of its strings, times a few).
inline constexpr int32_t kMaxFreeTextStates = 16384;

// The strings a free text is scanned for (each non-empty, valid UTF-8).
struct FreeTextStrings {
  std::vector<std::string> stops;  // one of them ends the text (none: it runs to the output's end)
  std::vector<std::string> barriers;  // may not end before the text's last byte
  std::vector<std::string> excluded;  // may not end anywhere
};

// Valid UTF-8 text. Without stops: any text in which no barrier or excluded string occurs. With
// stops: text whose first completed string is a stop at its very end (a barrier may end there
// too, an excluded string not); the stop is part of the text. An error when no text qualifies
// (an excluded string inside every stop) or past kMaxFreeTextStates.
Expected<std::shared_ptr<const ByteDfa>> free_text_dfa(const FreeTextStrings& strings);

}  // namespace beam
