#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <caf/expected.hpp>

#include "transport/soft/deadline.hpp"
#include "transport/soft/event_fd.hpp"
#include "transport/soft/unique_fd.hpp"

namespace rdmactor::transport::soft {

class soft_queue_pair;

/// What a queue pair asks of its event loop after one service call.
struct service_result {
  /// The queue pair is closed: the loop lets go of it for good.
  bool done = false;
  /// Work is left (buffered frames, a state change): service it again in
  /// the next round, after the other queue pairs had their turn.
  bool again = false;
  /// epoll events of interest on the socket (EPOLLIN, EPOLLOUT).
  uint32_t interest = 0;
  /// When to service it again at the latest (its next timer).
  std::optional<time_point> deadline;
};

/// The loop's bookkeeping for one attached queue pair (stored in the queue
/// pair, used only by its loop).
struct loop_hook {
  // -- guarded by the loop's mutex -------------------------------------------
  /// In the ready list.
  bool queued = false;
  /// Not attached (yet), or the loop let go of it: wakes are ignored, the
  /// destructor may proceed.
  bool detached = true;
  // -- loop thread only
  // --------------------------------------------------------
  int fd = -1;
  uint32_t interest = 0;
  /// Closed this round (detached at the end of the round).
  bool finished = false;
  bool has_timer = false;
  std::multimap<time_point, soft_queue_pair*>::iterator timer;
};

/// One thread that plays the NIC for many soft queue pairs: it waits on one
/// epoll set for their sockets, on one eventfd for wakes and on the earliest
/// of their timers, and calls `soft_queue_pair::service` for each queue pair
/// that has something to do.  A device runs `engine-threads` of them and
/// spreads its queue pairs across them, so a node's thread count does not
/// grow with its peers (docs/architecture.md, "Threads").
///
/// Threads.  `attach`, `wake` and `detach_wait` are called from any thread
/// except that `detach_wait` must not be called from the loop thread
/// itself.  `service` runs on the loop thread only; it never blocks (sockets
/// are non-blocking; locks are held briefly).  Fairness: a queue pair with
/// more input than one service call handles is serviced again after every
/// other ready queue pair had its turn.
class event_loop {
public:
  /// Creates the epoll set, the wake eventfd and the thread; fails with
  /// `fabric_unavailable` when the system refuses one of them.
  static caf::expected<std::unique_ptr<event_loop>> make();

  /// Stops and joins the thread.  Every queue pair must be detached.
  ~event_loop();

  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  /// Starts serving `qp` (its socket `fd`); the first service call runs
  /// soon on the loop thread.  Caller: the queue pair's factory, once.
  caf::error attach(soft_queue_pair* qp, loop_hook& hook, int fd);

  /// Makes the loop service `qp` soon (it recomputes its interest and
  /// timers).  Any thread, including the loop thread; cheap when the loop
  /// is awake already.  Ignored once `qp` is detached.
  void wake(soft_queue_pair* qp, loop_hook& hook);

  /// Waits until the loop has let go of `qp` (its service returned `done`).
  /// Caller: the queue pair's destructor, never the loop thread.
  void detach_wait(loop_hook& hook);

  /// Returns the id of the loop thread.
  std::thread::id thread_id() const noexcept {
    return thread_.get_id();
  }

  /// Returns how many queue pairs are attached (for stats and tests).
  size_t attached() const;

private:
  event_loop(unique_fd epfd, event_fd wake);

  void run();
  void service(soft_queue_pair* qp, uint32_t revents,
               std::vector<soft_queue_pair*>& next);
  void set_timer(soft_queue_pair* qp, loop_hook& hook,
                 std::optional<time_point> at);

  unique_fd epfd_;
  event_fd wake_;

  mutable std::mutex mtx_;
  std::condition_variable detached_cv_;
  std::vector<soft_queue_pair*> ready_;
  /// The loop is (about to be) inside epoll_wait: a wake must signal.
  bool sleeping_ = false;
  /// The wake eventfd was signalled and not drained yet.
  bool signalled_ = false;
  bool stop_ = false;
  size_t attached_ = 0;

  // -- loop thread only ------------------------------------------------------
  std::multimap<time_point, soft_queue_pair*> timers_;
  std::vector<soft_queue_pair*> finished_;

  std::thread thread_;
};

} // namespace rdmactor::transport::soft
