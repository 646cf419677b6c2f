// The scoring endpoints (see score.h): pairs of prompts pooled together, scored, answered.
#include "server/openai/score.h"

#include <algorithm>
#include <numeric>

#include "server/openai/completions.h"
#include "server/openai/pooled_states.h"
#include "server/openai/score_request.h"

namespace beam::server {
namespace {

// Prompts to embed (job.prompts, job.keys) and the pairs of them to score.
struct PairJob {
  PoolingJob job;
  std::vector<std::pair<size_t, size_t>> pairs;  // indices into job.prompts
};

using ScoresReady = std::function<void(std::vector<double> scores, const GenerationUsage& usage)>;

// Embeds the job's prompts (one engine request per distinct prompt) and scores each pair by
// cosine similarity; `ready` gets the scores in pair order.
ApiExpected<bool> launch_pair_scores(const EndpointEnv& env,
                                     const std::shared_ptr<Exchange>& exchange,
                                     const PairScoringFields& fields, const std::string& lora_name,
                                     const std::string& field, PairJob pairs, ScoresReady ready) {
  PoolingJob job = std::move(pairs.job);
  job.lora_name = lora_name;
  job.priority = fields.priority;
  job.truncate_prompt_tokens = fields.truncate_prompt_tokens;
  job.pooling = Pooling::kLast;
  job.field = field;
  return launch_pooling(env, exchange, std::move(job),
                        [pairs = std::move(pairs.pairs), ready = std::move(ready)](
                            std::vector<HiddenStateRows> states, const GenerationUsage& usage) {
                          std::vector<double> scores;
                          scores.reserve(pairs.size());
                          for (const auto& [a, b] : pairs)
                            scores.push_back(cosine_similarity(states[a].row(0), states[b].row(0)));
                          ready(std::move(scores), usage);
                        });
}

ApiExpected<bool> run_score(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  API_ASSIGN_OR_RETURN(ScoreRequest req, parse_score_request(body));
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, req.common.model));
  PairJob job;
  API_ASSIGN_OR_RETURN(bool firsts, add_prompt_ids(model, req.text_1, "text_1", &job.job));
  API_ASSIGN_OR_RETURN(bool seconds, add_prompt_ids(model, req.text_2, "text_2", &job.job));
  (void)firsts;
  (void)seconds;
  const size_t n1 = req.text_1.size();
  for (size_t i = 0; i < req.text_2.size(); ++i) job.pairs.emplace_back(n1 == 1 ? 0 : i, n1 + i);
  const std::string shown = shown_model_name(model, lora_name), id = env.ids->next("score-");
  return launch_pair_scores(
      env, exchange, req.common, lora_name, "text_2", std::move(job),
      [exchange, shown, id](std::vector<double> scores, const GenerationUsage& usage) {
        Json data = Json::array();
        for (size_t i = 0; i < scores.size(); ++i)
          data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
        const Json out = {
            {"id", id},       {"object", "list"},        {"created", unix_time_s()},
            {"model", shown}, {"data", std::move(data)}, {"usage", pooled_usage_json(usage)}};
        exchange->respond_json(200, dump_json(out));
      });
}

ApiExpected<bool> run_rerank(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
  API_ASSIGN_OR_RETURN(RerankRequest req, parse_rerank_request(body));
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, req.common.model));
  PairJob job;
  API_ASSIGN_OR_RETURN(bool query, add_prompt_ids(model, {req.query}, "query", &job.job));
  (void)query;
  std::vector<CompletionPrompt> documents(req.documents.size());
  for (size_t i = 0; i < documents.size(); ++i) documents[i].text = req.documents[i];
  API_ASSIGN_OR_RETURN(bool docs, add_prompt_ids(model, documents, "documents", &job.job));
  (void)docs;
  for (size_t i = 0; i < documents.size(); ++i) job.pairs.emplace_back(0, i + 1);
  const std::string shown = shown_model_name(model, lora_name), id = env.ids->next("rerank-");
  return launch_pair_scores(
      env, exchange, req.common, lora_name, "documents", std::move(job),
      [exchange, shown, id, req = std::move(req)](std::vector<double> scores,
                                                  const GenerationUsage& usage) {
        // Best first; equal scores keep the documents' order.
        std::vector<size_t> order(scores.size());
        std::iota(order.begin(), order.end(), size_t{0});
        std::stable_sort(order.begin(), order.end(),
                         [&](size_t a, size_t b) { return scores[a] > scores[b]; });
        if (req.top_n && *req.top_n > 0 && static_cast<size_t>(*req.top_n) < order.size())
          order.resize(static_cast<size_t>(*req.top_n));
        Json results = Json::array();
        for (size_t i : order) {
          Json r = {{"index", i}, {"relevance_score", scores[i]}};
          if (req.return_documents) r["document"] = {{"text", req.documents[i]}};
          results.push_back(std::move(r));
        }
        const Json out = {{"id", id},
                          {"model", shown},
                          {"results", std::move(results)},
                          {"usage", pooled_usage_json(usage)}};
        exchange->respond_json(200, dump_json(out));
      });
}

}  // namespace

void handle_score(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run_score(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

void handle_rerank(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  ApiExpected<bool> r = run_rerank(env, exchange);
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace beam::server
