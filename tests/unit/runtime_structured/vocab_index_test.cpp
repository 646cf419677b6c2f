// VocabIndex's masks (trie walks and the string caches) equal the token-by-token answer at every
// position of documents written with a synthetic vocabulary; a regex's memoized masks
// (RegexMaskCache) equal its walks.
#include <gtest/gtest.h>

#include <bit>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "runtime/structured/output_constraint.h"
#include "runtime/structured/structural_tag.h"
#include "structured_test_util.h"

namespace beam {
namespace {

using testing::brute_force_mask;
using testing::grammar_of;

// Every byte 0x09-0x7e plus pieces of JSON text, ids in insertion order; a few ids stay unused
// (as added tokens would) so masks must leave them off.
std::shared_ptr<const VocabIndex> synthetic_vocab(const std::vector<std::string>& corpus) {
  std::set<std::string> texts;
  for (int c = 0x09; c <= 0x7e; ++c) texts.insert(std::string(1, static_cast<char>(c)));
  for (const char* piece :
       {"{\"",      "\":",      "\",",      "\"}",   "\"]",      "}]",          "},{\"", "\": \"",
        "\n  ",     "\n    \"", "true",     "false", "null",     "12",          ".5",    "e-3",
        "\\\"",     "\\\\",     "\\u00",    "\\n",   "\xc3\xa9", "\xc3",        "\xa9",  "name",
        "\"name\"", " \"",      "\"\n",     "ag",    "age\":",   "\"tags\": [", "red",   "\"red\"",
        "[\"",      "\"\"",     "\"x\",\"", "\": 1", ",\n"})
    texts.insert(piece);
  std::mt19937 rng(3);
  for (const std::string& doc : corpus) {
    for (int i = 0; i < 40 && !doc.empty(); ++i) {
      const size_t at = rng() % doc.size();
      texts.insert(doc.substr(at, 1 + rng() % 6));
    }
  }
  std::vector<VocabToken> tokens;
  int32_t id = 0;
  for (const std::string& t : texts) {
    if (id % 97 == 5) ++id;  // a gap, as an added token's id
    tokens.push_back({id++, t});
  }
  return std::make_shared<VocabIndex>(id + 3, std::move(tokens));
}

// Greedy longest-match tokenization of text with the vocabulary (every byte is a token).
std::vector<int32_t> tokenize(const VocabIndex& vocab, std::string_view text) {
  std::vector<int32_t> ids;
  for (size_t at = 0; at < text.size();) {
    int32_t best = -1;
    size_t best_len = 0;
    for (int32_t id = 0; id < vocab.vocab_size(); ++id) {
      std::string_view b = vocab.bytes(id);
      if (!b.empty() && b.size() > best_len && text.substr(at, b.size()) == b) {
        best = id;
        best_len = b.size();
      }
    }
    EXPECT_GE(best, 0);
    ids.push_back(best);
    at += best_len;
  }
  return ids;
}

void expect_masks_exact(const std::string& schema, const std::vector<std::string>& docs) {
  const auto grammar = schema.empty() ? JsonGrammar::any_object() : grammar_of(schema);
  const JsonMatcher m(grammar);
  const auto vocab = synthetic_vocab(docs);
  MaskScratch scratch;
  PatternMaskCache patterns;  // shared by the documents: later ones hit earlier entries
  for (const std::string& doc : docs) {
    MatchState state = m.initial(), tmp;
    for (int32_t id : tokenize(*vocab, doc)) {
      std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()), 0);
      vocab->add_allowed(m, state, bits, scratch);
      ASSERT_EQ(bits, brute_force_mask(m, state, *vocab)) << schema << " in " << doc;
      for (int pass = 0; pass < 2; ++pass) {  // the memo's miss, then its hit
        std::vector<uint32_t> memo(bits.size(), 0);
        vocab->add_allowed(m, state, memo, scratch, &patterns);
        ASSERT_EQ(memo, bits) << schema << " in " << doc << " (memoized, pass " << pass << ")";
      }
      ASSERT_TRUE(mask_bit(bits, id)) << doc;
      ASSERT_TRUE(m.advance_bytes(state, vocab->bytes(id), tmp)) << doc;
    }
    EXPECT_TRUE(m.can_end(state)) << doc;
  }
}

