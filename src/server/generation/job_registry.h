// JobRegistry: the generation jobs in progress by their request id (SGLang's rid; "" for jobs
// without one), so that POST /abort_request can end one request or all of them. Thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace beam::server {

class GenerationJob;

class JobRegistry {
 public:
  // Called once the job's engine request exists; remove() before the job completes.
  void add(const std::string& rid, const std::shared_ptr<GenerationJob>& job);
  void remove(const std::string& rid, const GenerationJob* job);
  // Cancels the jobs registered under rid (every job: abort_all); returns how many. Their
  // clients get what was generated so far, finish reason abort.
  int64_t abort(const std::string& rid);
  int64_t abort_all();

 private:
  std::mutex mu_;
  std::unordered_multimap<std::string, std::weak_ptr<GenerationJob>> jobs_;
};

}  // namespace beam::server
