// Generation groups (see generation_group.h). Every call below runs on the group's one strand.
#include "server/generation/generation_group.h"

#include <boost/asio/post.hpp>

namespace beam::server {
namespace {

// What the jobs' observers share: the endpoint's observer, the sum of usages, how many jobs are
// still to end (each ends with on_rejected or on_complete).
struct Merge {
  std::shared_ptr<GenerationObserver> target;
  std::vector<std::weak_ptr<GenerationJob>> jobs;
  int64_t jobs_left = 0;
  bool rejected = false;
  GenerationUsage usage;
};

// One job's observer: renumbers its siblings and hands everything to the Merge.
class JobObserver : public GenerationObserver {
 public:
  JobObserver(std::shared_ptr<Merge> merge, int32_t first_sibling)
      : merge_(std::move(merge)), first_sibling_(first_sibling) {}

  void on_rejected(const ApiError& error) override {
    merge_->jobs_left--;
    if (merge_->rejected) return;
    merge_->rejected = true;
    merge_->target->on_rejected(error);
    for (const std::weak_ptr<GenerationJob>& j : merge_->jobs) {
      if (auto job = j.lock()) job->cancel();
    }
  }
  void on_delta(int32_t sibling, SiblingDelta&& delta) override {
    if (!merge_->rejected) merge_->target->on_delta(first_sibling_ + sibling, std::move(delta));
  }
  void on_sibling_done(int32_t sibling, SiblingResult&& result) override {
    if (!merge_->rejected)
      merge_->target->on_sibling_done(first_sibling_ + sibling, std::move(result));
  }
  void on_complete(const GenerationUsage& usage) override {
    if (!merge_->rejected) merge_->target->on_job_usage(first_sibling_, usage);
    merge_->usage.prompt_tokens += usage.prompt_tokens;
    merge_->usage.cached_prompt_tokens += usage.cached_prompt_tokens;
    merge_->usage.completion_tokens += usage.completion_tokens;
    if (--merge_->jobs_left == 0 && !merge_->rejected) merge_->target->on_complete(merge_->usage);
  }

 private:
  std::shared_ptr<Merge> merge_;
  int32_t first_sibling_;
};

}  // namespace

std::vector<std::weak_ptr<GenerationJob>> start_generation_group(
    const GenerationContext& context, const WorkStrand& strand, std::vector<GenerationSpec> specs,
    std::shared_ptr<GenerationObserver> observer, Clock::time_point received) {
  auto merge = std::make_shared<Merge>();
  merge->target = std::move(observer);
  merge->jobs_left = static_cast<int64_t>(specs.size());
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  int32_t first_sibling = 0;
  for (GenerationSpec& spec : specs) {
    const auto n = static_cast<int32_t>(spec.sampling.n);
    auto job_observer = std::make_shared<JobObserver>(merge, first_sibling);
    jobs.push_back(std::make_shared<GenerationJob>(context, strand, std::move(spec),
                                                   std::move(job_observer), received));
    merge->jobs.push_back(jobs.back());
    first_sibling += n;
  }
  std::vector<std::weak_ptr<GenerationJob>> handles(merge->jobs);
  // Each start() posts its job's submit behind this handler: every submit is queued before any
  // engine event can be.
  boost::asio::post(strand, [jobs = std::move(jobs)] {
    for (const std::shared_ptr<GenerationJob>& job : jobs) job->start();
  });
  return handles;
}

}  // namespace beam::server