TEST(VocabIndex, MasksOfAnyObjectEqualTokenByTokenChecks) {
  expect_masks_exact("", {R"({"name": "caf\u00e9 \"x\" \\ é", "n": [1, 2.5e-3, true, null]})",
                          "{\n  \"a\": {\"b\": []},\n  \"c\": \"\"\n}", R"({})"});
}

TEST(VocabIndex, MasksOfASchemaEqualTokenByTokenChecks) {
  expect_masks_exact(
      R"({"type":"object","properties":{"name":{"type":"string"},
          "age":{"type":"integer","minimum":1,"maximum":120},
          "color":{"enum":["red","green"]},
          "tags":{"type":"array","items":{"type":"string","maxLength":4}},
          "extra":{"anyOf":[{"type":"number","minimum":-1,"maximum":1},{"type":"null"}]},
          "code":{"type":"string","minLength":2,"maxLength":3}},"required":["name","tags"]})",
      {R"({"name": "Ann \"A\"", "age": 12, "color": "red", "tags": ["x", "é"], "extra": null})",
       R"({"name":"","tags":[],"extra":-0.5,"code":"ab"})",
       R"({"name":"n","tags":["ag","\n"],"code":"\u00e9é\""})"});
}

TEST(VocabIndex, MasksOfPatternedStringsEqualTokenByTokenChecks) {
  expect_masks_exact(
      R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[a-z]{2}-\\d+$"},
          "note":{"type":"string","pattern":"é|\\n","minLength":2,"maxLength":6},
          "q":{"type":"string","pattern":"^\"$"},
          "tag":{"type":"string","pattern":"[a-z]\\d|\\\\"}},"required":["id"]})",
      {R"({"id":"ab-12","note":"xé","tag":"x1"})", R"({"id": "zz-0", "note": "a\nb", "q": "\""})",
       R"({"id":"ag-120","note":"\nrede","tag":"é \"a2\" \\"})", R"({"id":"ab-1","tag":"\\"})"});
}

// A whole-output regex (vLLM's guided_regex / guided_choice): masks equal the token-by-token
// answer at every position of matching texts, end tokens only on a match, a token off the mask
// breaks the state.
TEST(ConstraintState, RegexOutputsMaskTokenByToken) {
  const auto vocab = synthetic_vocab({"yes", "no", "maybe"});
  auto dfa = ByteDfa::from_full_match("(yes|no|maybe)( [0-9]{1,3})?");
  ASSERT_TRUE(dfa.ok()) << dfa.error().message;
  const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 1);
  auto c = std::make_shared<OutputConstraint>();
  c->regex = *dfa;
  c->vocab = vocab;
  for (const char* text : {"yes", "maybe 12", "no 999"}) {
    ConstraintState state(c);
    std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
    MaskScratch scratch;
    std::string written;
    for (int32_t id : tokenize(*vocab, text)) {
      ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, scratch));
      for (int32_t t = 0; t < vocab->vocab_size(); ++t) {
        const std::string_view b = vocab->bytes(t);
        if (b.empty()) continue;
        const int32_t s = (*dfa)->walk((*dfa)->start(), written + std::string(b));
        ASSERT_EQ(mask_bit(bits, t), s != ByteDfa::kDead) << text << " after '" << written << "'";
      }
      EXPECT_FALSE(mask_bit(bits, eos) && written.empty());
      ASSERT_TRUE(state.accept(id, false)) << text;
      written += vocab->bytes(id);
    }
    ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, scratch));
    EXPECT_TRUE(mask_bit(bits, eos)) << text;
    EXPECT_TRUE(state.accept(eos, true));
  }
  ConstraintState broken(c);
  EXPECT_FALSE(broken.accept(tokenize(*vocab, "x")[0], false));
  EXPECT_FALSE(broken.accept(eos, true));
}

