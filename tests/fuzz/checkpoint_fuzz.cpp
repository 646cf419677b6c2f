// libFuzzer target for what a model folder gives the loader before any tensor is read: the first
// input byte picks what the rest is:
//   0: a config.json (parse_beam_config); a config it accepts then goes through everything
//      computed from a config alone: parameter counts, weight bytes, memory plans for 1-8 GPUs,
//      config_difference;
//   1: a safetensors file (read_safetensors, over a copy of the bytes in memory).
// Either gives a value or an error; any crash, sanitizer report (an int64 overflow in a count is
// one) or leak is a bug. Built with clang -fsanitize=fuzzer,address,undefined.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "model/config.h"
#include "model/mapped_file.h"
#include "model/memory_plan.h"
#include "model/param_count.h"
#include "model/safetensors.h"

namespace {

void fuzz_config(const std::string& text) {
  beam::Expected<beam::BeamConfig> config = beam::parse_beam_config(text, "config.json");
  if (!config.ok()) return;
  (void)beam::count_params(*config).active();
  (void)beam::weight_bytes(*config).total();
  for (int64_t gpus : {1, 8}) {
    beam::MemoryPlanOptions options;
    options.gpu_memory_bytes = int64_t{141} << 30;
    options.num_gpus = gpus;
    (void)beam::plan_memory(*config, options);
  }
  (void)beam::config_difference(*config, *config);
}

// The bytes as a file (MappedFile reads files): one path per fuzzing process, rewritten each time.
void fuzz_safetensors(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/beamserve-checkpoint-fuzz-" + std::to_string(getpid());
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return;
  const bool written = std::fwrite(data, 1, size, f) == size;
  std::fclose(f);
  if (!written) return;
  auto file = beam::MappedFile::copy_of(path);
  if (!file.ok()) return;
  auto tensors = beam::read_safetensors(**file);
  if (!tensors.ok()) return;
  for (const beam::RawTensor& t : *tensors) (void)t.nbytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t* rest = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 2) {
    case 0:
      fuzz_config(std::string(reinterpret_cast<const char*>(rest), n));
      break;
    case 1:
      fuzz_safetensors(rest, n);
      break;
  }
  return 0;
}
