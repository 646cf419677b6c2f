// The embeddings and pooling endpoints (see embeddings.h): their requests' prompts, pooled by
// launch_pooling, and the responses.
#include "server/openai/embeddings.h"

#include "server/openai/completions.h"
#include "server/openai/embeddings_request.h"
#include "server/openai/pooled_states.h"

namespace beam::server {
namespace {

// The request's prompts as token ids into the job: the rendered conversation, or each input.
ApiExpected<bool> add_prompts(const ServedModel& model, const EmbeddingsRequest& req,
                              PoolingJob* job) {
  if (req.chat) {
    API_ASSIGN_OR_RETURN(RenderedPrompt rendered, render_chat_prompt(model, *req.chat));
    job->prompts.push_back(std::move(rendered.ids));
    job->keys.push_back("messages");
  }
  return add_prompt_ids(model, req.inputs, "input", job);
}

// One input's pooled output: its vector (kLast) or one vector per position (kAll), normalized
// as asked; base64 packs the float32 values of every row, row after row.
Json pooled_json(const HiddenStateRows& rows, const EmbeddingsRequest& req) {
  const bool lists = req.pooling == Pooling::kAll && !req.base64;  // a JSON list a position
  std::vector<float> flat;
  Json per_row = Json::array();
  for (int64_t r = 0; r < rows.rows(); ++r) {
    std::vector<float> values = pooled_vector(rows.row(r), req.normalize);
    if (lists)
      per_row.push_back(Json(values));
    else
      flat.insert(flat.end(), values.begin(), values.end());
  }
  return lists ? per_row : float_vector_json(flat, req.base64);
}

ApiExpected<bool> run_pooled(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                             EmbeddingsRequest req) {
  const ServedModel& model = *env.model;
  API_ASSIGN_OR_RETURN(const std::string lora_name, model_adapter(model, req.model));
  const int64_t hidden = model.engine->config().hidden_size;
  if (req.dimensions && *req.dimensions != hidden)
    return invalid_request("'dimensions': this model's embeddings have " + std::to_string(hidden) +
                               " dimensions (its hidden size), not " +
                               std::to_string(*req.dimensions),
                           "dimensions");
  PoolingJob job;
  API_ASSIGN_OR_RETURN(bool added, add_prompts(model, req, &job));
  (void)added;
  job.field = req.chat ? "messages" : "input";
  job.lora_name = lora_name;
  job.priority = req.priority;
  job.truncate_prompt_tokens = req.truncate_prompt_tokens;
  job.pooling = req.pooling;
  const std::string shown = shown_model_name(model, lora_name);
  const bool pooling = req.endpoint == PooledEndpoint::kPooling;
  const std::string id = env.ids->next(pooling ? "pool-" : "embd-");  // vLLM's prefixes
  return launch_pooling(
      env, exchange, std::move(job),
      [exchange, req = std::move(req), shown, pooling, id](std::vector<HiddenStateRows> states,
                                              const GenerationUsage& usage) {
        Json data = Json::array();
        for (size_t i = 0; i < states.size(); ++i) {
          Json item = {{"index", i}, {"object", pooling ? "pooling" : "embedding"}};
          item[pooling ? "data" : "embedding"] = pooled_json(states[i], req);
          data.push_back(std::move(item));
        }
        const Json body = {{"id", id},           {"object", "list"},
                           {"created", unix_time_s()}, {"model", shown},
                           {"data", std::move(data)},  {"usage", pooled_usage_json(usage)}};
        exchange->respond_json(200, dump_json(body));
      });
}

void respond(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
             PooledEndpoint endpoint) {
  ApiExpected<bool> r = [&]() -> ApiExpected<bool> {
    API_ASSIGN_OR_RETURN(Json body, parse_json_body(exchange->request().body));
    API_ASSIGN_OR_RETURN(EmbeddingsRequest req, parse_embeddings_request(body, endpoint));
    return run_pooled(env, exchange, std::move(req));
  }();
  if (!r.ok()) exchange->respond_error(r.error());
}

}  // namespace

void handle_embeddings(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  respond(env, exchange, PooledEndpoint::kEmbeddings);
}

void handle_pooling(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange) {
  respond(env, exchange, PooledEndpoint::kPooling);
}

}  // namespace beam::server
