// LoraRegistry: a name map under a mutex; LoraSlotTable: empty slots first, then LRU eviction of
// adapters no running sequence uses.
#include "runtime/lora_registry.h"

namespace beam {

Status LoraRegistry::add(const std::string& name, std::shared_ptr<const LoraAdapter> adapter,
                         bool replace, bool pinned) {
  if (name.empty()) return make_error("lora_name: must not be empty");
  std::lock_guard<std::mutex> lock(mu_);
  const bool loaded = by_name_.contains(name);
  if (!replace && loaded)
    return make_error("a LoRA adapter named '" + name +
                      "' is already loaded (load_inplace replaces it)");
  if (!loaded && capacity_ > 0 && by_name_.size() >= static_cast<size_t>(capacity_))
    return make_error("cannot load LoRA adapter '" + name + "': " + std::to_string(capacity_) +
                      " adapters are loaded, the most max_loaded_loras (--max-loaded-loras) "
                      "allows; unload one first");
  if (pinned) {
    std::string others;
    int count = 0;
    for (const auto& [n, e] : by_name_)
      if (e->pinned && n != name) others += (count++ ? ", " : "") + n;
    if (count >= max_pinned_)
      return make_error("cannot pin LoRA adapter '" + name + "': at most " +
                        std::to_string(max_pinned_) +
                        " adapters may be pinned (max_loras less one, so a slot stays for the "
                        "others)" +
                        (count > 0 ? "; pinned now: " + others : std::string()));
  }
  by_name_[name] =
      std::make_shared<LoraEntry>(LoraEntry{name, std::move(adapter), next_id_++, pinned});
  return ok_status();
}

std::string lora_not_loaded(const std::string& name) {
  return "no LoRA adapter named '" + name + "' is loaded";
}

Status LoraRegistry::remove(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  if (by_name_.erase(name) == 0) return make_error(lora_not_loaded(name));
  return ok_status();
}

Expected<std::shared_ptr<const LoraEntry>> LoraRegistry::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_name_.find(name);
  if (it == by_name_.end()) return make_error(lora_not_loaded(name));
  return it->second;
}

std::vector<std::shared_ptr<const LoraEntry>> LoraRegistry::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::shared_ptr<const LoraEntry>> out;
  for (const auto& [name, entry] : by_name_) out.push_back(entry);
  return out;
}

std::set<uint64_t> LoraRegistry::pinned_ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<uint64_t> out;
  for (const auto& [name, entry] : by_name_)
    if (entry->pinned) out.insert(entry->id);
  return out;
}

std::optional<int32_t> LoraSlotTable::find(uint64_t id, int64_t step) {
  for (size_t s = 0; s < slots_.size(); ++s)
    if (slots_[s].id() == id) {
      slots_[s].last_used = step;
      return static_cast<int32_t>(s);
    }
  return std::nullopt;
}

std::optional<int32_t> LoraSlotTable::victim(const std::set<uint64_t>& pinned) const {
  std::optional<int32_t> best;
  for (size_t s = 0; s < slots_.size(); ++s) {
    const Held& h = slots_[s];
    if (!h.entry) return static_cast<int32_t>(s);
    if (pinned.contains(h.id())) continue;
    if (!best || h.last_used < slots_[static_cast<size_t>(*best)].last_used)
      best = static_cast<int32_t>(s);
  }
  return best;
}

void LoraSlotTable::assign(int32_t slot, std::shared_ptr<const LoraEntry> entry, int64_t step) {
  slots_[static_cast<size_t>(slot)] = Held{std::move(entry), step};
}

std::vector<std::shared_ptr<const LoraEntry>> LoraSlotTable::held() const {
  std::vector<std::shared_ptr<const LoraEntry>> out;
  for (const Held& h : slots_) out.push_back(h.entry);
  return out;
}

}  // namespace beam
