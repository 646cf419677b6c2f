// SleepController: release and restore in the order that keeps the state true on every error.
#include "runtime/engine_sleep.h"

#include <string>

namespace beam {
namespace {

// nbytes at data on `device` as a byte tensor.
TensorView arena_bytes_view(void* data, size_t nbytes, Device device) {
  return TensorView{data, DType::kU8, Shape{static_cast<int64_t>(nbytes)}, device};
}

Error sleep_mode_off() {
  return make_error(
      "sleep mode is off: start the engine with enable_sleep_mode (serve --enable-sleep-mode)");
}

}  // namespace

Status SleepController::check_sleep(bool weights, bool kv_cache) const {
  if (kv_ == nullptr) return sleep_mode_off();
  const bool device_weights = weights && weights_;  // on the CPU the weights stay in host memory
  if (!device_weights && !kv_cache)
    return make_error(weights ? "nothing to release: the CPU's weights are host memory"
                              : "nothing to release: name the weights or the KV cache");
  const bool weights_out = state_.weights_released || state_.weights_discarded;
  if ((!device_weights || weights_out) && (!kv_cache || state_.kv_released))
    return make_error("the engine is already asleep");
  if (device_weights && weights_out) return make_error("the weights are already released");
  if (kv_cache && state_.kv_released) return make_error("the KV cache is already released");
  return ok_status();
}

Expected<int64_t> SleepController::sleep(SleepLevel level, bool weights, bool kv_cache) {
  BEAM_RETURN_IF_ERROR(check_sleep(weights, kv_cache));
  int64_t released = 0;
  if (weights && weights_) {
    if (level == SleepLevel::kOffloadWeights) {
      host_copy_ = std::make_unique_for_overwrite<char[]>(weights_->nbytes());
      copy_tensor(ctx_, arena_bytes_view(host_copy_.get(), weights_->nbytes(), Device::kCpu),
                  arena_bytes_view(weights_->data(), weights_->nbytes(), weights_->device()));
    }
    weights_->release();
    released += static_cast<int64_t>(weights_->nbytes());
    if (ReleasableMemory* lora = lora_memory()) {
      lora->release();
      released += static_cast<int64_t>(lora->nbytes());
    }
    state_.weights_released = true;
    state_.weights_discarded = level == SleepLevel::kDiscardWeights;
  }
  if (kv_cache) {
    kv_->release_all();
    released += kv_->bytes();
    state_.kv_released = true;
  }
  return released;
}

Status SleepController::wake_up(bool weights, bool kv_cache) {
  if (kv_ == nullptr) return sleep_mode_off();
  if (weights && state_.weights_released) {
    if (ReleasableMemory* lora = lora_memory(); lora != nullptr && lora->released()) {
      BEAM_RETURN_IF_ERROR(lora->restore());
      lora_->clear_all(ctx_);
    }
    BEAM_RETURN_IF_ERROR(weights_->restore());
    if (!state_.weights_discarded) {
      copy_tensor(ctx_, arena_bytes_view(weights_->data(), weights_->nbytes(), weights_->device()),
                  arena_bytes_view(host_copy_.get(), weights_->nbytes(), Device::kCpu));
      synchronize(ctx_);
      host_copy_.reset();
    }
    state_.weights_released = false;
  }
  if (kv_cache && state_.kv_released) {
    BEAM_RETURN_IF_ERROR(kv_->restore_all());
    state_.kv_released = false;
  }
  return ok_status();
}

Status SleepController::check_weights_writable() const {
  if (state_.weights_released)
    return make_error(
        "the weights are asleep: wake them first (wake_up with the weights, "
        "/wake_up?tags=weights)");
  return ok_status();
}

}  // namespace beam
