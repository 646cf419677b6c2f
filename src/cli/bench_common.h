// Shared by `bench step|kernels|serve`: the synthetic-model flags (beam-slice), the device a
// benchmark runs on, and the JSON report header (date, commit, GPU, command) and output.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "cli/args.h"
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/api/context.h"
#include "model/config.h"
#include "model/weights.h"
#include "runtime/bench/offline_bench.h"

namespace beam::cli {

// The flags every GPU benchmark accepts (add the command's own to these), and the valueless ones
// (--no-cuda-graphs: decode steps run eagerly instead of replaying CUDA graphs).
std::set<std::string> bench_common_flags();
std::set<std::string> bench_common_bool_flags();

// A kernel context on --device with its CUDA context and CPU pool (--threads, 0 = all cores).
struct BenchDevice {
  std::shared_ptr<CudaContext> cuda;
  std::unique_ptr<ThreadPool> pool;
  KernelContext ctx;
};
Expected<std::unique_ptr<BenchDevice>> open_bench_device(const Args& args);

// The config of --config DIR (default models/beam-1.0-config) cut to --layers (default
// `default_layers`) with --dense-layers leading dense layers (default 1).
Expected<BeamConfig> slice_config_from_args(const Args& args, int64_t default_layers);

// Random weights for `config` generated on ctx's device (--weight-seed); logs size and time.
Expected<std::shared_ptr<BeamWeights>> synthetic_weights_from_args(const Args& args,
                                                                   const KernelContext& ctx,
                                                                   const BeamConfig& config);

// {"benchmark", "date" (UTC), "commit" (--commit, else $BEAMSERVE_COMMIT, else "unknown"),
//  "device", "command", "model": {...}} for the report of one run.
nlohmann::json report_header(const std::string& benchmark, const Args& args,
                             const KernelContext& ctx, const BeamConfig& config,
                             const std::string& command);

// The figures of one offline-bench run (requests, tokens, throughput, TTFT/ITL, prefix hits).
nlohmann::json bench_result_json(const BenchResult& r);

// Prints the report (indented) and writes it to --json FILE when given; the exit code.
int emit_report(const nlohmann::json& report, const Args& args);

// "beamserve bench <argv...>" for the report.
std::string command_line(const std::string& benchmark, int argc, char** argv);

int bench_fail(const std::string& message);

}  // namespace beam::cli
