// Speculative decoding with n-gram drafts (EngineOptions::speculative) on beam-nano: the tokens,
// logprobs, finishes and routed experts equal those of the same requests decoded one token at a
// time, while drafts are proposed and accepted; the pools are whole afterwards.
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "engine_test_util.h"
#include "structured_person.h"
#include "text/tokenizer.h"

namespace beam::testing {
namespace {

// `text` as beam-nano's tokens (empty, with a test failure, when the tokenizer or text fails).
std::vector<int32_t> nano_tokens(const std::string& text) {
  auto tok = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano");
  EXPECT_TRUE(tok.ok()) << tok.error().message;
  if (!tok.ok()) return {};
  auto ids = tok->encode(text, /*allow_special=*/false);
  EXPECT_TRUE(ids.ok()) << text;
  return ids.ok() ? std::vector<int32_t>(ids->begin(), ids->end()) : std::vector<int32_t>{};
}

// Prompts the model continues by repeating what it read (code written twice and started a third
// time), so n-gram drafts are often right, and one it continues freely.
std::vector<std::vector<int32_t>> repetitive_prompts() {
  const std::string fn =
      "def scale(values, factor):\n    out = []\n    for v in values:\n        out.append(v * "
      "factor)\n    return out\n\n";
  std::vector<std::vector<int32_t>> prompts;
  for (const std::string& text :
       {fn + fn + "def scale(", fn + "class Point:\n    def __init__(self",
        std::string("import os\nimport sys\nimport os\nimport")}) {
    std::vector<int32_t> ids = nano_tokens(text);
    if (ids.empty()) return {};
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

std::unique_ptr<Engine> nano_engine(int64_t draft_tokens, int64_t step_tokens = 256,
                                    int64_t max_batch = 0, int64_t kv_bytes = 64 << 20,
                                    Speculation lengths = {.min_match = 1, .max_match = 4}) {
  auto weights = engine_test_model("beam-nano");
  if (!weights) return nullptr;
  EngineOptions o;
  o.num_threads = 2;
  o.block_size_tokens = 16;
  o.kv_budget_bytes = kv_bytes;
  o.max_tokens_per_step = step_tokens;
  o.max_running = 16;
  o.speculative = lengths;
  o.speculative.num_draft_tokens = draft_tokens;
  o.speculative.max_batch = max_batch;
  auto e = Engine::create(weights, o);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().message);
  return e.ok() ? std::move(*e) : nullptr;
}

// Runs `reqs` with speculation off and with k drafts; returns the speculating engine's stats.
EngineStats compare_with_plain(const std::vector<RunRequest>& reqs, int64_t k,
                               int64_t step_tokens = 256, int64_t kv_bytes = 64 << 20) {
  auto plain = nano_engine(0, step_tokens, 0, kv_bytes);
  auto spec = nano_engine(k, step_tokens, 0, kv_bytes);
  if (!plain || !spec) return {};
  const auto a = run_all(*plain, reqs);
  const auto b = run_all(*spec, reqs);
  expect_same_results(a, b);
  EXPECT_EQ(plain->stats().spec_verifications, 0);
  spec->flush_prefix_cache();
  expect_pools_full(*spec);
  return spec->stats();
}

TEST(SpeculativeDecoding, GreedyTokensEqualPlainDecodingAndDraftsAreAccepted) {
  std::vector<RunRequest> reqs;
  for (const auto& p : repetitive_prompts()) reqs.push_back(RunRequest{p, greedy(48)});
  ASSERT_EQ(reqs.size(), 3u);
  const EngineStats s = compare_with_plain(reqs, 5);
  EXPECT_GT(s.spec_verifications, 0);
  EXPECT_GT(s.spec_accepted_tokens, 0);
  EXPECT_LE(s.spec_accepted_tokens, s.spec_draft_tokens);
  // Per position: a draft is accepted only after every draft before it.
  ASSERT_EQ(s.spec_accepted_per_position.size(), 5u);
  int64_t sum = 0;
  for (size_t j = 0; j < 5; ++j) {
    sum += s.spec_accepted_per_position[j];
    if (j > 0) {
      EXPECT_LE(s.spec_accepted_per_position[j], s.spec_accepted_per_position[j - 1]);
    }
  }
  EXPECT_EQ(sum, s.spec_accepted_tokens);
  EXPECT_LE(s.spec_accepted_per_position[0], s.spec_verifications);
  // Fewer steps than tokens: accepted drafts came several a step.
  EXPECT_LT(s.steps, 48);
}

// Seeded sampling with penalties, logprobs, entropies, n = 2 siblings, stop ids, routed experts and
// hidden states: every
// position draws with its own counter and sees the drafts before it as output, so each token is
// the one plain decoding draws.
TEST(SpeculativeDecoding, SampledTokensLogprobsAndRoutingEqualPlainDecoding) {
  std::vector<RunRequest> reqs;
  uint64_t seed = 11;
  for (const auto& p : repetitive_prompts()) {
    SamplingParams sp;
    sp.temperature = 0.7;
    sp.top_p = 0.95;
    sp.repetition_penalty = 1.05;
    sp.frequency_penalty = 0.1;
    sp.seed = seed++;
    sp.max_tokens = 40;
    sp.n = 2;
    sp.logprobs = true;
    sp.top_logprobs = 2;
    sp.return_entropy = true;
    sp.token_ids_logprob = {5, 7};
    reqs.push_back(RunRequest{p, sp, "", /*return_routed_experts=*/true,
                              /*return_hidden_states=*/true});
  }
  const EngineStats s = compare_with_plain(reqs, 4);
  EXPECT_GT(s.spec_accepted_tokens, 0);
}

// Finishes inside an accepted block: max_tokens smaller than the drafts, and a stop id the
// repeated text reaches; a small step budget that cuts drafts.
TEST(SpeculativeDecoding, FinishesInsideABlockAndBudgetCutsKeepTheTokens) {
  const auto prompts = repetitive_prompts();
  ASSERT_FALSE(prompts.empty());
  std::vector<RunRequest> reqs;
  for (int64_t max_tokens : {1, 2, 3, 7})
    reqs.push_back(RunRequest{prompts[0], greedy(max_tokens)});
  SamplingParams stop = greedy(40);
  stop.stop_token_ids = {prompts[0][3], prompts[0][7]};
  reqs.push_back(RunRequest{prompts[0], stop});
  compare_with_plain(reqs, 8);
  compare_with_plain(reqs, 8, /*step_tokens=*/9);
}

// Step budgets that leave the last decodes of a step one token: a decode cut to its last token
// feeds none of its drafts, which must leave the tokens before its sampled one.
TEST(SpeculativeDecoding, DecodesCutToOneTokenDropTheirDrafts) {
  const auto prompts = repetitive_prompts();
  ASSERT_EQ(prompts.size(), 3u);
  std::vector<RunRequest> reqs;  // repetitive prompts and random ones (drafts often wrong)
  for (int i = 0; i < 6; ++i)
    reqs.push_back(RunRequest{
        i % 2 ? prompts[i % 3] : tokens_of(24, 300 + static_cast<uint64_t>(i), 512), greedy(40)});
  for (int64_t budget : {2, 3, 5, 7}) {
    const EngineStats s = compare_with_plain(reqs, 4, budget);
    EXPECT_GT(s.spec_accepted_tokens, 0) << "budget " << budget;
  }
}

// Token filters speculate too: allowed_token_ids (the prompt's first 20 tokens) and bad_words
// (a token of the repeated text banned), each draft row sampled from a state advanced over the
// drafts before it: the tokens, logprobs and finishes equal plain decoding's, and the filtered
// requests alone verify and accept drafts.
TEST(SpeculativeDecoding, FilteredRowsSpeculateUnderTheirMasks) {
  const auto prompts = repetitive_prompts();
  ASSERT_FALSE(prompts.empty());
  SamplingParams masked = greedy(24);
  masked.allowed_token_ids.assign(prompts[0].begin(), prompts[0].begin() + 20);
  SamplingParams banned = greedy(24);
  banned.bad_words_token_ids = {{prompts[0][5]}, {prompts[0][8], prompts[0][9]}};
  SamplingParams sampled = banned;
  sampled.temperature = 0.8;
  sampled.seed = 5;
  sampled.logprobs = true;
  sampled.top_logprobs = 2;
  sampled.repetition_penalty = 1.1;
  const EngineStats s =
      compare_with_plain({RunRequest{prompts[0], masked}, RunRequest{prompts[0], banned},
                          RunRequest{prompts[1], sampled}},
                         4);
  EXPECT_GT(s.spec_verifications, 0);
  EXPECT_GT(s.spec_accepted_tokens, 0);
}

// Pools too small for every sequence at once: sequences holding drafts are preempted (their
// drafts dropped) and resumed from the prefix cache, with the same tokens as plain decoding.
TEST(SpeculativeDecoding, PreemptedSequencesResumeWithTheSameTokens) {
  const auto prompts = repetitive_prompts();
  ASSERT_EQ(prompts.size(), 3u);
  std::vector<RunRequest> reqs;  // distinct first tokens: no two share a cached block
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> p = tokens_of(4, 100 + static_cast<uint64_t>(i), 512);
    p.insert(p.end(), prompts[i % 3].begin(), prompts[i % 3].end());
    reqs.push_back(RunRequest{p, greedy(160)});
  }
  const EngineStats s = compare_with_plain(reqs, 4, 256, /*kv_bytes=*/9'400'000);
  EXPECT_GT(s.preemptions, 0);
  EXPECT_GT(s.spec_accepted_tokens, 0);
}

// A reasoning budget: drafts stop short of the budget's end (the forced close needs a mask), so
// the close lands where plain decoding puts it.
TEST(SpeculativeDecoding, ReasoningBudgetsKeepTheirCloseWhileSpeculating) {
  const auto prompts = repetitive_prompts();
  ASSERT_FALSE(prompts.empty());
  const ReasoningBudget budget = test_reasoning_budget(12);
  std::vector<RunRequest> reqs;
  for (const auto& p : prompts) {
    SamplingParams sp = greedy(36);
    sp.reasoning_budget = budget;
    reqs.push_back(RunRequest{p, sp});
  }
  auto spec = nano_engine(4);
  ASSERT_NE(spec, nullptr);
  for (const auto& r : run_all(*spec, reqs)) expect_reasoning_budget_kept(r[0].tokens, budget);
  const EngineStats s = compare_with_plain(reqs, 4);
  EXPECT_GT(s.spec_verifications, 0);
}

// n > 1: samples of one prompt at a low temperature mostly write the same text, so each drafts
// from its siblings too; the tokens stay plain decoding's.
TEST(SpeculativeDecoding, SiblingSamplesDraftFromEachOther) {
  const std::vector<int32_t> prompt = nano_tokens("import numpy as np\n\n\ndef normalize(x):\n");
  ASSERT_FALSE(prompt.empty());
  SamplingParams sp;
  sp.temperature = 0.3;
  sp.seed = 21;
  sp.n = 4;
  sp.max_tokens = 48;
  sp.ignore_eos = true;
  const EngineStats s = compare_with_plain({RunRequest{prompt, sp}}, 4);
  EXPECT_GT(s.spec_accepted_tokens, 0);
}

// A prompt owner's last prompt token scheduled alone (the step budget cut its prefill one token
// short) looks like a decode that could carry drafts; its sample also draws its siblings' first
// tokens, which a verify step did not: the siblings were never forked and the request never
// ended (found by the server chaos suite). The owner now samples that token without drafts.
TEST(SpeculativeDecoding, SiblingsForkWhenTheOwnersLastPromptTokenRunsAlone) {
  std::vector<int32_t> prompt = repetitive_prompts().at(0);  // a function twice: its tail repeats
  ASSERT_GT(prompt.size(), 49u);
  prompt.resize(49);  // 3 blocks of 16 and one token: a 48-token step leaves that token alone
  SamplingParams sp = greedy(24);
  sp.n = 2;
  const int64_t step = 48;
  auto plain = nano_engine(0, step);
  auto spec = nano_engine(4, step);
  ASSERT_TRUE(plain && spec);
  const auto want = run_all(*plain, {RunRequest{prompt, sp}});
  // The second time the first answer (the finished requests' corpus) drafts the owner's last
  // prompt token on.
  for (int round = 0; round < 2; ++round) expect_same_results(want, run_all(*spec, {RunRequest{prompt, sp}}));
  EXPECT_GT(spec->stats().spec_accepted_tokens, 0);
  spec->flush_prefix_cache();
  expect_pools_full(*spec);
}

// A draft row whose mask fails (no token left: allowed_token_ids {a, b} and bad_words banning
// both after a) costs nothing unless the drafts before it are accepted; then the request takes
// them and ends with the error plain decoding meets at that position. Sampled requests over a
// prompt alternating b a: finishes (errors included) and tokens equal plain decoding's.
TEST(SpeculativeDecoding, DraftRowMaskErrorsEndRequestsOnlyWherePlainDecodingWould) {
  constexpr int32_t a = 300, b = 301;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 12; ++i) prompt.insert(prompt.end(), {b, b, a});
  std::vector<RunRequest> reqs;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    SamplingParams sp = greedy(30);
    sp.temperature = 1.0;
    sp.seed = seed;
    sp.allowed_token_ids = {a, b};
    sp.bad_words_token_ids = {{a, a}, {a, b}};
    reqs.push_back(RunRequest{prompt, sp});
  }
  auto plain = nano_engine(0);
  auto spec = nano_engine(4);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(spec, nullptr);
  const auto want = run_all(*plain, reqs);
  expect_same_results(want, run_all(*spec, reqs));
  int errors = 0;
  for (const auto& r : want) errors += r[0].finish == FinishReason::kError;
  EXPECT_GT(errors, 0) << "no request reached the position with no token left";
  EXPECT_GT(spec->stats().spec_verifications, 0);
  spec->flush_prefix_cache();
  expect_pools_full(*spec);
}