// A regex's masks are memoized by DFA state (RegexMaskCache, shared by the constraint's
// sequences): each state met walks once, later sequences add nothing, and past the memo's
// kMaxEntries states the masks still equal a direct walk.
TEST(ConstraintState, RegexMasksAreMemoizedByStateAndExactPastTheMemo) {
  const auto vocab = synthetic_vocab({});
  auto dfa = ByteDfa::from_full_match("a{300}b?");
  ASSERT_TRUE(dfa.ok()) << dfa.error().message;
  const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 1);
  auto c = std::make_shared<OutputConstraint>();
  c->regex = *dfa;
  c->vocab = vocab;
  const int32_t a = tokenize(*vocab, "a")[0];
  for (int sequence = 0; sequence < 2; ++sequence) {
    ConstraintState state(c);
    std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
    MaskScratch scratch;
    int32_t dfa_state = (*dfa)->start();
    for (int i = 0; i < 300; ++i) {
      ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, scratch));
      std::vector<uint32_t> walked(bits.size(), 0u);
      vocab->add_allowed(**dfa, dfa_state, walked);
      ASSERT_EQ(bits, walked) << "sequence " << sequence << " after " << i << " a";
      EXPECT_EQ(c->regex_masks->size(),
                std::min<size_t>(RegexMaskCache::kMaxEntries, sequence == 0 ? i + 1 : 300));
      ASSERT_TRUE(state.accept(a, false));
      dfa_state = (*dfa)->next(dfa_state, 'a');
    }
    ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, scratch));
    EXPECT_TRUE(mask_bit(bits, eos));
    EXPECT_TRUE(mask_bit(bits, tokenize(*vocab, "b")[0]));
    EXPECT_FALSE(mask_bit(bits, a));
  }
}

// RegexMaskCache's entries, as mask words (a state allowing many tokens) or as token ids (few),
// OR the walk's mask into the caller's bits, on a miss and on a hit alike.
TEST(RegexMaskCache, ManyOrFewTokensGiveTheWalksMask) {
  std::vector<std::string> corpus;
  for (int i = 0; i < 30; ++i)
    corpus.push_back("the quick brown fox " + std::to_string(i * 7919) +
                     " jumps over the lazy dog");
  const auto vocab = synthetic_vocab(corpus);
  const size_t words = static_cast<size_t>(allowed_mask_words(vocab->vocab_size()));
  for (const char* pattern : {"[ -~]*", "(quick)|(brown)|(fox [0-9]+)"}) {
    auto dfa = ByteDfa::from_full_match(pattern);
    ASSERT_TRUE(dfa.ok()) << dfa.error().message;
    RegexMaskCache memo;
    for (const char* prefix : {"", "qu", "fox 1", "the quick"}) {
      const int32_t state = (*dfa)->walk((*dfa)->start(), prefix);
      if (state == ByteDfa::kDead) continue;
      std::vector<uint32_t> want(words, 0u);
      vocab->add_allowed(**dfa, state, want);
      size_t allowed = 0;
      for (uint32_t w : want) allowed += static_cast<size_t>(std::popcount(w));
      if (std::string_view(pattern) == "[ -~]*") {
        EXPECT_GT(allowed, RegexMaskCache::kMaxListedTokens);  // the words form
      }
      const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 1);
      set_mask_bit(want, eos);  // a bit the caller set stays set
      for (int call = 0; call < 2; ++call) {
        std::vector<uint32_t> bits(words, 0u);
        set_mask_bit(bits, eos);
        memo.add_allowed(*vocab, **dfa, state, bits);
        EXPECT_EQ(bits, want) << pattern << " after '" << prefix << "', call " << call;
      }
    }
  }
}

