// The drafter context's pages: the pool's buffers and free list, a sequence's page table.
#include "model/dflash2/dflash2_context.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"

namespace beam {

namespace {

constexpr int64_t kPage = DFlash2ContextPool::kPageSize;

int64_t width_of(const DFlash2Config& c) {
  return c.num_kv_heads * c.head_dim;
}

}  // namespace

int64_t DFlash2ContextPool::page_bytes(const DFlash2Config& c) {
  return kPage * (2 * c.num_layers * width_of(c) * 2 + 8);
}

int64_t DFlash2ContextPool::ring_pages(const DFlash2Config& c) {
  return c.sliding_window > 0 ? (c.sliding_window + c.block_size + kPage - 1) / kPage + 1 : 0;
}

int64_t DFlash2ContextPool::pages_for(const DFlash2Config& c, int64_t tokens) {
  const int64_t pages = (tokens + kPage - 1) / kPage, ring = ring_pages(c);
  return ring > 0 ? std::min(ring, pages + 1) : pages;
}

DFlash2ContextPool::DFlash2ContextPool(const KernelContext& ctx, const DFlash2Config& config,
                                       int64_t pages)
    : ctx_(ctx),
      config_(config),
      total_pages_(pages),
      slots_(pages * kPage),
      width_(width_of(config)) {}

Expected<std::shared_ptr<DFlash2ContextPool>> DFlash2ContextPool::create(
    const KernelContext& ctx, const DFlash2Config& config, int64_t pages) {
  BEAM_CHECK(pages > 0 && pages < (int64_t{1} << 31) / kPage)
      << "DFlash2 context pool: " << pages << " pages";
  std::shared_ptr<DFlash2ContextPool> pool(new DFlash2ContextPool(ctx, config, pages));
  BEAM_RETURN_IF_ERROR(pool->allocate());
  // Taken from the back: page 0 first.
  pool->free_.resize(static_cast<size_t>(pages));
  std::iota(pool->free_.rbegin(), pool->free_.rend(), 0);
  return pool;
}

Status DFlash2ContextPool::allocate() {
  const size_t kv_bytes =
      static_cast<size_t>(config_.num_layers * slots_ * width_) * sizeof(uint16_t);
  auto fail = [&](const Error& e) {
    keys_ = values_ = DeviceBuffer();
    return make_error("the DFlash2 drafter's context pool (" + std::to_string(total_pages_) +
                      " pages of " + std::to_string(kPage) + " positions, " +
                      std::to_string(total_pages_ * page_bytes(config_) >> 20) +
                      " MiB): " + e.message);
  };
  Expected<DeviceBuffer> keys = allocate_buffer(ctx_, kv_bytes);
  if (!keys.ok()) return fail(keys.error());
  Expected<DeviceBuffer> values = allocate_buffer(ctx_, kv_bytes);
  if (!values.ok()) return fail(values.error());
  Expected<MetadataBuffer> positions =
      allocate_metadata(ctx_, static_cast<size_t>(slots_) * sizeof(int64_t));
  if (!positions.ok()) return fail(positions.error());
  keys_ = std::move(keys).value();
  values_ = std::move(values).value();
  positions_ = std::move(positions).value();
  std::fill_n(host_positions(), slots_, int64_t{-1});
  upload_metadata(ctx_, positions_, 0, positions_.nbytes());
  return ok_status();
}

int64_t DFlash2ContextPool::release(int32_t kept) {
  BEAM_CHECK(free_pages() + (kept >= 0 ? 1 : 0) == total_pages_)
      << "DFlash2ContextPool::release: " << total_pages_ - free_pages() << " pages held";
  if (released()) return 0;
  synchronize(ctx_);  // work that reads them
  const int64_t bytes = static_cast<int64_t>(keys_.nbytes() + values_.nbytes() +
                                             positions_.nbytes());
  keys_ = values_ = DeviceBuffer();
  positions_ = MetadataBuffer();
  return bytes;
}

Status DFlash2ContextPool::restore() { return released() ? allocate() : ok_status(); }

int32_t DFlash2ContextPool::take_page() {
  if (free_.empty() || released()) return -1;
  const int32_t page = free_.back();
  free_.pop_back();
  std::fill_n(host_positions() + int64_t{page} * kPage, kPage, int64_t{-1});
  upload_positions(page);
  return page;
}

void DFlash2ContextPool::give_back(int32_t page) {
  free_.push_back(page);
}

void DFlash2ContextPool::upload_positions(int32_t page) {
  upload_metadata(ctx_, positions_, static_cast<size_t>(page) * kPage * sizeof(int64_t),
                  kPage * sizeof(int64_t));
}

void DFlash2ContextPool::copy_page(int32_t dst, int32_t src) {
  const size_t row = static_cast<size_t>(kPage * width_) * sizeof(uint16_t);
  const size_t pitch = static_cast<size_t>(slots_ * width_) * sizeof(uint16_t);
  for (const DeviceBuffer* b : {&keys_, &values_}) {
    char* base = static_cast<char*>(b->data());
    copy_rows(ctx_,
              PitchedRows{base + dst * row, b->device(), pitch, row,
                          static_cast<size_t>(config_.num_layers)},
              PitchedRows{base + src * row, b->device(), pitch, row,
                          static_cast<size_t>(config_.num_layers)});
  }
  std::copy_n(host_positions() + int64_t{src} * kPage, kPage,
              host_positions() + int64_t{dst} * kPage);
  upload_positions(dst);
}

TensorView DFlash2ContextPool::layer_view(const DeviceBuffer& b, int64_t layer) const {
  const int64_t n = slots_ * width_;
  return TensorView{static_cast<uint16_t*>(b.data()) + layer * n, DType::kBF16,
                    Shape{slots_, config_.num_kv_heads, config_.head_dim}, b.device()};
}

TensorView DFlash2ContextPool::keys(int64_t layer) const {
  return layer_view(keys_, layer);
}
TensorView DFlash2ContextPool::values(int64_t layer) const {
  return layer_view(values_, layer);
}
TensorView DFlash2ContextPool::slot_positions() const {
  return positions_.device_view(0, DType::kI64, Shape{slots_});
}

DFlash2Context::DFlash2Context(std::shared_ptr<DFlash2ContextPool> pool) : pool_(std::move(pool)) {}

DFlash2Context::~DFlash2Context() {
  for (int32_t page : table_)
    if (page >= 0) pool_->give_back(page);
}

std::shared_ptr<DFlash2Context> DFlash2Context::clone() const {
  auto copy = std::make_shared<DFlash2Context>(pool_);
  copy->table_.assign(table_.size(), -1);
  for (size_t i = 0; i < table_.size(); ++i) {
    if (table_[i] < 0) continue;
    const int32_t page = pool_->take_page();
    if (page < 0) break;  // the rest stays absent
    pool_->copy_page(page, table_[i]);
    copy->table_[i] = page;
  }
  return copy;
}

int64_t DFlash2Context::page_index(int64_t pos) const {
  const int64_t ring = DFlash2ContextPool::ring_pages(pool_->config());
  return ring > 0 ? (pos / kPage) % ring : pos / kPage;
}

int64_t DFlash2Context::slot(int64_t pos) {
  const size_t i = static_cast<size_t>(page_index(pos));
  if (i >= table_.size()) table_.resize(i + 1, -1);
  if (table_[i] < 0) table_[i] = pool_->take_page();
  return table_[i] < 0 ? -1 : int64_t{table_[i]} * kPage + pos % kPage;
}

int64_t DFlash2Context::find(int64_t pos) const {
  const size_t i = static_cast<size_t>(page_index(pos));
  if (i >= table_.size() || table_[i] < 0) return -1;
  const int64_t s = int64_t{table_[i]} * kPage + pos % kPage;
  return pool_->position(s) == pos ? s : -1;
}

void DFlash2Context::truncate(int64_t pos) {
  for (int32_t page : table_) {
    if (page < 0) continue;
    bool changed = false;
    for (int64_t s = int64_t{page} * kPage; s < (int64_t{page} + 1) * kPage; ++s)
      if (pool_->position(s) >= pos) {
        pool_->set_position(s, -1);
        changed = true;
      }
    if (changed) pool_->upload_positions(page);
  }
}

bool DFlash2Context::holds_before(int64_t pos) const {
  for (int32_t page : table_) {
    if (page < 0) continue;
    for (int64_t s = int64_t{page} * kPage; s < (int64_t{page} + 1) * kPage; ++s)
      if (const int64_t p = pool_->position(s); p >= 0 && p < pos) return true;
  }
  return false;
}

int64_t DFlash2Context::bytes() const {
  const auto held = std::count_if(table_.begin(), table_.end(), [](int32_t p) { return p >= 0; });
  return static_cast<int64_t>(held) * DFlash2ContextPool::page_bytes(pool_->config());
}

}  // namespace beam
