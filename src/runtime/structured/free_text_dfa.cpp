// free_text_dfa: a trie of the strings with Aho-Corasick failure links (each node knows which
// strings end at it), crossed with a UTF-8 validator; the reachable pairs become ByteDfa states.
#include "runtime/structured/free_text_dfa.h"

#include <array>
#include <cstdint>

namespace beam {
namespace {

// What ends at an Aho-Corasick node (its own string, or one of its suffixes).
enum : uint8_t { kEndsStop = 1, kEndsBarrier = 2, kEndsExcluded = 4 };

struct AhoCorasick {
  std::vector<std::array<int32_t, 256>> next;  // the goto function, failure links folded in
  std::vector<uint8_t> ends;                   // kEnds* bits

  explicit AhoCorasick(const FreeTextStrings& s) {
    next.push_back({});
    next[0].fill(-1);
    ends.push_back(0);
    for (const std::string& t : s.stops) add(t, kEndsStop);
    for (const std::string& t : s.barriers) add(t, kEndsBarrier);
    for (const std::string& t : s.excluded) add(t, kEndsExcluded);
    // Breadth first: a node's failure target is shallower, so its transitions are final.
    std::vector<int32_t> fail(next.size(), 0), queue;
    for (int b = 0; b < 256; ++b) {
      int32_t& to = next[0][static_cast<size_t>(b)];
      if (to < 0)
        to = 0;
      else
        queue.push_back(to);
    }
    for (size_t at = 0; at < queue.size(); ++at) {
      const int32_t u = queue[at];
      ends[static_cast<size_t>(u)] |= ends[static_cast<size_t>(fail[static_cast<size_t>(u)])];
      for (int b = 0; b < 256; ++b) {
        int32_t& to = next[static_cast<size_t>(u)][static_cast<size_t>(b)];
        const int32_t via_fail = next[static_cast<size_t>(fail[static_cast<size_t>(u)])][b];
        if (to < 0) {
          to = via_fail;
        } else {
          fail[static_cast<size_t>(to)] = via_fail;
          queue.push_back(to);
        }
      }
    }
  }

  void add(const std::string& text, uint8_t kind) {
    int32_t at = 0;
    for (char c : text) {
      int32_t& to = next[static_cast<size_t>(at)][static_cast<uint8_t>(c)];
      if (to < 0) {
        to = static_cast<int32_t>(next.size());
        next.push_back({});
        next.back().fill(-1);
        ends.push_back(0);
      }
      at = next[static_cast<size_t>(at)][static_cast<uint8_t>(c)];
    }
    ends[static_cast<size_t>(at)] |= kind;
  }
};

// UTF-8 validation (RFC 3629: no overlong forms, surrogates or code points past U+10FFFF).
// Phase 0: at a character boundary; 1-7: inside a sequence. The phase after byte b, or -1.
constexpr int kUtf8Phases = 8;
int utf8_next(int phase, uint8_t b) {
  auto in = [&](uint8_t lo, uint8_t hi) { return b >= lo && b <= hi; };
  switch (phase) {
    case 0:
      if (b < 0x80) return 0;
      if (in(0xC2, 0xDF)) return 1;
      if (b == 0xE0) return 3;
      if (b == 0xED) return 4;
      if (in(0xE1, 0xEF)) return 2;
      if (b == 0xF0) return 6;
      if (in(0xF1, 0xF3)) return 5;
      if (b == 0xF4) return 7;
      return -1;
    case 1:
      return in(0x80, 0xBF) ? 0 : -1;
    case 2:
      return in(0x80, 0xBF) ? 1 : -1;
    case 3:
      return in(0xA0, 0xBF) ? 1 : -1;
    case 4:
      return in(0x80, 0x9F) ? 1 : -1;
    case 5:
      return in(0x80, 0xBF) ? 2 : -1;
    case 6:
      return in(0x90, 0xBF) ? 2 : -1;
    default:
      return in(0x80, 0x8F) ? 2 : -1;
  }
}

}  // namespace

Expected<std::shared_ptr<const ByteDfa>> free_text_dfa(const FreeTextStrings& strings) {
  const AhoCorasick ac(strings);
  const bool stopping = !strings.stops.empty();
  // States: pairs (node, phase) numbered as found; with stops, state 0's twin `done` (the stop
  // just completed; nothing may follow) is the only accepting one.
  std::vector<int32_t> id(ac.next.size() * kUtf8Phases, -1);
  std::vector<std::pair<int32_t, int>> pairs = {{0, 0}};
  id[0] = 0;
  std::vector<int32_t> table;
  std::vector<uint8_t> accepting;
  int32_t done = -1;
  if (stopping) {
    done = 1;
    pairs.emplace_back(-1, 0);
  }
  for (size_t s = 0; s < pairs.size(); ++s) {
    if (pairs.size() > static_cast<size_t>(kMaxFreeTextStates))
      return make_error("the free text's strings are too many or too long (more than " +
                        std::to_string(kMaxFreeTextStates) + " automaton states)");
    table.resize((s + 1) * 256, ByteDfa::kDead);
    const auto [node, phase] = pairs[s];
    if (node < 0) {  // done
      accepting.push_back(1);
      continue;
    }
    accepting.push_back(!stopping && phase == 0 ? 1 : 0);
    for (int b = 0; b < 256; ++b) {
      const int p = utf8_next(phase, static_cast<uint8_t>(b));
      if (p < 0) continue;
      const int32_t to = ac.next[static_cast<size_t>(node)][static_cast<size_t>(b)];
      const uint8_t ends = ac.ends[static_cast<size_t>(to)];
      int32_t& cell = table[s * 256 + static_cast<size_t>(b)];
      if (ends & kEndsExcluded) continue;
      if (stopping && (ends & kEndsStop)) {
        cell = done;
        continue;
      }
      if (ends & (kEndsBarrier | kEndsStop)) continue;
      int32_t& slot = id[static_cast<size_t>(to) * kUtf8Phases + static_cast<size_t>(p)];
      if (slot < 0) {
        slot = static_cast<int32_t>(pairs.size());
        pairs.emplace_back(to, p);
      }
      cell = slot;
    }
  }
  auto dfa = ByteDfa::from_table(table, accepting);
  if (!dfa.ok()) return make_error("no text can end with the end string without an excluded one");
  return dfa;
}

}  // namespace beam
