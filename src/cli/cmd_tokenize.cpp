// `beamserve tokenize` (text → JSON array of ids) and `beamserve detokenize` (ids → text, printed
// exactly, no newline added), with the model directory's tokenizer.json.
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_path.h"
#include "cli/usage.h"
#include "text/tokenizer.h"

namespace beam::cli {
namespace {

int fail(const char* command, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", command, message.c_str());
  return 1;
}

Expected<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("cannot open " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Expected<text::Tokenizer> load_tokenizer(const Args& args) {
  BEAM_ASSIGN_OR_RETURN(std::string dir, resolve_model_dir(args.get("model")));
  return text::Tokenizer::load(dir);
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"model", "text", "file"}, {"special"});
  if (!args.ok() || args->has("text") == args->has("file")) {
    std::fprintf(stderr, "tokenize: %s\n%s",
                 args.ok() ? "give exactly one of --text and --file" : args.error().message.c_str(),
                 kTokenizeUsage);
    return 2;
  }
  std::string input;
  if (args->has("text")) {
    input = *args->get("text");
  } else {
    auto file = read_text_file(*args->get("file"));
    if (!file.ok()) return fail("tokenize", file.error().message);
    input = std::move(file).value();
  }
  auto tokenizer = load_tokenizer(*args);
  if (!tokenizer.ok()) return fail("tokenize", tokenizer.error().message);
  // --special: special-token text in the input becomes control tokens.
  auto ids = tokenizer->encode(input, /*allow_special=*/args->has("special"));
  if (!ids.ok()) return fail("tokenize", ids.error().message);
  std::string out = "[";
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i) out += ',';
    out += std::to_string((*ids)[i]);
  }
  out += "]\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"model", "ids"}, {"skip-special"});
  if (!args.ok() || !args->has("ids")) {
    std::fprintf(stderr, "detokenize: %s\n%s",
                 args.ok() ? "--ids is required" : args.error().message.c_str(), kDetokenizeUsage);
    return 2;
  }
  auto list = Args::parse_int_list("ids", *args->get("ids"));
  if (!list.ok()) return fail("detokenize", list.error().message);
  std::vector<text::TokenId> ids;
  for (int64_t v : *list) {
    if (v < 0 || v > INT32_MAX) return fail("detokenize", "token id " + std::to_string(v) + " is out of range");
    ids.push_back(static_cast<text::TokenId>(v));
  }
  auto tokenizer = load_tokenizer(*args);
  if (!tokenizer.ok()) return fail("detokenize", tokenizer.error().message);
  auto text = tokenizer->decode(ids, /*skip_special=*/args->has("skip-special"));
  if (!text.ok()) return fail("detokenize", text.error().message);
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace beam::cli
