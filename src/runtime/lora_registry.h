// LoRA adapters served per request (multi-LoRA): the adapters loaded by name (LoraRegistry, any
// thread) and which of the model's slots holds which adapter (LoraSlotTable, the engine thread).
// More adapters may be loaded than there are slots: a slot is given to a waiting request's
// adapter when it is free or its adapter is not used by a running sequence (least recently used
// first), as vLLM's --max-loras / SGLang's --max-loras-per-batch. A pinned adapter (SGLang's
// pinned) keeps its slot once it has one, until it is unloaded or replaced.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"
#include "model/lora_adapter.h"

namespace beam {

// One loaded adapter. id is unique over the engine's life (a name loaded again gets a new one),
// so prefixes cached under one adapter never serve another.
struct LoraEntry {
  std::string name;
  std::shared_ptr<const LoraAdapter> adapter;
  uint64_t id = 0;
  bool pinned = false;  // never leaves its slot for another adapter while loaded
};

// Adapters by name; every method may be called from any thread.
// The error LoraRegistry::find and ::remove give when no adapter is loaded as `name` (callers
// tell it from others: the server answers it with a 404).
std::string lora_not_loaded(const std::string& name);

class LoraRegistry {
 public:
  // capacity: the most adapters loaded at once (SGLang's --max-loaded-loras); 0: any number.
  // max_pinned: the most pinned at once (the slots less one, so unpinned adapters still run).
  explicit LoraRegistry(int capacity = 0, int max_pinned = 0)
      : capacity_(capacity), max_pinned_(max_pinned) {}

  // Errors: an empty name, one already loaded unless `replace` (vLLM's load_inplace: the name
  // then means the new adapter, with a new id; requests holding the old one finish with it), a
  // new name when `capacity` adapters are loaded, or `pinned` when max_pinned others are.
  Status add(const std::string& name, std::shared_ptr<const LoraAdapter> adapter,
             bool replace = false, bool pinned = false);
  // Requests already holding the adapter finish with it; new ones cannot name it. Errors: no such
  // name.
  Status remove(const std::string& name);
  // The adapter loaded as `name`, or an error that says no such adapter is loaded.
  Expected<std::shared_ptr<const LoraEntry>> find(const std::string& name) const;
  // Every loaded adapter, by name.
  std::vector<std::shared_ptr<const LoraEntry>> list() const;
  // The ids of the pinned adapters loaded now.
  std::set<uint64_t> pinned_ids() const;

 private:
  const int capacity_;
  const int max_pinned_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const LoraEntry>> by_name_;
  uint64_t next_id_ = 1;
};

// Which adapter (LoraEntry::id) each model slot holds; the engine thread only.
class LoraSlotTable {
 public:
  explicit LoraSlotTable(int num_slots) : slots_(static_cast<size_t>(num_slots)) {}
  // The slot holding adapter id (and marks it used at `step`), if any.
  std::optional<int32_t> find(uint64_t id, int64_t step);
  // A slot adapter id may take: an empty one, else the least recently used one whose adapter is
  // not in `pinned` (the running sequences' adapters and the pinned ones); none when every slot's
  // adapter is in it. The caller loads the adapter into
  // it, then calls assign().
  std::optional<int32_t> victim(const std::set<uint64_t>& pinned) const;
  // slot now holds `entry`'s adapter (kept alive while it does: sleep mode loads it again).
  void assign(int32_t slot, std::shared_ptr<const LoraEntry> entry, int64_t step);
  // Forgets slot's adapter (its load failed: the slot is empty).
  void clear(int32_t slot) { slots_[static_cast<size_t>(slot)] = Held{}; }
  // Each slot's adapter (null: empty), by slot.
  std::vector<std::shared_ptr<const LoraEntry>> held() const;

 private:
  struct Held {
    std::shared_ptr<const LoraEntry> entry;  // null: empty
    int64_t last_used = -1;
    uint64_t id() const { return entry ? entry->id : 0; }
  };
  std::vector<Held> slots_;
};

}  // namespace beam
