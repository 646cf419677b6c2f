// DFlash2ContextPool / DFlash2Context: the drafter's context K/V (docs/dflash2.md step 2) in pages
// of a pool on the drafter's device, and one sequence's page table over it (a ring of pages when
// the drafter has a sliding window).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "kernels/api/device_memory.h"
#include "model/dflash2/dflash2_config.h"

namespace beam {

// Every drafter layer's K and V rows ([layers, pages * page_size, Nkv * D] bf16 each) and the
// position each slot holds ([pages * page_size] i64, -1: none; a host mirror the host reads and
// writes, and its device copy that kernels read). Pages are taken and given back by contexts.
// Single-threaded: the engine's loop.
class DFlash2ContextPool {
 public:
  static constexpr int64_t kPageSize = 16;

  // `pages` pages on ctx's device; an error naming the bytes when they do not fit.
  static Expected<std::shared_ptr<DFlash2ContextPool>> create(const KernelContext& ctx,
                                                              const DFlash2Config& config,
                                                              int64_t pages);
  // Bytes of one page (K and V of every layer, its positions).
  static int64_t page_bytes(const DFlash2Config& config);
  // The pages a ring holds: enough for sliding_window + block_size positions anywhere in
  // a page; 0 without a window (a table then grows with its sequence).
  static int64_t ring_pages(const DFlash2Config& config);
  // The most pages one sequence of `tokens` positions holds.
  static int64_t pages_for(const DFlash2Config& config, int64_t tokens);

  const DFlash2Config& config() const { return config_; }
  const KernelContext& context() const { return ctx_; }
  int64_t total_pages() const { return total_pages_; }
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }

  // A free page, its slots emptied (on the device too); -1 when none is left or the memory is
  // released.
  int32_t take_page();
  // Sleep mode: frees the K / V and positions memory; every page but `kept` (the drafter's) must
  // be free. Returns the bytes freed. restore() allocates them again, every slot empty.
  int64_t release(int32_t kept);
  Status restore();
  bool released() const { return keys_.data() == nullptr; }
  void give_back(int32_t page);
  // The position `slot` holds (host mirror), -1 when none.
  int64_t position(int64_t slot) const { return host_positions()[slot]; }
  // Sets the host mirror only: the writer of the slot's K/V (dflash2_store_context) records the
  // position on the device.
  void set_position(int64_t slot, int64_t pos) { host_positions()[slot] = pos; }
  // Queues the host mirror of `page`'s positions to the device.
  void upload_positions(int32_t page);
  // Copies page src's K, V (every layer) and positions into page dst, queued on the stream.
  void copy_page(int32_t dst, int32_t src);

  // Layer l's K or V: [pages * page_size, Nkv, D] bf16 on the device.
  TensorView keys(int64_t layer) const;
  TensorView values(int64_t layer) const;
  // [pages * page_size] i64 on the device.
  TensorView slot_positions() const;

 private:
  DFlash2ContextPool(const KernelContext& ctx, const DFlash2Config& config, int64_t pages);
  // Allocates keys_, values_ and positions_ (every slot empty).
  Status allocate();
  int64_t* host_positions() const { return static_cast<int64_t*>(positions_.host()); }
  TensorView layer_view(const DeviceBuffer& b, int64_t layer) const;

  KernelContext ctx_;
  DFlash2Config config_;
  int64_t total_pages_ = 0, slots_ = 0, width_ = 0;
  DeviceBuffer keys_, values_;  // [layers, slots, width]
  MetadataBuffer positions_;    // [slots] i64
  std::vector<int32_t> free_;
};

// One sequence's drafter context: position p lives in page table[(p / page_size) % ring] (no
// ring: table[p / page_size]), slot page * page_size + p % page_size, held while that slot records
// p. With a window the ring keeps at least the last sliding_window + block_size positions.
// Positions never added (a prefix-cache hit's) or that found no free page are absent; the
// attention skips them. Gives its pages back when destroyed.
class DFlash2Context {
 public:
  explicit DFlash2Context(std::shared_ptr<DFlash2ContextPool> pool);
  ~DFlash2Context();
  DFlash2Context(const DFlash2Context&) = delete;
  DFlash2Context& operator=(const DFlash2Context&) = delete;

  // A copy in pages of its own (queued on the pool's stream); positions whose page found no
  // free one are absent from it.
  std::shared_ptr<DFlash2Context> clone() const;
  // The slot for position `pos`, taking a page when its table entry has none; -1 when the pool
  // has no page left. The caller then writes the slot (and its position) before it is read.
  int64_t slot(int64_t pos);
  // The slot holding `pos`, -1 when it is not held.
  int64_t find(int64_t pos) const;
  // Forgets every position at or after `pos` (on the device too).
  void truncate(int64_t pos);
  // Whether it holds some position before `pos`.
  bool holds_before(int64_t pos) const;
  // Pool bytes its pages take.
  int64_t bytes() const;
  // The page table: -1 where no page is held.
  std::span<const int32_t> table() const { return table_; }
  DFlash2ContextPool& pool() const { return *pool_; }

 private:
  int64_t page_index(int64_t pos) const;

  std::shared_ptr<DFlash2ContextPool> pool_;
  std::vector<int32_t> table_;
};

}  // namespace beam
