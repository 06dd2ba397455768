#include "rdmactor/detail/transport_actor.hpp"

#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/activation.hpp"
#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "rdmactor/error.hpp"
#include "transport/link.hpp"
#include "transport/poller.hpp"

namespace rdmactor::transport {

namespace {

/// The promises of operations a requester waits for, by the cookie the
/// link reports them with (slot + 1; 0 is "nobody waits").
class reply_table {
public:
  using promise = caf::typed_response_promise<uint64_t>;

  uint64_t add(promise rp) {
    if (free_.empty()) {
      slots_.push_back(std::move(rp));
      return slots_.size();
    }
    auto i = free_.back();
    free_.pop_back();
    slots_[i] = std::move(rp);
    return i + 1;
  }

  /// Removes and returns the promise of `cookie` (an empty one for an
  /// unknown cookie).
  promise take(uint64_t cookie) {
    if (cookie == 0 || cookie > slots_.size())
      return promise{};
    auto i = static_cast<size_t>(cookie - 1);
    auto rp = std::move(slots_[i]);
    slots_[i] = promise{};
    free_.push_back(i);
    return rp;
  }

private:
  std::vector<promise> slots_;
  std::vector<size_t> free_;
};

struct transport_state;

/// Where the byte that tells an agent frame's kind sits: behind the
/// frame's 4-byte length (protocol/codec.hpp).
constexpr size_t goodbye_marker_offset = 4;

using self_ptr = transport_actor::stateful_pointer<transport_state>;

struct transport_state : link_observer {
  self_ptr self = nullptr;
  /// The data path (transport/link.hpp); null when it failed to open.
  std::shared_ptr<link> path;
  /// Only when the fabric cannot notify the actor itself (verbs).
  std::unique_ptr<cq_poller> poller;
  reply_table replies;

  /// How completions are awaited (see completion_mode.hpp).
  polling how;
  /// adaptive: the last completion or post, as of the last clock reading;
  /// polling goes on for poll_budget_us after it.
  std::chrono::steady_clock::time_point last_activity;
  /// A completion or post since the last clock reading: the next reading
  /// stamps `last_activity` (see tuning::polls_per_clock_read).
  bool active_since_reading = false;
  /// Polls since the last clock reading.
  uint32_t polls_since_reading = 0;
  /// The next poll runs in `transport_runner::resume`, without a message
  /// (the runner's flag: it outlives this state, see there).
  std::atomic<bool>* poll_wanted = nullptr;
  /// `drain_cq` runs from `resume`, outside any message handler.
  bool in_direct_poll = false;
  /// The link went down during such a poll: quit from a handler.
  bool quit_deferred = false;
  /// The last message was a poll: the activation ends so that what waits
  /// on this worker runs before our next poll (see transport_runner).
  bool yield_now = false;
  /// Empty polls in a row (see tuning::empty_polls_per_yield).
  uint32_t empty_polls = 0;

  /// The subscriber: held strongly, or weakly (`subscribe_weak_atom`).
  transport_subscriber subscriber;
  caf::weak_actor_ptr weak_subscriber;
  /// What arrived before anyone subscribed: a message, or (without a
  /// handle) an RDMA WRITE with immediate data.
  struct early_event {
    local_mr msg;
    uint32_t imm = 0;
    uint32_t bytes = 0;
  };
  std::deque<early_event> early;
  /// A graceful close is under way (`close_atom`), and the byte that
  /// marks the peer's own Goodbye.
  bool closing = false;
  uint8_t goodbye_marker = 0;

  static inline const char* name = "rdmactor.transport";

  ~transport_state() override {
    // Stop the poller before the QP it polls goes away (with the link).
    poller.reset();
    path.reset();
  }

  bool down() const {
    return !path || path->down();
  }

  /// The subscriber, if there is one and it still lives.
  transport_subscriber subscriber_now() const {
    if (subscriber)
      return subscriber;
    if (auto strong = weak_subscriber.lock())
      return caf::actor_cast<transport_subscriber>(std::move(strong));
    return transport_subscriber{};
  }

  void on_done(uint64_t cookie, caf::expected<uint64_t> result) override {
    auto rp = replies.take(cookie);
    if (!rp.pending())
      return;
    if (result)
      rp.deliver(*result);
    else
      rp.deliver(std::move(result.error()));
  }

