// /score and /rerank request parsing (see score_request.h).
#include "server/openai/score_request.h"

#include "server/api/prompt_truncation.h"
#include "server/api/sampling_fields.h"

namespace beam::server {
namespace {

// model, truncate_prompt_tokens, priority; vLLM's activation switches (softmax, activation,
// use_activation) are read for their type and have no effect on a cosine similarity.
PairScoringFields read_common(FieldReader& r) {
  PairScoringFields f;
  r.read("model", &f.model);
  read_truncate_prompt_tokens(r, &f.truncate_prompt_tokens);
  read_priority(r, &f.priority);
  for (const char* key : {"softmax", "activation", "use_activation"}) {
    bool unused = false;
    r.read(key, &unused);
  }
  std::string user;
  r.read("user", &user);  // an end-user id: accepted, unused
  return f;
}

}  // namespace

ApiExpected<ScoreRequest> parse_score_request(const Json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body, "");
  ScoreRequest req;
  req.common = read_common(r);
  if (r.failed()) return r.take_error();
  API_ASSIGN_OR_RETURN(req.text_1, read_prompts(r.get("text_1"), "text_1"));
  API_ASSIGN_OR_RETURN(req.text_2, read_prompts(r.get("text_2"), "text_2"));
  if (req.text_1.size() > 1 && req.text_1.size() != req.text_2.size())
    return invalid_request("'text_2' has " + std::to_string(req.text_2.size()) + " items; with " +
                               std::to_string(req.text_1.size()) +
                               " in 'text_1' it needs as many (or one text_1 for all)",
                           "text_2");
  return req;
}

ApiExpected<RerankRequest> parse_rerank_request(const Json& body) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  FieldReader r(body, "");
  RerankRequest req;
  req.common = read_common(r);
  r.read("top_n", &req.top_n);
  if (req.top_n && *req.top_n < 0)
    r.fail("top_n", "must be >= 0, got " + std::to_string(*req.top_n));
  r.read("return_documents", &req.return_documents);
  if (r.failed()) return r.take_error();
  API_ASSIGN_OR_RETURN(std::vector<CompletionPrompt> query, read_prompts(r.get("query"), "query"));
  if (query.size() != 1) return invalid_request("'query' must be one string or token ids", "query");
  req.query = std::move(query.front());
  const Json* documents = r.get("documents");
  if (!documents || !documents->is_array() || documents->empty())
    return invalid_request("'documents' must be a non-empty list of strings", "documents");
  for (size_t i = 0; i < documents->size(); ++i) {
    const Json& d = (*documents)[i];
    const std::string path = indexed_path("documents", i);
    const Json* text = d.is_object() && d.contains("text") ? &d["text"] : &d;
    if (!text->is_string() || text->get_ref<const std::string&>().empty())
      return invalid_request("'" + path + "' must be a non-empty string or {\"text\": string}",
                             path);
    req.documents.push_back(text->get<std::string>());
  }
  return req;
}

}  // namespace beam::server