TEST(ConstraintState, EndTokensOnlyOnceTheJsonIsComplete) {
  const auto vocab = synthetic_vocab({});
  auto constraint = std::make_shared<OutputConstraint>(
      OutputConstraint{.grammar = grammar_of(R"({"type":"integer"})"), .vocab = vocab});
  ConstraintState state(constraint);
  const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 1);
  const std::vector<int32_t> ends = {eos};
  std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
  MaskScratch scratch;
  ASSERT_TRUE(state.active());
  ASSERT_TRUE(state.fill_allowed(bits, ends, scratch));
  EXPECT_FALSE(mask_bit(bits, eos));
  const std::vector<int32_t> one = tokenize(*vocab, "1");
  ASSERT_TRUE(state.accept(one[0], false));
  ASSERT_TRUE(state.fill_allowed(bits, ends, scratch));
  EXPECT_TRUE(mask_bit(bits, eos));
  EXPECT_TRUE(mask_bit(bits, one[0]));  // 11 is an integer too
  EXPECT_FALSE(mask_bit(bits, tokenize(*vocab, "a")[0]));
  EXPECT_FALSE(state.accept(tokenize(*vocab, "a")[0], false));
  EXPECT_FALSE(state.fill_allowed(bits, ends, scratch));  // dead: nothing is allowed
}

TEST(ConstraintState, ReasoningBeforeTheJson) {
  const auto vocab = synthetic_vocab({});
  const int32_t open = static_cast<int32_t>(vocab->vocab_size() - 3);
  const int32_t close = static_cast<int32_t>(vocab->vocab_size() - 2);
  const int32_t a = tokenize(*vocab, "a")[0], brace = tokenize(*vocab, "{")[0];
  std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
  MaskScratch scratch;
  auto constraint = [&](bool starts_in_reasoning) {
    return std::make_shared<OutputConstraint>(
        OutputConstraint{.grammar = JsonGrammar::any_object(),
                         .vocab = vocab,
                         .reasoning_open = open,
                         .json_after = {close},
                         .starts_in_reasoning = starts_in_reasoning});
  };
  // The model may open its reasoning or start the JSON; inside the reasoning it is free.
  ConstraintState thinks(constraint(false));
  ASSERT_TRUE(thinks.active());
  ASSERT_TRUE(thinks.fill_allowed(bits, {}, scratch));
  EXPECT_TRUE(mask_bit(bits, open));
  EXPECT_TRUE(mask_bit(bits, brace));
  EXPECT_FALSE(mask_bit(bits, a));
  EXPECT_FALSE(mask_bit(bits, close));
  EXPECT_TRUE(thinks.accept(open, false));
  EXPECT_FALSE(thinks.active());
  EXPECT_TRUE(thinks.accept(a, false));
  EXPECT_TRUE(thinks.accept(close, false));
  ASSERT_TRUE(thinks.active());
  ASSERT_TRUE(thinks.fill_allowed(bits, {}, scratch));
  EXPECT_FALSE(mask_bit(bits, open));  // one reasoning block only
  EXPECT_TRUE(mask_bit(bits, brace));
  // Starting with JSON closes the choice.
  ConstraintState direct(constraint(false));
  EXPECT_TRUE(direct.accept(brace, false));
  ASSERT_TRUE(direct.fill_allowed(bits, {}, scratch));
  EXPECT_FALSE(mask_bit(bits, open));
  EXPECT_FALSE(direct.accept(open, false));
  // A prompt that left the reasoning open: free until the close token.
  ConstraintState open_prompt(constraint(true));
  EXPECT_FALSE(open_prompt.active());
  EXPECT_TRUE(open_prompt.accept(a, false));
  EXPECT_TRUE(open_prompt.accept(close, false));
  EXPECT_TRUE(open_prompt.active());
  EXPECT_FALSE(open_prompt.accept(a, false));
}

