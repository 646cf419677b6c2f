// clean_up_tokenization (see tokenization_cleanup.h).
#include "text/tokenization_cleanup.h"

#include <utility>

namespace beam::text {

namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  std::string out;
  size_t pos = 0;
  bool changed = false;
  while (true) {
    const size_t hit = text.find(from, pos);
    if (hit == std::string::npos) break;
    if (!changed) out.reserve(text.size());
    changed = true;
    out.append(text, pos, hit - pos);
    out += to;
    pos = hit + from.size();
  }
  if (!changed) return;
  out.append(text, pos, std::string::npos);
  text = std::move(out);
}

}  // namespace

std::string clean_up_tokenization(std::string_view text) {
  static constexpr std::pair<std::string_view, std::string_view> kReplacements[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},     {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  std::string out(text);
  for (const auto& [from, to] : kReplacements) replace_all(out, from, to);
  return out;
}

}  // namespace beam::text