// Constrained requests speculate: a JSON schema (the prompt shows two people, so the output's
// keys and structure draft from it; greedy and sampled n = 2) and a recursive grammar, each draft
// row sampled from a state advanced over the drafts before it: outputs equal plain decoding's,
// are JSON of the schema, and drafts are verified and accepted.
TEST(SpeculativeDecoding, ConstrainedRowsSpeculateUnderTheirMasks) {
  auto tok = text::Tokenizer::load(std::string(BEAMSERVE_SOURCE_DIR) + "/models/beam-nano");
  ASSERT_TRUE(tok.ok());
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  const auto person = person_constraint(*tok, weights->config.vocab_size);
  const auto lists = nested_lists_constraint(*tok, weights->config.vocab_size);
  auto ids = tok->encode(
      "people = [\n  {\"name\": \"Ada\", \"age\": 36, \"langs\": [\"c++\", \"go\"], "
      "\"active\": true},\n  {\"name\": \"Bob\", \"age\": 41, \"langs\": [\"python\"], "
      "\"active\": false},\n  ",
      /*allow_special=*/false);
  ASSERT_TRUE(ids.ok());
  const std::vector<int32_t> prompt(ids->begin(), ids->end());
  SamplingParams greedy_json = greedy(120);
  greedy_json.ignore_eos = false;  // a format ends the output where its text is complete
  greedy_json.constraint = person;
  SamplingParams sampled_json = greedy_json;
  sampled_json.temperature = 0.7;
  sampled_json.seed = 3;
  sampled_json.n = 2;
  SamplingParams grammar = greedy(60);
  grammar.ignore_eos = false;
  grammar.constraint = lists;
  auto spec = nano_engine(4);
  ASSERT_NE(spec, nullptr);
  const auto results =
      run_all(*spec, {RunRequest{prompt, greedy_json}, RunRequest{prompt, sampled_json}});
  for (const auto& siblings : results)
    for (const SiblingResult& r : siblings) expect_person(*tok, r.tokens, r.finish);
  const EngineStats s =
      compare_with_plain({RunRequest{prompt, greedy_json}, RunRequest{prompt, sampled_json},
                          RunRequest{prompt, grammar}},
                         4);
  std::cout << "constrained: " << s.spec_accepted_tokens << " of " << s.spec_draft_tokens
            << " drafts accepted in " << s.spec_verifications << " verifications, " << s.steps
            << " steps\n";
  EXPECT_GT(s.spec_verifications, 0);
  EXPECT_GT(s.spec_accepted_tokens, 0);
}