  void on_message(local_mr msg) override {
    if (closing) {
      // The peer's Goodbye crossed ours: nobody waits for the other to
      // close first; end the wait (not from inside the link's call).
      if (msg.size() > goodbye_marker_offset
          && msg.data()[goodbye_marker_offset] == goodbye_marker)
        self->send(self, close_timeout_atom::value);
      return; // dropped: nobody listens any more
    }
    if (!subscriber && !weak_subscriber)
      early.push_back(early_event{std::move(msg)});
    else if (auto sub = subscriber_now())
      self->send(sub, recv_atom::value, std::move(msg));
    // else: the subscriber is gone; the buffer is reposted with `msg`.
  }

  /// Tells the subscriber once and quits.
  void on_imm(uint32_t imm, uint32_t bytes) override {
    if (!subscriber && !weak_subscriber)
      early.push_back(early_event{local_mr{}, imm, bytes});
    else if (auto sub = subscriber_now())
      self->send(sub, imm_arrived_atom::value, imm, bytes);
  }

  void on_down(const caf::error& cause) override {
    if (auto sub = subscriber_now())
      self->send(sub, qp_down_atom::value, cause);
    if (in_direct_poll) {
      // Outside a handler CAF would not clean up after `quit`: let the
      // poll handler quit.
      quit_deferred = true;
      self->send(self, poll_atom::value);
      return;
    }
    self->quit(cause);
  }
};

/// Asks for the next poll.  It runs when this activation ends, in
/// `transport_runner::resume` and without a message (a message and its
/// dispatch cost about twice the poll itself), behind whatever else waits
/// for this actor or on this worker; CAF gives the worker to other actors
/// in between, so polling never holds a worker for good.
void schedule_poll(self_ptr self) {
  auto& st = self->state;
  if (st.down())
    return;
  st.poll_wanted->store(true, std::memory_order_relaxed);
}

/// Work was posted: in the polling modes, start polling now rather than
/// wait for the completion event (a thread hand-off, on verbs also a
/// system call to re-arm).
void on_posted(self_ptr self) {
  auto& st = self->state;
  if (st.how.mode == completion_mode::event || st.down())
    return;
  st.active_since_reading = true;
  schedule_poll(self);
}

/// True while the polling modes keep polling instead of arming the CQ.
/// Reads the clock only every `tuning::polls_per_clock_read` calls.
bool keep_polling(transport_state& st) {
  switch (st.how.mode) {
    case completion_mode::event:
      return false;
    case completion_mode::busy:
      return true;
    case completion_mode::adaptive:
      break;
  }
  if (st.path->in_flight() > 0)
    return true;
  if (++st.polls_since_reading < tuning::polls_per_clock_read)
    return true;
  st.polls_since_reading = 0;
  auto now = std::chrono::steady_clock::now();
  if (st.active_since_reading) {
    st.active_since_reading = false;
    st.last_activity = now;
    return true;
  }
  return now - st.last_activity
         < std::chrono::microseconds{st.how.poll_budget_us};
}

/// Handles every completion there is, then either polls again later (see
/// `keep_polling`) or arms the CQ so that the next completion wakes us.
void drain_cq(self_ptr self) {
  auto& st = self->state;
  if (st.down())
    return;
  auto& path = *st.path;
  // Polling: the fabric works on our thread (soft: we read the socket)
  // instead of handing each completion over from its own.
  if (st.how.mode != completion_mode::event)
    path.set_polled(true);
  path.reclaim();
  auto n = path.poll();
  st.yield_now = true;
  if (path.down())
    return;
  if (st.how.mode != completion_mode::event) {
    if (n > 0)
      st.active_since_reading = true;
    if (keep_polling(st)) {
      // An empty poll offers the core to runnable threads (a fabric's own
      // thread, or workers when there are more threads than cores):
      // spinning past them is what makes polling slower than events on a
      // loaded machine.  On an idle core this returns at once.
      if (n == 0) {
        if (++st.empty_polls % tuning::empty_polls_per_yield == 0)
          std::this_thread::yield();
      } else {
        st.empty_polls = 0;
      }
      schedule_poll(self);
      return;
    }
  }
  path.arm();
  // The fabric's thread takes over (it notifies now that the CQ is armed).
  path.set_polled(false);
  // Poll once more: a completion that arrived between the last poll and
  // arming would not notify.
  if (path.poll() > 0 && !path.down()
      && st.how.mode != completion_mode::event) {
    st.active_since_reading = true;
    schedule_poll(self);
  }
}

/// Queues an operation for a requester and returns its promise.
caf::typed_response_promise<uint64_t>
request_op(self_ptr self, op_kind kind, std::vector<uint8_t> header,
           local_mr local, mr_token remote,
           std::optional<uint32_t> imm = std::nullopt) {
  auto& st = self->state;
  auto rp = self->make_response_promise<uint64_t>();
  st.path->submit(kind, std::move(header), std::move(local), remote,
                  st.replies.add(rp), imm);
  if (st.how.mode != completion_mode::event) {
    on_posted(self);
  } else if (st.path->armed() != link::armed_for::all) {
    // Armed for receives only: widen it for this requester, then poll for
    // a completion that came between the post and the arming.
    st.path->arm();
    st.path->poll();
  }
  return rp;
}

/// Queues an atomic for a requester and returns its promise.
caf::typed_response_promise<uint64_t>
request_atomic(self_ptr self, op_kind kind, mr_token word, uint64_t compare_add,
               uint64_t swap) {
  auto& st = self->state;
  auto rp = self->make_response_promise<uint64_t>();
  st.path->submit_atomic(kind, word, compare_add, swap, st.replies.add(rp));
  if (st.how.mode != completion_mode::event) {
    on_posted(self);
  } else if (st.path->armed() != link::armed_for::all) {
    st.path->arm();
    st.path->poll();
  }
  return rp;
}

/// Flushes what arrived before the subscription to `sub` (already stored
/// in the state, strongly or weakly) and returns the link parameters.
link_params subscribe(self_ptr self, const transport_subscriber& sub) {
  auto& st = self->state;
  if (sub) {
    for (auto& ev : st.early) {
      if (ev.msg.valid())
        self->send(sub, recv_atom::value, std::move(ev.msg));
      else
        self->send(sub, imm_arrived_atom::value, ev.imm, ev.bytes);
    }
    st.early.clear();
    if (st.path->down())
      self->send(sub, qp_down_atom::value, st.path->failure());
  }
  return st.path->params();
}

transport_actor::behavior_type
transport_impl(self_ptr self, caf::expected<std::shared_ptr<link>> opened,
               polling how) {
  auto& st = self->state;
  st.self = self;
  st.how = how;
  if (how.mode != completion_mode::event
      && self->home_system().scheduler().max_throughput()
             == std::numeric_limits<size_t>::max()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log().warn("completion-mode={} needs a bounded scheduler.max-throughput "
                 "(a polling actor must give its worker back); it is "
                 "unbounded, so completions use completion-mode=event. Use "
                 "rdmactor::config or set scheduler.max-throughput (e.g. 8)",
                 to_string(how.mode));
    st.how.mode = completion_mode::event;
  }
  if (!opened) {
    log().error("transport: cannot open the connection's data path: {}",
                render(opened.error()));
    self->quit(opened.error());
    return transport_actor::behavior_type::make_empty_behavior();
  }
  st.path = std::move(*opened);
  auto& path = *st.path;
  path.set_observer(&st);
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  path.set_wake([weak] {
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<transport_actor>(strong),
                     repost_atom::value, uint32_t{0});
  });
  // Completion notifications: straight from the fabric's thread where it
  // can (soft: its event loop; verbs: the device's completion engine), else
  // a poller thread on the CQ's fd (a fabric without set_cq_notify).
  auto notify = [weak] {
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<transport_actor>(strong),
                     cq_event_atom::value);
  };
  if (!path.qp().set_cq_notify(notify))
    st.poller = std::make_unique<cq_poller>(path.qp(), notify);
  // Arm now (busy: never); messages that arrived between posting the
  // receives (spawn_transport) and arming did not notify: look once.
  if (st.how.mode != completion_mode::busy)
    path.arm();
  st.last_activity = std::chrono::steady_clock::now();
  schedule_poll(self);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    // During a graceful close the agent's exit follows its close request:
    // the wait for the peer (bounded by the close timeout) goes on.
    if (self->state.closing)
      return;
    if (auto& path = self->state.path)
      path->fail(msg.reason ? msg.reason
                            : make_error(errc::closed, "transport closed"));
  });
  return {
      // Polls first (CAF tries the handlers in order; see agent.cpp).
      [self](poll_atom) {
        if (self->state.quit_deferred) {
          self->quit(self->state.path->failure());
          return;
        }
        drain_cq(self);
      },
      [self](send_atom, std::vector<uint8_t>& header, local_mr& payload) {
        return request_op(self, op_kind::send, std::move(header),
                          std::move(payload), mr_token{});
      },
      [self](post_atom, std::vector<uint8_t>& header, local_mr& payload) {
        self->state.path->submit(op_kind::send, std::move(header),
                                 std::move(payload), mr_token{}, 0);
        on_posted(self);
      },
      [self](write_atom, local_mr& src, mr_token dst) {
        return request_op(self, op_kind::write, {}, std::move(src), dst);
      },
      [self](read_atom, local_mr& dst, mr_token src) {
        return request_op(self, op_kind::read, {}, std::move(dst), src);
      },
      [self](fetch_add_atom, mr_token word, uint64_t add) {
        return request_atomic(self, op_kind::fetch_add, word, add, 0);
      },
      [self](compare_swap_atom, mr_token word, uint64_t expected,
             uint64_t desired) {
        return request_atomic(self, op_kind::compare_swap, word, expected,
                              desired);
      },
      [self](write_imm_atom, local_mr& src, mr_token dst, uint32_t imm) {
        return request_op(self, op_kind::write, {}, std::move(src), dst, imm);
      },
      [self](subscribe_atom, transport_subscriber& sub) {
        self->state.weak_subscriber.reset();
        self->state.subscriber = sub;
        return subscribe(self, sub);
      },
      [self](subscribe_weak_atom, transport_subscriber& sub) {
        self->state.subscriber = transport_subscriber{};
        self->state.weak_subscriber = caf::actor_cast<caf::weak_actor_ptr>(sub);
        return subscribe(self, sub);
      },
      [self](cq_event_atom) {
        // The notification consumed the arming.
        self->state.path->notified();
        drain_cq(self);
      },
      [self](repost_atom, uint32_t) {
        auto& st = self->state;
        if (!st.down())
          st.path->reclaim();
      },
      [self](close_atom, std::vector<uint8_t>& header, uint32_t timeout_ms,
             uint8_t marker) {
        auto& st = self->state;
        if (st.closing)
          return;
        st.closing = true;
        st.goodbye_marker = marker;
        // Nobody listens any more: what the peer still sends is dropped.
        st.subscriber = transport_subscriber{};
        st.weak_subscriber.reset();
        st.early.clear();
        if (st.down()) {
          self->quit(make_error(errc::closed, "transport closed"));
          return;
        }
        st.path->set_closing();
        st.path->submit(op_kind::send, std::move(header), local_mr{},
                        mr_token{}, 0);
        on_posted(self);
        self->delayed_send(self, std::chrono::milliseconds{timeout_ms},
                           close_timeout_atom::value);
      },
      [self](tick_atom, uint32_t ms) {
        self->delayed_send(self, std::chrono::milliseconds{ms},
                           tick_atom::value);
      },
      [self](tick_atom) {
        auto& st = self->state;
        if (st.closing)
          return;
        if (auto sub = st.subscriber_now())
          caf::anon_send(caf::actor_cast<caf::actor>(sub), tick_atom::value);
      },
      [self](close_timeout_atom) {
        // The peer did not close its side in time (or cannot: frozen,
        // gone), or said Goodbye itself: close ours now.
        if (auto& path = self->state.path)
          path->fail(make_error(errc::closed,
                                "graceful close: the peer said Goodbye too or "
                                "did not close its side within "
                                "close-timeout-ms"));
        else
          self->quit(make_error(errc::closed, "transport closed"));
      },
  };
}

