// CompiledCache (GrammarCache): one compiled grammar and mask memo per text, least recently used
// out first; refused texts remembered with their error.
#include "runtime/structured/compiled_cache.h"

#include <gtest/gtest.h>

namespace beam {
namespace {

std::shared_ptr<const EbnfGrammar> compiled(const std::string& text) {
  auto g = EbnfGrammar::compile(text);
  EXPECT_TRUE(g.ok()) << text;
  return g.ok() ? *g : nullptr;
}

TEST(GrammarCache, SharesByTextAndDropsTheLeastRecentlyUsed) {
  GrammarCache cache(2);
  const std::string a = "root ::= \"a\"", b = "root ::= \"b\"", c = "root ::= \"c\"";
  const GrammarCache::Entry a1 = cache.share(a, compiled(a));
  const GrammarCache::Entry a2 = cache.share(a, compiled(a));  // a second compile: not kept
  EXPECT_EQ(a1.compiled, a2.compiled);
  EXPECT_EQ(a1.memo, a2.memo);
  const GrammarCache::Entry b1 = cache.share(b, compiled(b));
  EXPECT_NE(b1.memo, a1.memo);
  cache.share(a, compiled(a));  // a is now the most recent: c evicts b
  cache.share(c, compiled(c));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.share(a, compiled(a)).memo, a1.memo);
  EXPECT_NE(cache.share(b, compiled(b)).memo, b1.memo);  // b was dropped: a new memo

  GrammarCache none(0);  // capacity 0: nothing kept
  EXPECT_NE(none.share(a, compiled(a)).memo, none.share(a, compiled(a)).memo);
  EXPECT_EQ(none.size(), 0u);
}

// Texts that failed to compile are remembered with their error (the newest kMaxRefusals), apart
// from the compiled entries.
TEST(GrammarCache, RemembersRefusedTexts) {
  GrammarCache cache(2);
  EXPECT_FALSE(cache.refusal("root ::= x").has_value());
  cache.refuse("root ::= x", "rule 'x' is not defined");
  cache.refuse("root ::= x", "another message");  // refused already: the first stays
  EXPECT_EQ(cache.refusal("root ::= x"), "rule 'x' is not defined");
  EXPECT_FALSE(cache.refusal("root ::= y").has_value());
  EXPECT_EQ(cache.size(), 0u);
  for (size_t i = 0; i < GrammarCache::kMaxRefusals; ++i)
    cache.refuse("root ::= r" + std::to_string(i), "refused " + std::to_string(i));
  EXPECT_FALSE(cache.refusal("root ::= x").has_value());  // the oldest went
  EXPECT_EQ(cache.refusal("root ::= r0"), "refused 0");
  EXPECT_EQ(cache.refusal("root ::= r63"), "refused 63");
}

}  // namespace
}  // namespace beam