// The corpus (SGLang's NGRAM corpus): a decode drafts from a finished request's text where it
// matches longer than the decode's own; asked again, a prompt's greedy answer comes back from the
// corpus several tokens a step, the same tokens as plain decoding. Without the corpus the second
// request drafts little (a docstring rarely repeats 3 tokens in 40).
TEST(SpeculativeDecoding, LaterRequestsDraftFromFinishedOnes) {
  const std::vector<int32_t> prompt = nano_tokens("def fibonacci(n):");
  ASSERT_FALSE(prompt.empty());
  SamplingParams sp = greedy(40);
  sp.ignore_eos = true;
  const std::vector<RunRequest> req = {RunRequest{prompt, sp}};
  auto plain = nano_engine(0);
  ASSERT_NE(plain, nullptr);
  const auto want = run_all(*plain, req);
  int64_t accepted[2] = {0, 0};
  for (int64_t corpus : {0, 4096}) {
    SCOPED_TRACE(::testing::Message() << "corpus " << corpus);
    auto e = nano_engine(4, 256, 0, 64 << 20,
                         Speculation{.min_match = 3, .max_match = 4, .corpus_tokens = corpus});
    ASSERT_NE(e, nullptr);
    expect_same_results(want, run_all(*e, req));
    const EngineStats first = e->stats();
    expect_same_results(want, run_all(*e, req));
    const EngineStats second = e->stats();
    accepted[corpus > 0] = second.spec_accepted_tokens - first.spec_accepted_tokens;
    std::cout << "corpus " << corpus << ": second request accepted " << accepted[corpus > 0]
              << " drafts of " << second.spec_draft_tokens - first.spec_draft_tokens << " in "
              << second.steps - first.steps << " steps\n";
    if (corpus > 0) {
      EXPECT_GE(accepted[1], 24) << "the first answer drafted back";
      EXPECT_LE(second.steps - first.steps, 16);
    }
  }
  EXPECT_GT(accepted[1], accepted[0] + 20);
}

