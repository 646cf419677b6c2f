// The `beamserve bench` subcommands other than offline (dispatched from cmd_bench.cpp); argv holds
// the arguments after the subcommand name.
#pragma once

namespace beam::cli {

int bench_step(int argc, char** argv);
int bench_kernels(int argc, char** argv);
int bench_serve(int argc, char** argv);

}  // namespace beam::cli
