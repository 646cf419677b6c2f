// Embeddings request parsing (see embeddings_request.h).
#include "server/openai/embeddings_request.h"

#include "server/api/prompt_truncation.h"
#include "server/api/sampling_fields.h"
#include "server/openai/chat_request.h"

namespace beam::server {

ApiExpected<EmbeddingsRequest> parse_embeddings_request(const Json& body,
                                                       PooledEndpoint endpoint) {
  if (!body.is_object()) return invalid_request("the request body must be a JSON object");
  EmbeddingsRequest req;
  req.endpoint = endpoint;
  FieldReader r(body, "");
  r.read("model", &req.model);
  if (endpoint == PooledEndpoint::kPooling) {
    std::string task = "token_embed";
    r.read("task", &task);
    if (task == "token_embed" || task == "encode")
      req.pooling = Pooling::kAll;
    else if (task != "embed")
      r.fail("task", "must be \"token_embed\" (every position's final hidden state) or \"embed\" "
                     "(the last position's), got \"" + task + "\": this model has no "
                     "classification head");
  }
  std::string format = "float";
  r.read("encoding_format", &format);
  if (format != "float" && format != "base64")
    r.fail("encoding_format", "must be \"float\" or \"base64\", got \"" + format + "\"");
  req.base64 = format == "base64";
  r.read("dimensions", &req.dimensions);
  if (req.dimensions && *req.dimensions < 1)
    r.fail("dimensions", "must be >= 1, got " + std::to_string(*req.dimensions));
  r.read("normalize", &req.normalize);
  read_truncate_prompt_tokens(r, &req.truncate_prompt_tokens);
  read_priority(r, &req.priority);
  std::string user;
  r.read("user", &user);  // OpenAI's end-user id: accepted, unused
  if (const Json* messages = r.get("messages")) {
    if (r.has("input")) r.fail("messages", "cannot be combined with 'input' (one of the two)");
    ChatPrompt chat;
    chat.add_generation_prompt = false;
    read_template_variables(r, &chat.variables);
    read_request_template(r, &chat);
    read_generation_prompt_fields(r, &chat);
    if (r.failed()) return r.take_error();
    API_ASSIGN_OR_RETURN(chat.messages, convert_openai_messages(*messages, "messages"));
    req.chat = std::move(chat);
    return req;
  }
  if (r.failed()) return r.take_error();
  API_ASSIGN_OR_RETURN(req.inputs, read_prompts(r.get("input"), "input"));
  return req;
}

}  // namespace beam::server
