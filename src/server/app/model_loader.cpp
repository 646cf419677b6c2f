// load_served_model (see model_loader.h).
#include "server/app/model_loader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "core/logging.h"
#include "model/synthetic_weights.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"
#include "server/api/endpoint_env.h"
#include "server/api/response_format.h"
#include "server/parsers/builtin_templates.h"

namespace beam::server {
namespace {

namespace fs = std::filesystem;

bool has_chat_template(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "chat_template.jinja", ec)) return true;
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in) return false;
  std::stringstream text;
  text << in.rdbuf();
  Json config = Json::parse(text.str(), nullptr, false);
  return config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null();
}

Status load_text_side(const fs::path& dir, ServedModel* model) {
  std::error_code ec;
  if (!fs::exists(dir / "tokenizer.json", ec)) {
    BEAM_ASSIGN_OR_RETURN(model->response_template, load_hermes_response_template());
    return ok_status();
  }
  BEAM_ASSIGN_OR_RETURN(text::Tokenizer tokenizer, text::Tokenizer::load(dir));
  model->tokenizer.emplace(std::move(tokenizer));
  if (has_chat_template(dir)) {
    BEAM_ASSIGN_OR_RETURN(text::ChatTemplate tmpl, text::ChatTemplate::load(dir));
    model->chat_template.emplace(std::move(tmpl));
  }
  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    std::ifstream in(config_path);
    std::stringstream text;
    text << in.rdbuf();
    BEAM_ASSIGN_OR_RETURN(model->response_template,
                          response_template_from_tokenizer_config_text(text.str(), config_path.string()));
  } else {
    BEAM_ASSIGN_OR_RETURN(model->response_template, load_hermes_response_template());
  }
  return ok_status();
}

// generation_config.json's sampling fields, checked like a request's.
Expected<Json> load_sampling_defaults(const fs::path& dir, int64_t vocab_size) {
  Json defaults = Json::object();
  std::ifstream in(dir / "generation_config.json");
  if (!in) return defaults;
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = (dir / "generation_config.json").string();
  Json config = Json::parse(text.str(), nullptr, false);
  if (!config.is_object()) return make_error(source + ": not a JSON object");
  // do_sample false means greedy decoding by default.
  if (config.contains("do_sample") && config["do_sample"] == false) defaults["temperature"] = 0.0;
  for (const char* key : {"temperature", "top_p", "top_k", "min_p", "repetition_penalty"}) {
    if (config.contains(key) && config[key].is_number() && !defaults.contains(key)) defaults[key] = config[key];
  }
  SamplingParams p;
  FieldReader r(defaults, "");
  r.read("temperature", &p.temperature);
  r.read("top_p", &p.top_p);
  r.read("top_k", &p.top_k);
  r.read("min_p", &p.min_p);
  r.read("repetition_penalty", &p.repetition_penalty);
  if (r.failed()) return make_error(source + ": " + r.error().message);
  if (Status st = p.validate(vocab_size); !st.ok()) return make_error(source + ": " + st.error().message);
  return defaults;
}

// Special tokens whose text a delimiter of the template matches, whole or as its beginning.
std::vector<int32_t> delimiter_special_ids(const text::Tokenizer& tokenizer, const ResponseTemplate& tmpl) {
  std::vector<int32_t> ids;
  MatchScratch scratch;
  for (const text::AddedToken& t : tokenizer.added_tokens()) {
    if (!t.special) continue;
    bool spelled = false;
    for (const TemplateField& f : tmpl.fields) {
      for (const std::optional<Delimiter>* d : {&f.open, &f.close}) {
        if (!d->has_value() || spelled) continue;
        auto m = (*d)->regex.search(t.content, 0, Regex::Mode::kPartial, true, &scratch);
        spelled = m.ok() && m->outcome != Regex::Outcome::kNone && m->start == 0;
      }
    }
    if (spelled) ids.push_back(t.id);
  }
  return ids;
}

}  // namespace

