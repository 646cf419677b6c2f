// libFuzzer target for what a model folder gives the loader before any tensor is read: the first
// input byte picks what the rest is:
//   0: a config.json (parse_beam_config); a config it accepts then goes through everything
//      computed from a config alone: parameter counts, weight bytes, memory plans for 1-8 GPUs,
//      config_difference;
//   1: a safetensors file (read_safetensors, over a copy of the bytes in memory);
//   2: a PEFT LoRA adapter folder: the text up to the first NUL as adapter_config.json, the rest
//      as adapter_model.safetensors (LoraAdapter::open, then each delta's factors widened).
// Each gives a value or an error; any crash, sanitizer report (an int64 overflow in a count is
// one) or leak is a bug. Built with clang -fsanitize=fuzzer,address,undefined.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "model/config.h"
#include "model/lora_adapter.h"
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

// This fuzzing process's own folder for the files the loaders read.
const std::string& work_dir() {
  static const std::string dir = [] {
    std::string d = "/tmp/beamserve-checkpoint-fuzz-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

bool write_file(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool written = std::fwrite(data, 1, size, f) == size;
  std::fclose(f);
  return written;
}

void fuzz_safetensors(const uint8_t* data, size_t size) {
  const std::string path = work_dir() + "/model.safetensors";
  if (!write_file(path, data, size)) return;
  auto file = beam::MappedFile::copy_of(path);
  if (!file.ok()) return;
  auto tensors = beam::read_safetensors(**file);
  if (!tensors.ok()) return;
  for (const beam::RawTensor& t : *tensors) (void)t.nbytes;
}

void fuzz_lora_adapter(const uint8_t* data, size_t size) {
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const uint8_t* end = data + size;
  const uint8_t* config_end = nul == nullptr ? end : nul;
  const uint8_t* tensors = nul == nullptr ? end : nul + 1;
  if (!write_file(work_dir() + "/adapter_config.json", data,
                  static_cast<size_t>(config_end - data)) ||
      !write_file(work_dir() + "/adapter_model.safetensors", tensors,
                  static_cast<size_t>(end - tensors)))
    return;
  auto adapter = beam::LoraAdapter::open(work_dir());
  if (!adapter.ok()) return;
  for (const auto& [name, delta] : (*adapter)->deltas()) {
    const beam::LoraFactors factors(delta);
    (void)factors.rank;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t* rest = data + 1;
  const size_t n = size - 1;
  switch (data[0] % 3) {
    case 0:
      fuzz_config(std::string(reinterpret_cast<const char*>(rest), n));
      break;
    case 1:
      fuzz_safetensors(rest, n);
      break;
    case 2:
      fuzz_lora_adapter(rest, n);
      break;
  }
  return 0;
}
