// CPU paged GQA attention (BEAM.md §3.3, §3.6) and the KV-cache write.
#pragma once

#include <span>

#include "core/thread_pool.h"
#include "kernels/api/attention.h"

namespace beam::cpu {

// Arguments validated by kernels/api/attention.cpp (shapes and dtypes as in that header).
void paged_attention(ThreadPool& pool, const TensorView& q, const PagedKv& kv,
                     std::span<const AttentionSeq> seqs, int64_t window, const TensorView& out);
void store_kv(ThreadPool& pool, const TensorView& k, const TensorView& v, const TensorView& slots,
              const PagedKv& kv);

}  // namespace beam::cpu
