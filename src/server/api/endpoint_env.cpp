// IdSource, finish_spec and launch_generation (see endpoint_env.h).
#include "server/api/endpoint_env.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <span>

#include "server/api/bad_words.h"
#include "server/api/hidden_states.h"
#include "server/api/routed_experts.h"
#include "server/api/think_tags.h"
#include "server/generation/generation_group.h"

namespace beam::server {

IdSource::IdSource() : rng_(std::random_device{}()) {}

std::string IdSource::next(const std::string& prefix) {
  static constexpr char kAlphabet[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  std::string id = prefix;
  std::lock_guard<std::mutex> lock(mu_);
  for (int i = 0; i < 24; ++i) id += kAlphabet[rng_() % (sizeof(kAlphabet) - 1)];
  return id;
}

int64_t unix_time_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

ApiExpected<bool> finish_spec(const ServedModel& model, const SamplingFields& fields, const char* max_tokens_field,
                              GenerationSpec* spec) {
  spec->sampling = fields.params;
  spec->stop_strings = fields.stop_strings;
  spec->stop_regexes = fields.stop_regexes;
  spec->include_stop_str_in_output = fields.include_stop_str_in_output;
  spec->skip_special_tokens = fields.skip_special_tokens;
  spec->priority = fields.priority;
  spec->cache_salt = fields.cache_salt;
  if (fields.data_parallel_rank) {
    API_ASSIGN_OR_RETURN(spec->data_parallel_rank,
                         check_data_parallel_rank(model, *fields.data_parallel_rank,
                                                  "data_parallel_rank"));
  }
  if (fields.return_routed_experts) {
    if (!model.routed_experts_enabled)
      return invalid_request(
          "'return_routed_experts' needs the server started with "
          "--enable-return-routed-experts",
          "return_routed_experts");
    spec->return_routed_experts = true;
    spec->routed_experts_start = fields.routed_experts_start;
    const BeamConfig& c = model.engine->config();
    spec->routed_experts_per_position = c.num_layers_of(MlpKind::kSparse) * c.num_experts_per_tok;
    const auto prompt = static_cast<int64_t>(spec->prompt_ids.size());
    const int64_t positions =
        fields.params.max_tokens ? prompt + *fields.params.max_tokens : model.max_context_tokens;
    API_ASSIGN_OR_RETURN(bool fits, check_routed_experts_size(fields.params.n, positions,
                                                              c.num_layers_of(MlpKind::kSparse),
                                                              c.num_experts_per_tok));
    (void)fits;
  }
  if (fields.return_hidden_states) {
    if (!model.hidden_states_enabled)
      return invalid_request(
          "'return_hidden_states' needs the server started with --enable-return-hidden-states",
          "return_hidden_states");
    spec->return_hidden_states = true;
    spec->hidden_size = model.engine->config().hidden_size;
    const auto prompt = static_cast<int64_t>(spec->prompt_ids.size());
    const int64_t positions =
        fields.params.max_tokens ? prompt + *fields.params.max_tokens : model.max_context_tokens;
    API_ASSIGN_OR_RETURN(bool fits,
                         check_hidden_states_size(fields.params.n, positions, spec->hidden_size));
    (void)fits;
  }
  if (spec->parse_output) spec->shown_special_ids = model.template_special_ids;
  if (!spec->sampling.ignore_eos) {
    for (int32_t id : model.extra_stop_ids) {
      auto& ids = spec->sampling.stop_token_ids;
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  }
  // A required tool call is constrained unless ignore_eos / min_tokens ask for a length the call's
  // JSON cannot decide; then it stays steered by the prefilled delimiter only.
  const bool tool_call = spec->tool_format.kind != ResponseFormat::Kind::kText &&
                         !fields.params.ignore_eos && fields.params.min_tokens == 0;
  if (tool_call && fields.format.kind != ResponseFormat::Kind::kText)
    return invalid_request(
        "'" + fields.format.path +
            "' cannot be combined with a tool_choice that "
            "requires a tool call: the call's arguments follow the tool's schema",
        fields.format.path);
  if (fields.thinking_budget) {
    API_ASSIGN_OR_RETURN(spec->sampling.reasoning_budget,
                         reasoning_budget(model, spec->prompt_text, *fields.thinking_budget,
                                          fields.thinking_budget_field));
  }
  const ResponseFormat& format = tool_call ? spec->tool_format : fields.format;
  std::vector<int32_t> hidden;  // special tokens the output skips: never constrained text
  if (model.tokenizer && format.kind != ResponseFormat::Kind::kText)
    hidden =
        hidden_special_tokens(*model.tokenizer, spec->skip_special_tokens, spec->shown_special_ids);
  API_ASSIGN_OR_RETURN(spec->sampling.constraint,
                       make_output_constraint(model, format, spec->prompt_text, spec->parse_output,
                                              std::move(hidden)));
  if (!fields.bad_words.empty()) {
    if (!model.tokenizer)
      return invalid_request("'bad_words' needs the model's tokenizer", "bad_words");
    API_ASSIGN_OR_RETURN(spec->sampling.bad_words_token_ids,
                         bad_words_token_ids(*model.tokenizer, fields.bad_words));
  }
  API_ASSIGN_OR_RETURN(bool valid, validate_sampling(spec->sampling, model.vocab_size));
  (void)valid;
  return check_prompt_fits(model, static_cast<int64_t>(spec->prompt_ids.size()), spec->sampling.max_tokens,
                           max_tokens_field);
}

namespace {

GenerationContext generation_context(const EndpointEnv& env) {
  GenerationContext context;
  context.engine = env.model->engine.get();
  context.tokenizer = env.model->tokenizer ? &*env.model->tokenizer : nullptr;
  context.response_template = env.model->response_template;
  context.metrics = env.metrics;
  context.counters = env.counters;
  context.jobs = env.jobs;
  return context;
}

}  // namespace

ApiExpected<bool> apply_rank_header(const ServedModel& model, const http::HttpRequest& request,
                                    std::span<GenerationSpec> specs) {
  const std::string value = request.header("x-data-parallel-rank");
  if (value.empty()) return true;
  int64_t rank = -1;
  const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), rank);
  if (ec != std::errc() || end != value.data() + value.size())
    return invalid_request("the X-data-parallel-rank header must be a replica's index, got '" +
                               value + "'",
                           "X-data-parallel-rank");
  API_ASSIGN_OR_RETURN(const int replica,
                       check_data_parallel_rank(model, rank, "X-data-parallel-rank"));
  for (GenerationSpec& s : specs)
    if (!s.data_parallel_rank) s.data_parallel_rank = replica;
  return true;
}

void launch_generations(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                        std::vector<GenerationSpec> specs,
                        std::shared_ptr<GenerationObserver> observer) {
  if (ApiExpected<bool> ok = apply_rank_header(*env.model, exchange->request(), specs); !ok.ok())
    return exchange->respond_error(ok.error());
  if (specs.size() == 1) {
    return launch_generation(env, exchange, std::move(specs.front()), std::move(observer));
  }
  size_t prompt_tokens = 0;
  for (const GenerationSpec& s : specs) prompt_tokens += s.prompt_ids.size();
  exchange->note("prompt_tokens", std::to_string(prompt_tokens));
  std::vector<std::weak_ptr<GenerationJob>> jobs = start_generation_group(
      generation_context(env), boost::asio::make_strand(env.workers->get_executor()),
      std::move(specs), std::move(observer), exchange->received());
  exchange->on_disconnect([jobs = std::move(jobs)] {
    for (const std::weak_ptr<GenerationJob>& j : jobs) {
      if (auto job = j.lock()) job->cancel();
    }
  });
}

void launch_generation(const EndpointEnv& env, const std::shared_ptr<Exchange>& exchange,
                       GenerationSpec spec, std::shared_ptr<GenerationObserver> observer) {
  if (ApiExpected<bool> ok = apply_rank_header(*env.model, exchange->request(), {&spec, 1});
      !ok.ok())
    return exchange->respond_error(ok.error());
  const GenerationContext context = generation_context(env);
  exchange->note("prompt_tokens", std::to_string(spec.prompt_ids.size()));
  auto job = std::make_shared<GenerationJob>(context, boost::asio::make_strand(env.workers->get_executor()),
                                             std::move(spec), std::move(observer), exchange->received());
  std::weak_ptr<GenerationJob> weak = job;
  exchange->on_disconnect([weak] {
    if (auto j = weak.lock()) j->cancel();
  });
  job->start();
}

}  // namespace beam::server
