// Generation groups: several engine requests answered as one response (a /v1/completions prompt
// list). The jobs share one strand and one GenerationObserver, which sees job j's sibling s as
// sibling j * n + s (n siblings a job), on_complete once with the usage summed over the jobs, or
// on_rejected once when any job is rejected (the others are then cancelled and left unseen).
#pragma once

#include <memory>
#include <vector>

#include "server/generation/generation_job.h"

namespace beam::server {

// Every spec must ask for the same number of siblings (sampling.n). One handler on `strand`
// submits every job, so all submits happen before any job's output reaches `observer`. Returns
// the jobs for cancelling (they keep themselves alive while they run).
std::vector<std::weak_ptr<GenerationJob>> start_generation_group(
    const GenerationContext& context, const WorkStrand& strand, std::vector<GenerationSpec> specs,
    std::shared_ptr<GenerationObserver> observer, Clock::time_point received);

}  // namespace beam::server
