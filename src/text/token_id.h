// Token ids as the tokenizer and the runtime exchange them (ForwardBatch carries int32 spans).
#pragma once

#include <cstdint>

namespace beam::text {

using TokenId = int32_t;

}  // namespace beam::text