// A channel template's answer header (several tokens, as `<|channel|>final<|message|>`): free text
// until the whole header has been written, the JSON after it; a partial header or one broken by
// another token keeps the output free.
TEST(ConstraintState, JsonAfterAMultiTokenHeader) {
  const auto vocab = synthetic_vocab({});
  const int32_t channel = static_cast<int32_t>(vocab->vocab_size() - 3);
  const int32_t message = static_cast<int32_t>(vocab->vocab_size() - 2);
  const int32_t final_word = tokenize(*vocab, "final")[0], a = tokenize(*vocab, "a")[0];
  const int32_t brace = tokenize(*vocab, "{")[0];
  auto c = std::make_shared<OutputConstraint>(
      OutputConstraint{.grammar = JsonGrammar::any_object(),
                       .vocab = vocab,
                       .json_after = {channel, final_word, message},
                       .starts_in_reasoning = true});
  ConstraintState s(c);
  for (int32_t t : {channel, a, message, a, channel, final_word, a, final_word, message}) {
    EXPECT_FALSE(s.active());
    EXPECT_TRUE(s.accept(t, false));
  }
  EXPECT_FALSE(s.active());  // "final" then <|message|> without <|channel|> right before it
  for (int32_t t : {channel, channel, final_word}) EXPECT_TRUE(s.accept(t, false));
  EXPECT_FALSE(s.active());
  EXPECT_TRUE(s.accept(message, false));
  ASSERT_TRUE(s.active());
  std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
  MaskScratch scratch;
  ASSERT_TRUE(s.fill_allowed(bits, {}, scratch));
  EXPECT_TRUE(mask_bit(bits, brace));
  EXPECT_FALSE(mask_bit(bits, a));
  EXPECT_FALSE(s.accept(a, false));
}

// A tool call's close delimiter after complete JSON; then only the end, one whitespace token,
// and (parallel calls) the open delimiter, which starts the next call's JSON afresh.
std::shared_ptr<const OutputConstraint> call_constraint(std::shared_ptr<const VocabIndex> vocab,
                                                        bool parallel) {
  auto c = std::make_shared<OutputConstraint>();
  c->grammar = grammar_of(R"({"enum":[1]})");
  c->vocab = std::move(vocab);
  c->call_close = static_cast<int32_t>(c->vocab->vocab_size() - 1);
  if (parallel) c->call_open = static_cast<int32_t>(c->vocab->vocab_size() - 2);
  return c;
}

TEST(ConstraintState, ACallsCloseDelimiterFollowsCompleteJsonAndOnlyCallsFollowIt) {
  const auto vocab = synthetic_vocab({});
  const int32_t open = static_cast<int32_t>(vocab->vocab_size() - 2);
  const int32_t close = static_cast<int32_t>(vocab->vocab_size() - 1);
  const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 3);
  const int32_t one = tokenize(*vocab, "1")[0], a = tokenize(*vocab, "a")[0];
  const int32_t newline = tokenize(*vocab, "\n")[0], space = tokenize(*vocab, " ")[0];
  const std::vector<int32_t> ends = {eos};
  std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
  MaskScratch scratch;

  ConstraintState early(call_constraint(vocab, true));
  ASSERT_TRUE(early.fill_allowed(bits, ends, scratch));
  EXPECT_FALSE(mask_bit(bits, close));  // not before the JSON is complete
  EXPECT_FALSE(early.accept(close, false));

  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "one call");
    ConstraintState s(call_constraint(vocab, parallel));
    ASSERT_TRUE(s.accept(one, false));
    ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
    EXPECT_TRUE(mask_bit(bits, close));
    EXPECT_TRUE(mask_bit(bits, eos));
    ASSERT_TRUE(s.accept(close, false));
    ASSERT_TRUE(s.active());  // between calls: no free text
    ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
    EXPECT_TRUE(mask_bit(bits, eos));
    EXPECT_EQ(mask_bit(bits, open), parallel);
    EXPECT_TRUE(mask_bit(bits, newline));
    EXPECT_TRUE(mask_bit(bits, space));
    EXPECT_FALSE(mask_bit(bits, a));
    EXPECT_FALSE(mask_bit(bits, one));
    EXPECT_FALSE(mask_bit(bits, close));
    ASSERT_TRUE(s.accept(newline, false));
    ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
    EXPECT_FALSE(mask_bit(bits, space));  // one whitespace token between calls
    EXPECT_TRUE(mask_bit(bits, eos));
    EXPECT_EQ(mask_bit(bits, open), parallel);
    if (!parallel) {
      EXPECT_FALSE(s.fill_allowed(bits, {}, scratch));  // without end tokens nothing is left
      EXPECT_TRUE(s.accept(eos, true));
      continue;
    }
    ASSERT_TRUE(s.accept(open, false));  // the next call, from the JSON's start
    ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));
    EXPECT_TRUE(mask_bit(bits, one));
    EXPECT_FALSE(mask_bit(bits, close));
    EXPECT_FALSE(mask_bit(bits, eos));
    ASSERT_TRUE(s.accept(one, false));
    ASSERT_TRUE(s.accept(close, false));
    EXPECT_TRUE(s.accept(eos, true));
  }

  ConstraintState text_after(call_constraint(vocab, true));
  ASSERT_TRUE(text_after.accept(one, false));
  ASSERT_TRUE(text_after.accept(close, false));
  EXPECT_FALSE(text_after.accept(a, false));  // text after a call breaks the constraint
  EXPECT_FALSE(text_after.fill_allowed(bits, ends, scratch));
}

