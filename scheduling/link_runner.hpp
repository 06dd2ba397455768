#pragma once

// The runner of every actor that drives a link: the agent (its lent link)
// and the transport actor (its own).  Not installed.

#include <cstddef>
#include <limits>

#include <caf/abstract_actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/execution_unit.hpp>
#include <caf/invoke_message_result.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "common/activation.hpp"
#include "rdmactor/scheduler_job.hpp"
#include "scheduling/direct_poll.hpp"
#include "scheduling/link_driver.hpp"

namespace rdmactor::transport {

/// Runs an actor that drives a link (`Base`: a `caf::stateful_actor` whose
/// state has a `link_driver driver` and a `bool yield_now`), one message at
/// a time:
///
/// - polls and the CQ's notification run without messages, at the end of
///   an activation (`resume_with_polls`, scheduling/direct_poll.hpp); the
///   notification arrives through `wake_notified` on the fabric's thread;
/// - the activation ends when `Derived::should_yield()` says so (the
///   state's `yield_now` by default: a poll ran, so the actors it handed
///   completions to, queued on this worker, run before the next poll);
/// - the link's posts are held while a message runs and leave once the
///   mailbox is empty, so a burst of messages (a window of sends) leaves in
///   one doorbell; never later than the end of the activation.
///
/// `Derived` (CRTP) provides `void side_work(const due_work&)` (the polls,
/// the notification, the tail; outside any handler, CAF's context set) and
/// may hide `begin_activation()` and `should_yield()`.  `Handle` is the
/// actor's handle type, `TailAtom` the message that stands in for a tail
/// when a message races it.
template <class Derived, class Handle, class Base, class TailAtom = poll_atom>
class link_runner : public with_scheduler_job<Base>, public direct_wake {
public:
  using super = with_scheduler_job<Base>;

  template <class... Ts>
  explicit link_runner(caf::actor_config& cfg, Ts&&... xs)
      : super(cfg, std::forward<Ts>(xs)...) {}

  /// Called by a CAF worker (the scheduler's contract: one thread at a
  /// time); see run_activation for what `resume(ctx, 1)` may return.
  caf::resumable::resume_result resume(caf::execution_unit* ctx,
                                       size_t max_throughput) override {
    // Not after a result other than resume_later: the actor may already
    // run on another worker then, or its state be gone.
    bool alive = !this->getf(caf::abstract_actor::is_terminated_flag);
    if (alive)
      derived().begin_activation();
    return resume_with_polls<Handle, TailAtom>(
        this, polls_, alive,
        [&](const due_work& w) {
          detach_caf_logger();
          this->context(ctx);
          hold_posts();
          derived().side_work(w);
          flush_posts();
        },
        [&] {
          auto result = run_activation(
              max_throughput, [&] { return super::resume(ctx, 1); },
              [&] { return derived().should_yield(); });
          // Still ours: the messages that wait come in a later activation.
          if (result == caf::resumable::resume_later)
            flush_posts();
          return result;
        });
  }

  /// Runs one message with the link's posts held; they go once the
  /// mailbox is empty.  Flushing here, not after `resume`, matters: the
  /// `resume` that ran the last message blocks the mailbox, and from then
  /// on another worker may run this actor.
  caf::invoke_message_result consume(caf::mailbox_element& x) override {
    hold_posts();
    auto result = super::consume(x);
    if (this->mailbox().empty()
        || this->getf(caf::abstract_actor::is_terminated_flag))
      flush_posts();
    return result;
  }

  /// The CQ's notification, on the fabric's thread: no `cq_event_atom`
  /// (a mailbox element and CAF's dispatch per wake-up).
  void wake_notified() noexcept override {
    wake_without_message(this, polls_);
  }

  /// The flags `resume` reads; the state's driver asks for polls through
  /// `polls().wanted`.
  direct_poll& polls() noexcept {
    return polls_;
  }

  /// Defaults of the hooks.
  void begin_activation() {
    this->state.yield_now = false;
  }

  bool should_yield() const {
    return this->state.yield_now;
  }

private:
  Derived& derived() {
    return static_cast<Derived&>(*this);
  }

  /// See `link::hold_posts`; only while a link is driven.
  void hold_posts() {
    if (this->state.driver.driving())
      this->state.driver.path().hold_posts();
  }

  void flush_posts() {
    if (this->state.driver.driving())
      this->state.driver.path().flush_posts();
  }

  direct_poll polls_;
};

/// `runner` where the scheduler's max-throughput is bounded
/// (rdmactor::config sets it): the CQ's notification then waits for the end
/// of an activation without a message, and an unbounded one would hold it
/// off for as long as messages keep coming.  Else null: the notification
/// comes as `cq_event_atom`, which queues behind them.
inline direct_wake* direct_wake_for(caf::actor_system& sys,
                                    direct_wake* runner) {
  if (sys.scheduler().max_throughput() == std::numeric_limits<size_t>::max())
    return nullptr;
  return runner;
}

} // namespace rdmactor::transport
