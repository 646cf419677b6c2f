// JobRegistry (see job_registry.h).
#include "server/generation/job_registry.h"

#include <vector>

#include "server/generation/generation_job.h"

namespace beam::server {

void JobRegistry::add(const std::string& rid, const std::shared_ptr<GenerationJob>& job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.emplace(rid, job);
}

void JobRegistry::remove(const std::string& rid, const GenerationJob* job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [begin, end] = jobs_.equal_range(rid);
  for (auto it = begin; it != end; ++it) {
    const std::shared_ptr<GenerationJob> live = it->second.lock();
    if (!live || live.get() == job) {
      jobs_.erase(it);
      return;
    }
  }
}

int64_t JobRegistry::abort(const std::string& rid) {
  std::vector<std::shared_ptr<GenerationJob>> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [begin, end] = jobs_.equal_range(rid);
    for (auto it = begin; it != end; ++it)
      if (auto job = it->second.lock()) found.push_back(std::move(job));
  }
  for (const auto& job : found) job->cancel();  // outside the lock: cancel reaches the engine
  return static_cast<int64_t>(found.size());
}

int64_t JobRegistry::abort_all() {
  std::vector<std::shared_ptr<GenerationJob>> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [rid, weak] : jobs_)
      if (auto job = weak.lock()) found.push_back(std::move(job));
  }
  for (const auto& job : found) job->cancel();
  return static_cast<int64_t>(found.size());
}

}  // namespace beam::server
