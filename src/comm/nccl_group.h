// NcclGroup: ranks on the GPUs of this process, one thread each, whose collectives NCCL queues on
// each rank's stream. NCCL is loaded at run time (dlopen of libnccl.so.2), so the binary starts
// and serves one GPU without it; the GPU machine's copy comes with PyTorch (the nvidia-nccl
// package's lib/ on LD_LIBRARY_PATH). CUDA builds only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "core/status.h"

namespace beam {

class NcclGroup final : public CommGroup {
 public:
  // Communicators for GPUs first_gpu..first_gpu+size-1 (ncclCommInitAll), rank r on
  // first_gpu + r; the calling thread's current device is kept. Errors: NCCL not found (the
  // message says where it is looked for), too few GPUs, an NCCL failure.
  static Expected<std::unique_ptr<NcclGroup>> create(int size, int first_gpu = 0);
  ~NcclGroup() override;
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  int size() const override;
  Communicator& rank(int r) override;
  // Rank r's collectives go to `stream` (a cudaStream_t of its GPU); before its first collective.
  void bind_stream(int r, void* stream);

  // ncclCommAbort on every communicator: collectives in flight return (their results undefined)
  // so no stream waits forever for a rank that failed; later collectives are skipped.
  void abort(std::string why) override;
  bool aborted() const override;
  // New communicators (the aborted ones destroyed), streams kept.
  Status reset() override;

 private:
  struct Impl;
  explicit NcclGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace beam
