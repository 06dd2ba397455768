#include "scheduling/link_driver.hpp"

#include <limits>
#include <thread>

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/send.hpp>

#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "rdmactor/detail/transport_atoms.hpp"
#include "scheduling/contention.hpp"

namespace rdmactor::transport {

// -- wake_target --------------------------------------------------------------

void wake_target::set(caf::weak_actor_ptr who, direct_wake* direct) {
  std::lock_guard<std::mutex> guard{mtx_};
  who_ = std::move(who);
  direct_ = direct;
}

caf::strong_actor_ptr wake_target::driver(direct_wake** direct) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (direct != nullptr)
    *direct = direct_;
  return who_.lock();
}

void wake_target::cq_event() {
  direct_wake* direct = nullptr;
  auto strong = driver(&direct);
  if (!strong)
    return;
  // `strong` keeps the owner, and with it `direct`, alive meanwhile.
  if (direct != nullptr)
    direct->wake_notified();
  else
    caf::anon_send(caf::actor_cast<caf::actor>(std::move(strong)),
                   cq_event_atom::value);
}

void wake_target::repost() {
  if (auto strong = driver())
    caf::anon_send(caf::actor_cast<caf::actor>(std::move(strong)),
                   repost_atom::value, uint32_t{0});
}

// -- link_driver --------------------------------------------------------------

void link_driver::start(driven_link& dl, link_observer& obs,
                        caf::weak_actor_ptr driver, direct_wake* direct) {
  dl_ = &dl;
  auto& path = *dl_->path;
  path.set_observer(&obs);
  dl_->target->set(std::move(driver), direct);
  if (!dl_->wired) {
    dl_->wired = true;
    auto target = dl_->target;
    path.set_wake([target] { target->repost(); });
    // Completion notifications: straight from the fabric's thread where it
    // can (soft: its event loop; verbs: the device's completion engine),
    // else a poller thread on the CQ's fd.
    auto notify = [target] { target->cq_event(); };
    if (!path.qp().set_cq_notify(notify))
      dl_->poller = std::make_unique<cq_poller>(path.qp(), notify);
  }
  if (path.down())
    return;
  // Arm now (busy: never).  A notification armed by the previous driver
  // may have gone to it: arm again rather than trust it.
  path.notified();
  if (how_.mode != completion_mode::busy)
    path.arm();
  // Messages that arrived before arming did not notify: look once.  Once:
  // that look reads the clock (`keep_polling`) and, with no traffic since
  // and none in flight, arms; a new link starts no polling tail of its
  // own (thousands opened at once would each spin on its socket for the
  // poll budget).
  polls_since_reading_ = tuning::polls_per_clock_read - 1;
  schedule_poll();
}

void link_driver::stop() {
  if (dl_ == nullptr)
    return;
  dl_->path->flush_posts(); // the next driver finds nothing held
  dl_->path->set_observer(nullptr);
  dl_ = nullptr;
}

void link_driver::schedule_poll() noexcept {
  if (down())
    return;
  poll_wanted_->store(true, std::memory_order_relaxed);
}

void link_driver::posted(bool quiet) {
  if (down())
    return;
  if (quiet || !polling_now()) {
    // Armed for receives only, a post that waits for a send-queue entry
    // or a credit would wake nobody when its way clears: widen the arming
    // (`link::arm` arms for everything while anything waits).
    if (path().armed() == link::armed_for::receives && path().queued() > 0)
      path().arm();
    return;
  }
  active_since_reading_ = true;
  schedule_poll();
}

void link_driver::requested() {
  if (down())
    return;
  if (polling_now()) {
    posted();
  } else if (path().armed() != link::armed_for::all) {
    // Armed for receives only: widen it for this requester, then poll for
    // a completion that came between the post and the arming.  The
    // requester's work goes to the device first (a held doorbell rings):
    // held until the end of the activation, it would start after that
    // poll, and its completion would always take the notification's
    // thread hand-off (Soft-RoCE: read lat 8 B in event mode 89 -> 256 us).
    path().ring_held();
    path().arm();
    poll_link();
  }
}

/// Polls the link once; a poll the observer paused asks for the next one
/// (the rest waits in the link; arming would not bring it).
size_t link_driver::poll_link() {
  auto n = path().poll();
  if (path().paused())
    schedule_poll(); // nothing when down
  return n;
}

/// True while the polling modes keep polling instead of arming the CQ.
/// Reads the clock, and asks whether our polling threads wait for cores
/// (scheduling/contention.hpp), only every `tuning::polls_per_clock_read`
/// calls.  Contended: adaptive polling arms, as event mode does (a
/// spinner that shares its core with a CPU hog loses whole time slices
/// exactly when its completion comes; a sleeper is woken at once).
bool link_driver::keep_polling() {
  switch (how_.mode) {
    case completion_mode::event:
      return false;
    case completion_mode::busy:
      return true;
    case completion_mode::adaptive:
      break;
  }
  if (++polls_since_reading_ < tuning::polls_per_clock_read)
    return !contended_;
  polls_since_reading_ = 0;
  auto now = std::chrono::steady_clock::now();
  contended_ = contention_monitor::instance().contended(now);
  bool active = active_since_reading_;
  if (active) {
    active_since_reading_ = false;
    last_activity_ = now;
  }
  if (contended_)
    return false;
  if (active || path().traffic_in_flight() > 0)
    return true;
  return now - last_activity_ < std::chrono::microseconds{how_.poll_budget_us};
}

size_t link_driver::drain() {
  if (down())
    return 0;
  auto& path = *dl_->path;
  // Polling: the fabric works on our thread (soft: we read the socket)
  // instead of handing each completion over from its own.
  if (polling_now())
    path.set_polled(true);
  path.reclaim();
  auto n = poll_link();
  if (path.down() || path.paused())
    return n;
  if (how_.mode != completion_mode::event) {
    if (n > 0)
      active_since_reading_ = true;
    if (keep_polling()) {
      // An empty poll offers the core to runnable threads (a fabric's own
      // thread, or workers when there are more threads than cores):
      // spinning past them is what makes polling slower than events on a
      // loaded machine.  On an idle core this returns at once.
      if (n == 0) {
        if (++empty_polls_ % tuning::empty_polls_per_yield == 0)
          std::this_thread::yield();
      } else {
        empty_polls_ = 0;
      }
      schedule_poll();
      return n;
    }
  }
  path.arm();
  // The fabric's thread takes over (it notifies now that the CQ is armed).
  path.set_polled(false);
  // Poll once more: a completion that arrived between the last poll and
  // arming would not notify.
  auto late = poll_link();
  if (late > 0 && !path.paused() && !path.down() && polling_now()) {
    active_since_reading_ = true;
    schedule_poll();
  }
  return n + late;
}

size_t link_driver::notified() {
  if (!dl_)
    return 0;
  dl_->path->notified();
  return drain();
}

void link_driver::reclaim() {
  if (!down())
    dl_->path->reclaim();
}

polling usable_polling(caf::actor_system& sys, polling how) {
  if (how.mode != completion_mode::event
      && sys.scheduler().max_throughput()
             == std::numeric_limits<size_t>::max()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log().warn("completion-mode={} needs a bounded scheduler.max-throughput "
                 "(a polling actor must give its worker back); it is "
                 "unbounded, so completions use completion-mode=event. Use "
                 "rdmactor::config or set scheduler.max-throughput (e.g. 8)",
                 to_string(how.mode));
    how.mode = completion_mode::event;
  }
  return how;
}

} // namespace rdmactor::transport
