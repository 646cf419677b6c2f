#include "cli/generate_constraint.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "runtime/structured/json_grammar.h"
#include "server/api/response_format.h"

namespace beam::cli {
namespace {

Expected<std::string> read_text_file(const std::string& flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("--" + flag + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The flag's text: its value, or for a -file flag the file's contents.
Expected<std::string> flag_text(const Args& args, const std::string& flag) {
  const std::string value = *args.get(flag);
  if (flag.size() > 5 && flag.ends_with("-file")) return read_text_file(flag, value);
  return value;
}

}  // namespace

bool has_constraint_flag(const Args& args) {
  for (const char* flag : kConstraintFlags)
    if (args.has(flag)) return true;
  return false;
}

Expected<std::shared_ptr<const OutputConstraint>> generate_constraint(
    const Args& args, const text::Tokenizer& tokenizer, int64_t vocab_size) {
  std::string flag;
  for (const char* f : kConstraintFlags) {
    if (!args.has(f)) continue;
    if (!flag.empty()) return make_error("--" + flag + " and --" + f + ": give one constraint");
    flag = f;
  }
  if (flag.empty()) return std::shared_ptr<const OutputConstraint>();
  BEAM_ASSIGN_OR_RETURN(std::string text, flag_text(args, flag));
  auto c = std::make_shared<OutputConstraint>();
  if (flag.starts_with("grammar")) {
    auto g = EbnfGrammar::compile_gbnf_or_lark(text);
    if (!g.ok()) return make_error("--" + flag + ": " + g.error().message);
    c->ebnf = *g;
  } else if (flag.starts_with("json-schema")) {
    const auto schema = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (schema.is_discarded()) return make_error("--" + flag + ": the schema is not valid JSON");
    auto g = JsonGrammar::from_schema(schema);
    if (!g.ok()) return make_error("--" + flag + ": " + g.error().message);
    c->grammar = *g;
  } else {
    auto dfa = ByteDfa::from_full_match(text);
    if (!dfa.ok()) return make_error("--" + flag + ": " + dfa.error().message);
    c->regex = *dfa;
  }
  c->vocab = server::build_structured_vocab(tokenizer, vocab_size);
  c->hidden_tokens =
      server::hidden_special_tokens(tokenizer, /*skip_special=*/true, {});  // as printed
  return std::shared_ptr<const OutputConstraint>(std::move(c));
}

}  // namespace beam::cli
