// The beamserve subcommands; each lives in cmd_<name>.cpp and returns a process exit code.
#pragma once

namespace beam::cli {

// argv holds the arguments after the subcommand name.
int cmd_forward(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_chat_template(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_run_batch(int argc, char** argv);

}  // namespace beam::cli
