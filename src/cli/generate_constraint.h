// `beamserve generate`'s output constraint flags (llama.cpp's CLI has the same): --grammar /
// --grammar-file (GBNF, or Lark when the text has no `::=`), --json-schema / --json-schema-file
// and --regex (the whole output matches). At most one; docs/structured_output.md.
#pragma once

#include <cstdint>
#include <memory>

#include "cli/args.h"
#include "core/status.h"
#include "runtime/structured/output_constraint.h"
#include "text/tokenizer.h"

namespace beam::cli {

// The flags generate_constraint reads.
inline constexpr const char* kConstraintFlags[] = {"grammar", "grammar-file", "json-schema",
                                                   "json-schema-file", "regex"};

// The constraint the flags ask for (null when none), over the tokenizer's text tokens; an error
// names the flag and the problem.
Expected<std::shared_ptr<const OutputConstraint>> generate_constraint(
    const Args& args, const text::Tokenizer& tokenizer, int64_t vocab_size);

// Whether any constraint flag is given (generate then needs the tokenizer).
bool has_constraint_flag(const Args& args);

}  // namespace beam::cli
