// beamserve entry point: dispatches to a subcommand. Environment variables are read only in cli/.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/usage.h"
#include "core/version.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* help;
  const char* usage;  // cli/usage.h; nullptr: the command answers --help itself
};

constexpr Command kCommands[] = {
    {"forward", beam::cli::cmd_forward, "run a forward pass and write fp32 logits (.npy)",
     beam::cli::kForwardUsage},
    {"generate", beam::cli::cmd_generate,
     "generate tokens from a prompt (default model: beam-nano)", beam::cli::kGenerateUsage},
    {"inspect", beam::cli::cmd_inspect, "summarise a model: parameters, bytes, KV, memory plan",
     beam::cli::kInspectUsage},
    {"tokenize", beam::cli::cmd_tokenize, "print the token ids of a text as a JSON array",
     beam::cli::kTokenizeUsage},
    {"detokenize", beam::cli::cmd_detokenize, "print the text of comma-separated token ids",
     beam::cli::kDetokenizeUsage},
    {"chat-template", beam::cli::cmd_chat_template,
     "render a model's chat template for a conversation", beam::cli::kChatTemplateUsage},
    {"serve", beam::cli::cmd_serve,
     "OpenAI/Anthropic-compatible HTTP server (default 127.0.0.1:8000)", beam::cli::kServeUsage},
    {"run-batch", beam::cli::cmd_run_batch,
     "answer an OpenAI batch file (JSONL) in process, as vLLM's run-batch", beam::cli::kRunBatchUsage},
    {"bench", beam::cli::cmd_bench, "benchmarks: offline (engine workloads), step, kernels, serve",
     nullptr},  // answers --help itself (each benchmark's flags)
    {"help", nullptr, "print this list (`beamserve <command> --help`: that command's flags)",
     nullptr},
    {"version", nullptr, "print the version (also --version)", nullptr},
};

int usage(FILE* out) {
  std::fprintf(out, "usage: beamserve <command> [flags]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.help);
  return out == stderr ? 2 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string_view name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") return usage(stdout);
  if (name == "--version" || name == "version") {
    std::printf("beamserve %s\n", beam::kVersion);
    return 0;
  }
  for (const auto& c : kCommands) {
    if (name != c.name || c.run == nullptr) continue;
    if (c.usage != nullptr && beam::cli::Args::wants_help(argc - 2, argv + 2)) {
      std::fputs(c.usage, stdout);
      return 0;
    }
    return c.run(argc - 2, argv + 2);
  }
  std::fprintf(stderr, "beamserve: unknown command '%s'\n", argv[1]);
  return usage(stderr);
}