/// The transport actor, run one message at a time: its activation ends
/// after every poll.  Completions it handed on went to actors queued on
/// this worker (the agent, a requester), and an empty poll must not keep
/// them waiting either: an agent that ended its activation to let a user
/// answer first (a held acknowledgement flush, agent.cpp) queues behind
/// us.  A polling transport would otherwise go on polling, up to
/// `scheduler.max-throughput` system calls, before they run (measured:
/// send ping-pong 8 B p50 72 us instead of 31 us).
///
/// Polls run here, not as messages (`schedule_poll` sets `poll_wanted_`):
/// a poll message cost a mailbox element, CAF's dispatch and its `resume`
/// bookkeeping, about twice the poll (callgrind, docs/benchmarks.md, "Polls
/// without messages").  The rule that keeps this safe: CAF resumes an
/// actor only while it is scheduled, and `resume` returning
/// `awaiting_message` gives that up (the mailbox is blocked; the next
/// message schedules it again, maybe on another worker).  So a wanted poll
/// either keeps the actor scheduled (`resume_later`, after taking back a
/// mailbox that nobody wrote to since it was blocked) or becomes a message
/// when someone did.
class transport_runner
    : public caf::stateful_actor<transport_state, transport_actor::base> {
public:
  using super = caf::stateful_actor<transport_state, transport_actor::base>;

  transport_runner(caf::actor_config& cfg,
                   caf::expected<std::shared_ptr<link>> opened, polling how)
      : super(cfg), opened_(std::move(opened)), how_(how) {}

  behavior_type make_behavior() override {
    state.poll_wanted = &poll_wanted_;
    return transport_impl(this, std::move(opened_), how_);
  }

  /// Called by a CAF worker (one thread at a time); see run_activation.
  caf::resumable::resume_result resume(caf::execution_unit* ctx,
                                       size_t max_throughput) override {
    // Not after a result other than resume_later: the actor may already
    // run on another worker then, or its state be gone.
    if (!getf(is_terminated_flag)) {
      state.yield_now = false;
      // A wanted poll runs here when nothing else waits, or when the last
      // activation ran messages: under a stream of messages, polls and
      // messages take turns, so the stream cannot hold the poll (and the
      // credits it reaps) off.
      if ((!polled_last_ || mailbox().empty())
          && poll_wanted_.exchange(false)) {
        polled_last_ = true;
        detach_caf_logger();
        context(ctx);
        state.in_direct_poll = true;
        drain_cq(this);
        state.in_direct_poll = false;
        if (poll_wanted_.load(std::memory_order_relaxed))
          return caf::resumable::resume_later;
      }
    }
    polled_last_ = false;
    auto result = run_activation(
        max_throughput, [&] { return super::resume(ctx, 1); },
        [&] { return state.yield_now; });
    // From here on only the flag and the mailbox: after awaiting_message
    // another worker may run this actor.
    if (result != caf::resumable::awaiting_message
        || !poll_wanted_.exchange(false))
      return result;
    if (mailbox().try_unblock()) {
      // Nobody wrote to the mailbox since CAF blocked it: still ours.
      poll_wanted_.store(true, std::memory_order_relaxed);
      return caf::resumable::resume_later;
    }
    // A message came and scheduled us again: the poll goes behind it.
    caf::anon_send(caf::actor_cast<transport_actor>(this), poll_atom::value);
    return result;
  }

private:
  caf::expected<std::shared_ptr<link>> opened_;
  polling how_;
  /// A poll is wanted (`schedule_poll`).  A member of the actor, not of
  /// its state: after `awaiting_message` the state may be gone (CAF
  /// destroys it when the actor exits on another worker), the actor not
  /// (the worker holds a reference while it runs `resume`).
  std::atomic<bool> poll_wanted_{false};
  /// The last activation was a poll without a message.
  bool polled_last_ = false;
};

} // namespace

transport_actor spawn_transport(caf::actor_system& sys, device_ptr dev,
                                queue_pair_ptr qp, polling how) {
  // The receives are posted here, on the spawning thread, before the actor
  // (and anything that lets our side talk to the peer) exists, so the
  // peer's first messages find buffers.  The peer may send as soon as the
  // connection is established, slightly earlier; the QP's RNR retries
  // bridge that gap.
  using opened_link = caf::expected<std::shared_ptr<link>>;
  auto l
      = link::open(std::move(dev), std::shared_ptr<queue_pair>{std::move(qp)});
  auto opened = l ? opened_link{std::shared_ptr<link>{std::move(*l)}}
                  : opened_link{std::move(l.error())};
  return sys.spawn<transport_runner>(std::move(opened), how);
}

} // namespace rdmactor::transport
