#include "common/heap_trim.hpp"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <new>
#include <thread>

#if defined(__GLIBC__)
#  include <malloc.h>
#endif

#include "common/thread_name.hpp"
#include "common/tuning.hpp"

namespace rdmactor {

namespace {

std::atomic<uint64_t> trims_started{0};

#if defined(__GLIBC__)

/// The heap trimmer: one thread per process, started by the first request.
/// Never destroyed (the thread waits on it until the process ends, also
/// while static destructors run).
struct trimmer {
  std::mutex mtx;
  std::condition_variable cv;
  heap_trim_pacer pacer{std::chrono::milliseconds{tuning::heap_trim_gap_ms},
                        tuning::heap_trim_duty};
  bool trimming = false;

  void run() {
    name_this_thread("rdm.heap.trim");
    std::unique_lock<std::mutex> guard{mtx};
    for (;;) {
      cv.wait(guard, [this] { return pacer.pending(); });
      auto now = heap_trim_pacer::clock_type::now();
      if (now < pacer.due()) {
        cv.wait_until(guard, pacer.due());
        continue;
      }
      pacer.start(now);
      trims_started.fetch_add(1, std::memory_order_relaxed);
      trimming = true;
      guard.unlock();
      malloc_trim(0);
      auto done = heap_trim_pacer::clock_type::now();
      guard.lock();
      trimming = false;
      pacer.finish(done);
    }
  }
};

/// The trimmer, or null where its thread could not start (then each
/// request trims on its own thread).
trimmer* the_trimmer() noexcept {
  static trimmer* instance = []() -> trimmer* {
    auto* t = new (std::nothrow) trimmer;
    if (t == nullptr)
      return nullptr;
    try {
      std::thread{[t] { t->run(); }}.detach();
    } catch (...) {
      delete t;
      return nullptr;
    }
    return t;
  }();
  return instance;
}

#endif

} // namespace

bool trim_heap() noexcept {
#if defined(__GLIBC__)
  auto* t = the_trimmer();
  if (t == nullptr) {
    trims_started.fetch_add(1, std::memory_order_relaxed);
    malloc_trim(0);
    return true;
  }
  {
    std::lock_guard<std::mutex> guard{t->mtx};
    t->pacer.ask();
  }
  t->cv.notify_one();
  return true;
#else
  return false;
#endif
}

uint64_t heap_trims_started() noexcept {
  return trims_started.load(std::memory_order_relaxed);
}

bool heap_trim_idle() noexcept {
#if defined(__GLIBC__)
  auto* t = the_trimmer();
  if (t == nullptr)
    return true;
  std::lock_guard<std::mutex> guard{t->mtx};
  return !t->pacer.pending() && !t->trimming;
#else
  return true;
#endif
}

} // namespace rdmactor