// Delimiters that are text tokens too (Qwen's <tool_call> / </tool_call> are added tokens that
// are not special): inside the call's JSON neither is allowed, even where its bytes would fit a
// string (the output parser would take the close there as the call's end).
TEST(ConstraintState, CallDelimitersAreNeverTextInsideTheCall) {
  std::vector<VocabToken> tokens;
  for (const char* t : {"\"", "a", "<c>", "</c>", "}", "{\"k\": "}) {
    const auto id = static_cast<int32_t>(tokens.size());
    tokens.push_back({id, t});
  }
  const auto vocab = std::make_shared<VocabIndex>(8, tokens);
  const int32_t quote = 0, a = 1, open = 2, close = 3, brace = 4, key = 5, eos = 7;
  auto c = std::make_shared<OutputConstraint>();
  c->grammar = grammar_of(R"({"type": "object", "properties": {"k": {"type": "string"}},
                              "required": ["k"]})");
  c->vocab = vocab;
  c->call_open = open;
  c->call_close = close;
  const std::vector<int32_t> ends = {eos};
  std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
  MaskScratch scratch;
  ConstraintState s(c);
  ASSERT_TRUE(s.accept(key, false));
  ASSERT_TRUE(s.accept(quote, false));
  ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));  // inside the string
  EXPECT_TRUE(mask_bit(bits, a));
  EXPECT_TRUE(mask_bit(bits, quote));
  EXPECT_FALSE(mask_bit(bits, open));
  EXPECT_FALSE(mask_bit(bits, close));
  ConstraintState broken = s;
  EXPECT_FALSE(broken.accept(close, false));
  ASSERT_TRUE(s.accept(a, false));
  ASSERT_TRUE(s.accept(quote, false));
  ASSERT_TRUE(s.accept(brace, false));
  ASSERT_TRUE(s.fill_allowed(bits, ends, scratch));  // the JSON is complete
  EXPECT_TRUE(mask_bit(bits, close));
  EXPECT_FALSE(mask_bit(bits, open));
  EXPECT_TRUE(s.accept(close, false));
}

// A grammar's constraint: masks equal the token-by-token answer at every position of the texts,
// memoized or not; end tokens only on a whole match.
void expect_grammar_masks_exact(const std::shared_ptr<const EbnfGrammar>& grammar,
                                const std::vector<std::string>& texts) {
  const auto vocab = synthetic_vocab(texts);
  const EbnfMatcher m(grammar);
  const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 1);
  auto c = std::make_shared<OutputConstraint>();
  c->ebnf = grammar;
  c->vocab = vocab;
  for (const std::string& text : texts) {
    ConstraintState state(c);
    GrammarState reference = m.initial(), scratch;
    std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
    MaskScratch mask_scratch;
    for (int32_t id : tokenize(*vocab, text)) {
      for (int pass = 0; pass < 2; ++pass) {  // the memo's miss, then (mostly) its hit
        ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, mask_scratch));
        for (int32_t t = 0; t < vocab->vocab_size(); ++t) {
          const std::string_view b = vocab->bytes(t);
          if (b.empty()) continue;
          GrammarState s = reference;
          ASSERT_EQ(mask_bit(bits, t), m.advance_bytes(s, b, scratch))
              << text << ": token '" << b << "' after " << id;
        }
        EXPECT_EQ(mask_bit(bits, eos), m.can_end(reference));
      }
      ASSERT_TRUE(mask_bit(bits, id)) << text;
      ASSERT_TRUE(state.accept(id, false)) << text;
      ASSERT_TRUE(m.advance_bytes(reference, vocab->bytes(id), scratch));
    }
    ASSERT_TRUE(state.fill_allowed(bits, std::vector<int32_t>{eos}, mask_scratch));
    EXPECT_TRUE(mask_bit(bits, eos)) << text;
    EXPECT_TRUE(state.accept(eos, true));
  }
  ConstraintState broken(c);
  EXPECT_FALSE(broken.accept(eos, true));  // nothing written yet: not a whole match
}

