#include "core/large_stack.h"

#include <pthread.h>

namespace beam {
namespace {

void* call(void* f) {
  (*static_cast<const std::function<void()>*>(f))();
  return nullptr;
}

}  // namespace

void run_on_large_stack(const std::function<void()>& f, size_t bytes) {
  pthread_attr_t attr;
  pthread_t thread;
  bool started = false;
  if (pthread_attr_init(&attr) == 0) {
    started =
        pthread_attr_setstacksize(&attr, bytes) == 0 &&
        pthread_create(&thread, &attr, call, const_cast<void*>(static_cast<const void*>(&f))) == 0;
    pthread_attr_destroy(&attr);
  }
  if (started) {
    pthread_join(thread, nullptr);
  } else {
    f();
  }
}

}  // namespace beam
