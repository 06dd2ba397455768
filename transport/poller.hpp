#pragma once

#include <atomic>
#include <functional>
#include <thread>

#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::transport {

/// A thread that blocks on a queue pair's CQ notification fd and calls
/// `on_event` once per notification (the link's driver passes a function
/// that wakes the owner: `wake_target::cq_event`).
///
/// The poller consumes the notification (`ack_cq_event`); the actor drains
/// the CQ and re-arms it.  The destructor stops and joins the thread; it
/// must run before the queue pair is destroyed.
class cq_poller {
public:
  cq_poller(queue_pair& qp, std::function<void()> on_event);

  cq_poller(const cq_poller&) = delete;
  cq_poller& operator=(const cq_poller&) = delete;

  ~cq_poller();

private:
  void run();

  queue_pair& qp_;
  std::function<void()> on_event_;
  int stop_fd_ = -1;
  std::thread thread_;
};

} // namespace rdmactor::transport