void expect_grammar_masks_exact(std::string_view gbnf, const std::vector<std::string>& texts) {
  auto grammar = EbnfGrammar::compile(gbnf);
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  expect_grammar_masks_exact(*grammar, texts);
}

// Recursive rules with terminals that span tokens, and a grammar whose last byte ends it (a
// token may end the match and nothing may follow).
TEST(ConstraintState, GrammarOutputsMaskTokenByToken) {
  expect_grammar_masks_exact(
      R"g(
    root  ::= call (";" ws call)*
    call  ::= name "(" (arg ("," ws arg)*)? ")"
    arg   ::= call | [0-9]+ | "\"" [^"\n]* "\""
    name  ::= [a-z] [a-z_]*
    ws    ::= " "?
  )g",
      {"f()", "add(1, mul(2,3)); log(\"red \\é\")", "name(\"\",age(12),tags(x(), y_(\"\\n\")))"});
  expect_grammar_masks_exact(R"g(root ::= "(" root ")" | "x" | "yes" | "\"}]")g",
                             {"((x))", "(yes)", "\"}]", "(((\"}])))"});
  // Free text that may end anywhere: at the top only the end follows it (one DFA walk), nested
  // a ')' does.
  expect_grammar_masks_exact(R"g(root ::= "(" root ")" | "x" [^()]*)g",
                             {"xab c", "((x a))", "(x)", "x"});
}

// A structural tag (reasoning, then free text with tool calls whose arguments follow a schema):
// its grammar's masks, through free text, triggers, JSON and ends, equal token-by-token checks.
TEST(ConstraintState, StructuralTagOutputsMaskTokenByToken) {
  auto grammar = compile_structural_tag(nlohmann::ordered_json::parse(R"({"type":
      "structural_tag", "format": {"type": "sequence", "elements": [
      {"type": "tag", "begin": "<think>", "content": {"type": "any_text"}, "end": "</think>"},
      {"type": "triggered_tags", "triggers": ["<function="], "tags": [
        {"begin": "<function=get_weather>", "end": "</function>", "content": {"type":
          "json_schema", "json_schema": {"type": "object", "properties": {"city": {"type":
          "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}}, "required":
          ["city"]}}},
        {"begin": "<function=stop>", "end": "</function>", "content": {"type": "const_string",
          "value": "{}"}}]}]}})"));
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  expect_grammar_masks_exact(
      *grammar,
      {"<think>plan: call <f</think>Sure. <function=get_weather>{\"city\": \"Paris\", \"days\": "
       "3}</function> done <function=stop>{}</function>",
       "<think></think><function=stop>{}</function>",
       "<think>\xc3\xa9</think>no call, just <function text"});
}

TEST(ConstraintState, ABrokenGrammarStateAllowsNothing) {
  auto grammar = EbnfGrammar::compile(R"g(root ::= "a" root | "b")g");
  ASSERT_TRUE(grammar.ok()) << grammar.error().message;
  const auto vocab = synthetic_vocab({"aab"});
  auto c = std::make_shared<OutputConstraint>();
  c->ebnf = *grammar;
  c->vocab = vocab;
  const int32_t eos = static_cast<int32_t>(vocab->vocab_size() - 1);
  ConstraintState wrong(c);
  EXPECT_FALSE(wrong.accept(tokenize(*vocab, "(")[0], false));
  std::vector<uint32_t> bits(allowed_mask_words(vocab->vocab_size()));
  MaskScratch scratch;
  EXPECT_FALSE(wrong.fill_allowed(bits, std::vector<int32_t>{eos}, scratch));
  EXPECT_FALSE(wrong.accept(eos, true));
}

}  // namespace
}  // namespace beam
