// Request chat templates (see request_templates.h).
#include "server/api/request_templates.h"

namespace beam::server {
namespace {

text::ChatTemplate base_of(std::optional<text::ChatTemplate> model_template) {
  if (model_template) return std::move(*model_template);
  Expected<text::ChatTemplate> empty = text::ChatTemplate::from_config(
      nlohmann::ordered_json::object(), std::string(), "no template");
  return std::move(empty).value();
}

}  // namespace

RequestTemplates::RequestTemplates(std::optional<text::ChatTemplate> model_template)
    : base_(base_of(std::move(model_template))) {}

ApiExpected<std::shared_ptr<const text::ChatTemplate>> RequestTemplates::get(
    const std::string& source) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = recent_.begin(); it != recent_.end(); ++it) {
      if (it->first != source) continue;
      recent_.splice(recent_.begin(), recent_, it);
      return recent_.front().second;
    }
  }
  Expected<text::ChatTemplate> compiled = base_.with_source(source, "the request's chat_template");
  if (!compiled.ok()) return invalid_request(compiled.error().message, "chat_template");
  auto shared = std::make_shared<const text::ChatTemplate>(std::move(compiled).value());
  std::lock_guard<std::mutex> lock(mu_);
  recent_.emplace_front(source, shared);
  if (recent_.size() > kCapacity) recent_.pop_back();
  return shared;
}

}  // namespace beam::server
