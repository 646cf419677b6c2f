// Structural tags (vLLM's and SGLang's `structural_tag`, after xgrammar): free text mixed with
// constrained pieces, such as tool calls whose arguments match a JSON schema, compiled into one
// EbnfGrammar the whole output must match, so masks, the matcher and the caches are a grammar's.
// docs/structured_output.md ("Structural tags") gives the formats, their semantics and limits.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "runtime/structured/ebnf_grammar.h"

namespace beam {

// Compiles a structural tag in either shape (structural_tag_format.h). An error names the field
// by its path inside the tag, or says which grammar limit (ebnf_grammar.h) it passes.
Expected<std::shared_ptr<const EbnfGrammar>> compile_structural_tag(
    const nlohmann::ordered_json& tag);

}  // namespace beam