Expected<std::unique_ptr<ServedModel>> load_served_model(const ModelLoadOptions& options) {
  auto model = std::make_unique<ServedModel>();
  model->dir = options.model_dir;
  model->tokenizer_dir = options.tokenizer_dir.empty() ? options.model_dir : options.tokenizer_dir;
  model->weights = std::make_shared<ServedWeights>(ServedWeights::Info{
      options.model_dir, "default", options.dummy_weights ? "dummy" : "auto"});
  model->name = options.served_model_name;
  model->routed_experts_enabled = options.enable_return_routed_experts;
  model->hidden_states_enabled = options.enable_return_hidden_states;
  model->weight_updates_enabled = options.enable_weight_updates;
  model->sleep_mode_enabled = options.engine.enable_sleep_mode;
  model->lora_enabled = options.engine.max_loras > 0;
  model->lora_resolver_dir = options.lora_resolver_dir;
  if (model->name.empty()) model->name = fs::path(options.model_dir).lexically_normal().filename().string();
  if (model->name.empty()) model->name = fs::path(options.model_dir).lexically_normal().parent_path().filename().string();
  model->created_unix_s = unix_time_s();
  BEAM_ASSIGN_OR_RETURN(const BeamConfig config, load_beam_config(options.model_dir));
  BEAM_RETURN_IF_ERROR(load_text_side(
      options.tokenizer_dir.empty() ? options.model_dir : options.tokenizer_dir, model.get()));
  if (options.trust_request_chat_template && model->tokenizer)
    model->request_templates = std::make_shared<RequestTemplates>(model->chat_template);
  // Each tensor-parallel rank loads only its experts (Beam 1.0's are ~1 TB); one rank loads all.
  // Dummy weights: each rank's slice made where it runs.
  const RankWeights source =
      options.dummy_weights
          ? synthetic_rank_weights(config, SyntheticWeightOptions{})
          : load_rank_weights(options.model_dir, options.merge_lora_dir,
                              expert_copy_for(options.engine.device));
  BEAM_ASSIGN_OR_RETURN(model->engine, Engine::create(source, options.engine));
  if (options.dummy_weights) log_info("serving random weights (--load-format dummy)");
  if (!options.merge_lora_dir.empty())
    log_info("merged the LoRA adapter " + options.merge_lora_dir);
  for (const StartupAdapter& a : options.lora_modules) {
    const Status st = model->engine->load_lora_adapter(a.name, a.dir, /*replace=*/false, a.pinned);
    if (!st.ok())
      return make_error("--lora-modules " + a.name + "=" + a.dir + ": " + st.error().message);
    log_info("serving the LoRA adapter '" + a.name + "' from " + a.dir +
             (a.pinned ? " (pinned)" : ""));
  }
  model->vocab_size = config.vocab_size;
  BEAM_ASSIGN_OR_RETURN(model->sampling_defaults, load_sampling_defaults(options.model_dir, config.vocab_size));
  if (options.logprobs_mode == LogprobsMode::kRaw)
    model->sampling_defaults["logprobs_mode"] = "raw";
  model->max_context_tokens = options.engine.max_context_tokens > 0 ? options.engine.max_context_tokens
                                                                    : config.max_position_embeddings;
  // A request runs on one data-parallel replica: the smallest replica's pool bounds it.
  int64_t full_blocks = std::numeric_limits<int64_t>::max();
  for (const EngineStats& s : model->engine->replica_stats())
    full_blocks = std::min(full_blocks, s.full_pool.total_blocks);
  model->kv_capacity_tokens = full_blocks * options.engine.block_size_tokens;
  if (model->tokenizer) {
    model->template_special_ids = delimiter_special_ids(*model->tokenizer, *model->response_template);
    const auto& eos = config.eos_token_ids;
    std::optional<text::TokenId> tok_eos = model->tokenizer->config().eos_id;
    if (tok_eos && *tok_eos < config.vocab_size && std::find(eos.begin(), eos.end(), *tok_eos) == eos.end()) {
      model->extra_stop_ids.push_back(*tok_eos);
    }
    model->structured_vocab = build_structured_vocab(*model->tokenizer, config.vocab_size);
    model->grammars = std::make_shared<GrammarCache>();
    model->schemas = std::make_shared<SchemaCache>();
    model->regexes = std::make_shared<RegexCache>();
  }
  return model;
}

}  // namespace beam::server