// Polls c until its (first) sequence satisfies done (up to 20 s).
template <typename Done>
void wait_until(const Collector& c, Done done) {
  for (int i = 0; i < 20000; ++i) {
    const auto r = c.results();
    if (!r.empty() && done(r[0])) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL() << "timed out";
}

// Requests of one prompt running at once draft from each other (RL rollouts sent one sample a
// request; SGLang's corpus holds running requests' tokens too): a request sent while another of
// its prompt is ahead takes that one's text as drafts, with the tokens plain decoding gives and in
// fewer steps than alone. The corpus is off: only the running peer can supply the drafts.
TEST(SpeculativeDecoding, RequestsOfOnePromptDraftFromEachOther) {
  const std::vector<int32_t> prompt = nano_tokens("def fibonacci(n):");
  ASSERT_FALSE(prompt.empty());
  SamplingParams lead = greedy(200), follow = greedy(40);
  lead.ignore_eos = follow.ignore_eos = true;
  auto plain = nano_engine(0);
  ASSERT_NE(plain, nullptr);
  const auto want = run_all(*plain, {RunRequest{prompt, follow}});
  auto e = nano_engine(4, 256, 0, 64 << 20,
                       Speculation{.min_match = 3, .max_match = 4, .corpus_tokens = 0});
  ASSERT_NE(e, nullptr);
  const auto alone = run_all(*e, {RunRequest{prompt, follow}});
  expect_same_results(want, alone);
  Collector ahead, behind;
  submit(*e, RunRequest{prompt, lead}, &ahead);
  wait_until(ahead, [](const SiblingResult& r) { return r.tokens.size() >= 80; });
  submit(*e, RunRequest{prompt, follow}, &behind);
  wait_until(behind, [](const SiblingResult& r) { return r.finish.has_value(); });
  const SiblingResult got = behind.results()[0];
  EXPECT_EQ(got.tokens, want[0][0].tokens);
  std::cout << "alone: " << alone[0][0].num_events
            << " events; behind a running peer: " << got.num_events << " events for "
            << got.tokens.size() << " tokens\n";
  EXPECT_LE(got.num_events, 14) << "the peer's text drafted";
  EXPECT_LT(got.num_events, alone[0][0].num_events);
  wait_until(ahead, [](const SiblingResult& r) { return r.finish.has_value(); });
}

// max_batch (vLLM's disable_by_batch_size): no drafts in a step that starts with that many
// sequences running.
TEST(SpeculativeDecoding, NoDraftsAtTheBatchLimit) {
  const auto prompts = repetitive_prompts();
  ASSERT_FALSE(prompts.empty());
  for (const auto& [max_batch, speculates] : {std::pair<int64_t, bool>{1, false}, {2, true}}) {
    auto e = nano_engine(4, 256, max_batch);
    ASSERT_NE(e, nullptr);
    run_all(*e, {RunRequest{prompts[0], greedy(24)}});
    EXPECT_EQ(e->stats().spec_verifications > 0, speculates) << "max_batch " << max_batch;
  }
}

TEST(SpeculativeDecoding, OutOfRangeSettingsAreRefused) {
  auto weights = engine_test_model("beam-nano");
  ASSERT_NE(weights, nullptr);
  for (const Speculation& bad :
       {Speculation{.num_draft_tokens = -1},
        Speculation{.num_draft_tokens = kMaxDraftTokens + 1},
        Speculation{.num_draft_tokens = 3, .min_match = 0},
        Speculation{.num_draft_tokens = 3, .min_match = 5, .max_match = 4},
        Speculation{.num_draft_tokens = 3, .corpus_tokens = -1},
        Speculation{.num_draft_tokens = 3, .corpus_tokens = kMaxCorpusTokens + 1}}) {
    EngineOptions o;
    o.num_threads = 2;
    o.kv_budget_bytes = 64 << 20;
    o.speculative = bad;
    auto e = Engine::create(weights, o);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.error().message.find("speculative"), std::string::npos) << e.error().message;
  }
}

}  // namespace
}  // namespace beam::testing
