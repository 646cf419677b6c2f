// bad_words tokenization (see bad_words.h).
#include "server/api/bad_words.h"

namespace beam::server {

ApiExpected<std::vector<std::vector<int32_t>>> bad_words_token_ids(
    const text::Tokenizer& tokenizer, std::span<const std::string> words) {
  std::vector<std::vector<int32_t>> out;
  for (const std::string& word : words) {
    const size_t start = word.find_first_not_of(" \t\n\r\f\v");
    if (start == std::string::npos)
      return invalid_request("'bad_words': \"" + word + "\" is only whitespace", "bad_words");
    const std::string bare = word.substr(start);
    auto alone = tokenizer.encode(bare, /*allow_special=*/false);
    auto spaced = tokenizer.encode(" " + bare, /*allow_special=*/false);
    if (!alone.ok() || !spaced.ok())
      return invalid_request(
          "'bad_words': \"" + word + "\": " + (alone.ok() ? spaced : alone).error().message,
          "bad_words");
    out.push_back(*alone);
    if (!spaced->empty() && spaced->size() == alone->size() && spaced->front() != alone->front())
      out.push_back(*spaced);
  }
  return out;
}

}  // namespace beam::server
