// `beamserve serve`'s flags (model, engine and server settings), shared with `beamserve
// run-batch`, which serves the same model without listening.
#pragma once

#include <string>

#include "cli/args.h"
#include "server/app/server_app.h"

namespace beam::cli {

// Parses argv with serve's flags plus `extra_flags` (flags that take a value) and
// `extra_switches`.
Expected<Args> parse_serve_args(int argc, char** argv, std::set<std::string> extra_flags = {},
                                std::set<std::string> extra_switches = {});

// The ServeOptions the parsed flags name; errors name the flag.
Expected<server::ServeOptions> serve_options_from_args(const Args& a);

}  // namespace beam::cli
