// `beamserve run-batch`: vLLM's run-batch. Serves the model in process (serve's flags, no port)
// and answers an OpenAI Batch API file: one request a line in, one answer a line out, in order
// (server/app/run_batch.h).
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/serve_options.h"
#include "cli/usage.h"
#include "core/logging.h"
#include "server/app/run_batch.h"

namespace beam::cli {
namespace {

int fail(const std::string& message, bool usage) {
  std::fprintf(stderr, "run-batch: %s\n%s", message.c_str(), usage ? kRunBatchUsage : "");
  return usage ? 2 : 1;
}

}  // namespace

int cmd_run_batch(int argc, char** argv) {
  // vLLM's short forms: -i / -o.
  std::vector<std::string> words(argv, argv + argc);
  for (std::string& w : words) {
    if (w == "-i") w = "--input-file";
    if (w == "-o") w = "--output-file";
  }
  std::vector<char*> word_ptrs;
  for (std::string& w : words) word_ptrs.push_back(w.data());
  auto args = parse_serve_args(argc, word_ptrs.data(),
                               {"input-file", "output-file", "max-in-flight"});
  if (!args.ok()) return fail(args.error().message, true);
  const std::string input = args->get_or("input-file", "");
  const std::string output = args->get_or("output-file", "");
  if (input.empty() || output.empty())
    return fail("--input-file (-i) and --output-file (-o) are required ('-': stdin / stdout)", true);
  auto in_flight = args->get_int("max-in-flight", 256);
  if (!in_flight.ok() || *in_flight < 1)
    return fail("--max-in-flight must be an integer >= 1", true);
  auto options = serve_options_from_args(*args);
  if (!options.ok()) return fail(options.error().message, true);
  options->listen = false;

  std::ifstream in_file;
  if (input != "-") {
    in_file.open(input);
    if (!in_file) return fail("cannot read --input-file " + input, false);
  }
  std::ofstream out_file;
  if (output != "-") {
    out_file.open(output);
    if (!out_file) return fail("cannot write --output-file " + output, false);
  }
  auto app = server::ServerApp::start(*options);
  if (!app.ok()) return fail(app.error().message, false);
  if (Status loaded = (*app)->wait_loaded(); !loaded.ok())
    return fail(loaded.error().message, false);
  auto counts = server::run_batch(**app, input == "-" ? std::cin : in_file,
                                  output == "-" ? std::cout : out_file, *in_flight);
  if (!counts.ok()) return fail(counts.error().message, false);
  log_info("run-batch: " + std::to_string(counts->lines) + " requests, " +
           std::to_string(counts->ok) + " answered, " + std::to_string(counts->failed) + " failed");
  return 0;
}

}  // namespace beam::cli
