// stream_pieces: chunks, a conversion pool and two groups of pinned staging slots.
#include "model/weight_stream.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/thread_pool.h"
#include "kernels/api/device_memory.h"
#include "model/tensor_convert.h"

namespace beam {
namespace {

constexpr size_t kChunkBytes = size_t{16} << 20;  // of converted (dst) bytes

// Elements [first, first + count) of a piece.
struct Chunk {
  const HostPiece* piece;
  int64_t first, count;

  size_t dst_bytes() const { return static_cast<size_t>(count) * dtype_size(piece->dst_dtype); }
  // Where the chunk's converted elements go.
  char* dst() const {
    return static_cast<char*>(piece->dst) + static_cast<size_t>(first) * dtype_size(piece->dst_dtype);
  }
};

// Writes a chunk's elements into out (dst_dtype elements): converted from src, or read from the
// piece's file (straight into out when the dtypes agree).
Status fill_chunk(const Chunk& c, void* out) {
  const HostPiece& p = *c.piece;
  const size_t src_elem = dtype_size(p.src_dtype);
  if (p.file == nullptr) {
    convert_elements(static_cast<const char*>(p.src) + c.first * src_elem, p.src_dtype, c.count,
                     out, p.dst_dtype);
    return ok_status();
  }
  const uint64_t at = p.file_offset + static_cast<uint64_t>(c.first) * src_elem;
  const size_t bytes = static_cast<size_t>(c.count) * src_elem;
  if (p.src_dtype == p.dst_dtype) return p.file->read_at(at, out, bytes);
  std::vector<uint8_t> raw(bytes);
  BEAM_RETURN_IF_ERROR(p.file->read_at(at, raw.data(), bytes));
  convert_elements(raw.data(), p.src_dtype, c.count, out, p.dst_dtype);
  return ok_status();
}

// The first error of chunks filled on several threads.
class FirstError {
 public:
  void note(Status st) {
    if (st.ok()) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (first_.ok()) first_ = std::move(st);
  }
  Status take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(first_);
  }

 private:
  std::mutex mu_;
  Status first_ = ok_status();
};

// Every piece split into chunks of at most kChunkBytes converted bytes.
std::vector<Chunk> chunks_of(std::span<const HostPiece> pieces) {
  std::vector<Chunk> chunks;
  for (const HostPiece& p : pieces) {
    const int64_t per_chunk = static_cast<int64_t>(kChunkBytes / dtype_size(p.dst_dtype));
    for (int64_t first = 0; first < p.numel; first += per_chunk)
      chunks.push_back({&p, first, std::min(per_chunk, p.numel - first)});
  }
  return chunks;
}

// Logs how far a long copy is every kEvery (a Beam 1.0 rank from a cold disk takes minutes);
// copies that finish sooner stay silent.
class Progress {
 public:
  explicit Progress(size_t total) : total_(total), start_(Clock::now()), last_(start_) {}
  void add(size_t bytes) {
    done_ += bytes;
    const Clock::time_point now = Clock::now();
    if (now - last_ < kEvery) return;
    last_ = now;
    char line[128];
    std::snprintf(line, sizeof(line), "weights: %.1f of %.1f GiB on the device (%.0f s)",
                  static_cast<double>(done_) / (1 << 30), static_cast<double>(total_) / (1 << 30),
                  std::chrono::duration<double>(now - start_).count());
    log_info(line);
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kEvery{10};
  size_t total_, done_ = 0;
  Clock::time_point start_, last_;
};

int pool_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
}

}  // namespace

Status stream_pieces(const KernelContext& ctx, std::span<const HostPiece> pieces) {
  const std::vector<Chunk> chunks = chunks_of(pieces);
  if (chunks.empty()) return ok_status();
  ThreadPool pool(pool_threads());
  if (ctx.device == Device::kCpu) {
    FirstError error;
    pool.parallel_for(static_cast<int64_t>(chunks.size()), 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) error.note(fill_chunk(chunks[i], chunks[i].dst()));
    });
    return error.take();
  }
  // Two groups of `group` slots: group g % 2 fills while the other's copies run. A slot holds
  // the largest chunk (small models pin little: cudaMallocHost's cost grows with the bytes).
  const int64_t group = std::min<int64_t>(pool.num_threads(), static_cast<int64_t>(chunks.size()));
  size_t slot_bytes = 0, total = 0;
  for (const Chunk& c : chunks) {
    slot_bytes = std::max(slot_bytes, c.dst_bytes());
    total += c.dst_bytes();
  }
  slot_bytes = (slot_bytes + 255) / 256 * 256;
  BEAM_ASSIGN_OR_RETURN(DeviceBuffer staging,
                        allocate_pinned_host(ctx, 2 * static_cast<size_t>(group) * slot_bytes));
  auto slot = [&](int64_t g, int64_t i) {
    return static_cast<char*>(staging.data()) + ((g % 2) * group + i) * slot_bytes;
  };
  const int64_t n = static_cast<int64_t>(chunks.size());
  Progress progress(total);
  for (int64_t g = 0; g * group < n; ++g) {
    const int64_t first = g * group, count = std::min(group, n - first);
    FirstError error;
    pool.parallel_for(count, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) error.note(fill_chunk(chunks[first + i], slot(g, i)));
    });
    synchronize(ctx);  // group g - 1's copies are done, so the next fill may reuse its slots
    if (Status st = error.take(); !st.ok()) return st;  // nothing of group g was queued
    for (int64_t i = 0; i < count; ++i) {
      const Chunk& c = chunks[first + i];
      const size_t bytes = c.dst_bytes();
      copy_rows_async(ctx, PitchedRows{c.dst(), ctx.device, bytes, bytes, 1},
                      PitchedRows{slot(g, i), Device::kCpu, bytes, bytes, 1});
      progress.add(bytes);
    }
  }
  synchronize(ctx);
  return ok_status();
}

}  // namespace beam
