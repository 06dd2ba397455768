#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <caf/expected.hpp>

#include <infiniband/verbs.h>

#include "transport/verbs/raii.hpp"

namespace rdmactor::transport::verbs {

/// The completion engine of a verbs device (internal): ONE completion
/// channel that every CQ of the device is created on, and ONE thread that
/// turns its events into calls of the notify function of the owning queue
/// pair.  The number of threads does not grow with the connections.
///
/// Dispatch: a queue pair registers first (`add`) and gets an id; it
/// creates its CQs with `cq_context = context_of(id)`.  The engine thread
/// blocks in poll(2) on the channel's fd and a stop eventfd, takes every
/// pending event with `ibv_get_cq_event`, acknowledges it at once with
/// `ibv_ack_cq_events` (so `ibv_destroy_cq` never waits for the engine),
/// looks the id up in the registry and calls the registered function.  An
/// id is never reused, and the registry holds no pointer into a queue pair:
/// an event of a CQ whose owner deregistered finds no entry and is dropped.
///
/// Functions run on the engine thread without the registry lock held, one
/// at a time.  `remove` erases the entry and then waits until a call of
/// that id's function that is running on the engine thread has returned,
/// so after `remove` returns the function is never called again.  When
/// `remove` runs on the engine thread itself (a notify function dropped the
/// last reference to the owner of the queue pair), it does not wait: the
/// running call is its own caller, which the engine keeps alive until it
/// returns.  `remove` never waits on the engine thread, so a function that
/// destroys queue pairs cannot deadlock the engine.
///
/// Lifetime: the device owns the engine and destroys it after the last
/// queue pair (each queue pair keeps its device alive), hence after every
/// CQ on the channel; the destructor stops and joins the thread first, then
/// destroys the channel.
class completion_engine {
public:
  using notify_fn = std::function<void()>;

  /// Owns the registration of one id; `remove`s it on destruction.
  class registration {
  public:
    registration() noexcept = default;
    registration(completion_engine* engine, uint64_t id) noexcept
        : engine_(engine), id_(id) {}
    registration(const registration&) = delete;
    registration& operator=(const registration&) = delete;
    registration(registration&& other) noexcept
        : engine_(other.engine_), id_(other.id_) {
      other.engine_ = nullptr;
      other.id_ = 0;
    }
    registration& operator=(registration&& other) noexcept {
      if (this != &other) {
        reset();
        engine_ = other.engine_;
        id_ = other.id_;
        other.engine_ = nullptr;
        other.id_ = 0;
      }
      return *this;
    }
    ~registration() {
      reset();
    }

    uint64_t id() const noexcept {
      return id_;
    }
    explicit operator bool() const noexcept {
      return engine_ != nullptr;
    }
    /// The value for `ibv_create_cq`'s `cq_context`.
    void* cq_context() const noexcept {
      return context_of(id_);
    }
    /// Replaces the registered function (see `completion_engine::set`).
    void set(notify_fn fn) {
      if (engine_ != nullptr)
        engine_->set(id_, std::move(fn));
    }
    /// Calls the function soon (see `completion_engine::notify_soon`).
    void notify_soon() {
      if (engine_ != nullptr)
        engine_->notify_soon(id_);
    }
    void reset() noexcept {
      if (engine_ != nullptr)
        engine_->remove(id_);
      engine_ = nullptr;
      id_ = 0;
    }

  private:
    completion_engine* engine_ = nullptr;
    uint64_t id_ = 0;
  };

  /// Creates the completion channel on `ctx` and starts the engine thread.
  /// `device_name` only names the device in log messages.
  static caf::expected<std::unique_ptr<completion_engine>>
  start(ibv_context* ctx, std::string device_name);

  /// Stops and joins the engine thread, then destroys the channel.  Call
  /// it after every CQ on the channel was destroyed, not on the engine
  /// thread.
  ~completion_engine();

  completion_engine(const completion_engine&) = delete;
  completion_engine& operator=(const completion_engine&) = delete;

  /// The shared completion channel; create every CQ of the device on it.
  ibv_comp_channel* channel() const noexcept {
    return channel_.get();
  }

  /// Registers `fn` under a fresh id for the CQs created with
  /// `registration::cq_context()`.  Any thread.
  registration add(notify_fn fn);

  /// Replaces the function of `id`; a call of the old one may still be
  /// running.  Any thread.
  void set(uint64_t id, notify_fn fn);

  /// Deregisters `id`; see the class comment for what it waits for.  Any
  /// thread.
  void remove(uint64_t id) noexcept;

  /// Makes the engine thread call the function of `id` as for a CQ event
  /// (nothing when `id` is gone by then): how a queue pair notifies of
  /// news that no CQ carries.  Any thread.
  void notify_soon(uint64_t id);

  /// Returns the `cq_context` that encodes `id`.
  static void* context_of(uint64_t id) noexcept {
    return reinterpret_cast<void*>(static_cast<uintptr_t>(id));
  }

  /// Returns true on the engine thread.
  bool on_engine_thread() const noexcept {
    return std::this_thread::get_id() == thread_id_;
  }

  /// Drops `last`, a reference to the device that owns this engine: on a
  /// short-lived thread when it is the last one and this is the engine
  /// thread (a notify function dropped the last holder of a queue pair or
  /// a shared receive queue), because the device's destructor joins the
  /// engine; at once otherwise.  Where no thread can be started the device
  /// stays open (leaked on purpose).  Any thread.
  void release(std::shared_ptr<void> last) noexcept;

private:
  completion_engine() = default;

  /// Body of the engine thread.
  void run();

  /// Calls the function registered for `id`, if any.
  void dispatch(uint64_t id);

  // Members in order of acquisition; released in reverse (the destructor
  // joins the thread before the channel and the fd go).
  std::string device_name_;
  comp_channel_ptr channel_;
  unique_fd stop_fd_;
  std::mutex mtx_;
  std::condition_variable idle_;
  /// Immutable functions by id; `set` swaps the pointer.  Guarded by mtx_.
  std::unordered_map<uint64_t, std::shared_ptr<const notify_fn>> fns_;
  uint64_t next_id_ = 1; ///< guarded by mtx_
  uint64_t running_ = 0; ///< id whose function runs now, 0: none; mtx_
  /// Ids `notify_soon` asked for, not dispatched yet; guarded by mtx_.
  std::vector<uint64_t> soon_;
  /// The destructor asked the thread to end; guarded by mtx_.
  bool stopping_ = false;
  /// The device `release` could not release; guarded by mtx_.
  std::shared_ptr<void> stranded_;
  std::thread::id thread_id_;
  std::thread thread_;
};

} // namespace rdmactor::transport::verbs
