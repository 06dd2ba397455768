#include "rdmactor/detail/transport_actor.hpp"

#include <atomic>
#include <chrono>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/activation.hpp"
#include "common/heap_trim.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/ring_deque.hpp"
#include "common/tuning.hpp"
#include "rdmactor/error.hpp"
#include "scheduling/direct_poll.hpp"
#include "scheduling/link_driver.hpp"
#include "scheduling/link_runner.hpp"
#include "transport/cookie_table.hpp"
#include "transport/link.hpp"

namespace rdmactor::transport {

namespace {

/// The promises of operations a requester waits for.
using reply_table = cookie_table<caf::typed_response_promise<uint64_t>>;

struct transport_state;

using self_ptr = transport_actor::stateful_pointer<transport_state>;

struct transport_state : link_observer {
  self_ptr self = nullptr;
  /// What the agent gave us to keep until the queue pair is closed
  /// (`link_return`), and whether the heap is trimmed after it.
  std::shared_ptr<void> kept;
  bool trim = false;
  /// The link, from the open to the close; null when it failed to open.
  std::unique_ptr<driven_link> owned;
  /// `owned` is lent to the agent (spawn_lending_transport): it drives the
  /// link, and we do not touch it until it comes back (`lease_end_atom`).
  bool lent = false;
  /// Drives `owned` while it is ours (scheduling/link_driver.hpp).
  link_driver driver;
  reply_table replies;

  /// The runner's poll flag (scheduling/direct_poll.hpp), and the runner
  /// where it takes the CQ's notification without a message (null: as
  /// `cq_event_atom`; see `direct_wake_for`).
  std::atomic<bool>* poll_wanted = nullptr;
  direct_wake* direct = nullptr;
  /// `drain` runs from `resume`, outside any message handler.
  bool in_direct_poll = false;
  /// The link went down during such a poll: quit from a handler.
  bool quit_deferred = false;
  /// The last message was a poll: the activation ends so that what waits
  /// on this worker runs before our next poll (see transport_runner).
  bool yield_now = false;

  /// The subscriber of a raw user (`subscribe_atom`).
  transport_subscriber subscriber;
  /// What arrived before anyone subscribed: a message, or (without a
  /// handle) an RDMA WRITE with immediate data.
  struct early_event {
    local_mr msg;
    uint32_t imm = 0;
    uint32_t bytes = 0;
  };
  ring_deque<early_event> early;
  /// A graceful close is under way (`link_return::goodbye`), and how the
  /// peer's own Goodbye is told from its other frames.
  bool closing = false;
  std::function<bool(const local_mr&)> is_goodbye;

  static inline const char* name = "rdmactor.transport";

  explicit transport_state(self_ptr ptr) : self(ptr) {}

  transport_state(const transport_state&) = delete;
  transport_state& operator=(const transport_state&) = delete;

  /// The queue pair closes first (the peer can no longer reach what we
  /// kept), then what we kept goes, then the heap is trimmed.  CAF
  /// destroys the state before it sends our exit and down messages.
  ~transport_state() {
    owned.reset();
    kept.reset();
    if (trim)
      trim_heap();
  }

  bool down() const {
    return driver.down();
  }

  link& path() {
    return driver.path();
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
      if (is_goodbye && is_goodbye(msg))
        self->send(self, close_timeout_atom::value);
      return; // dropped: nobody listens any more
    }
    if (subscriber)
      self->send(subscriber, recv_atom::value, std::move(msg));
    else
      early.push_back(early_event{std::move(msg)});
  }

  /// The peer's WRITE with immediate data: to the subscriber, or kept
  /// until one subscribes.
  void on_imm(uint32_t imm, uint32_t bytes) override {
    if (closing)
      return;
    if (subscriber)
      self->send(subscriber, imm_arrived_atom::value, imm, bytes);
    else
      early.push_back(early_event{local_mr{}, imm, bytes});
  }

  /// Tells the subscriber once and quits.
  void on_down(const caf::error& cause) override {
    if (subscriber)
      self->send(subscriber, qp_down_atom::value, cause);
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

/// Drains the CQ (link_driver::drain); the activation ends after it.
void drain_cq(self_ptr self) {
  self->state.driver.drain();
  self->state.yield_now = true;
}

/// Starts driving our own link (at spawn, or when the agent gave it back);
/// quits and returns false when it is down already.  From a handler.
bool start_driving(self_ptr self) {
  auto& st = self->state;
  st.driver.start(*st.owned, st, caf::actor_cast<caf::weak_actor_ptr>(self),
                  st.direct);
  if (!st.path().down())
    return true;
  self->quit(st.path().failure());
  return false;
}

/// Posts the agent's Goodbye behind everything posted before, and waits
/// for the peer to close its side, its own Goodbye, or the timeout.
void close_gracefully(self_ptr self, link_return& back) {
  auto& st = self->state;
  st.closing = true;
  st.is_goodbye = std::move(back.is_goodbye);
  st.path().set_closing();
  st.path().submit(op_kind::send, std::move(back.goodbye), local_mr{},
                   mr_token{}, 0);
  st.driver.posted();
  self->delayed_send(self, std::chrono::milliseconds{back.close_timeout_ms},
                     close_timeout_atom::value);
}

/// The agent gave the link back (`lease_end_atom`): we drive it from now
/// on and close it, gracefully when the agent sent a Goodbye.
void take_back(self_ptr self, link_return& back) {
  auto& st = self->state;
  if (!st.lent)
    return; // once
  st.lent = false;
  st.kept = std::move(back.keep_until_closed);
  st.trim = back.trim_heap;
  auto reason = back.reason ? back.reason
                            : make_error(errc::closed, "transport closed");
  if (!st.owned) {
    self->quit(std::move(reason));
    return;
  }
  if (!start_driving(self))
    return;
  if (!back.goodbye.empty())
    close_gracefully(self, back);
  else
    st.path().fail(std::move(reason)); // quits from on_down
}

/// Returns the promise of a requester's operation: `submit(cookie)` queues
/// it on the link, whose completion answers the promise; a transport that
/// no longer drives its link answers `closed` at once.
template <class Submit>
caf::typed_response_promise<uint64_t> request_on_link(self_ptr self,
                                                      Submit submit) {
  auto& st = self->state;
  auto rp = self->make_response_promise<uint64_t>();
  if (!st.driver.driving()) {
    rp.deliver(make_error(errc::closed, st.lent ? "the link is lent to an agent"
                                                : "transport closed"));
    return rp;
  }
  submit(st.replies.add(rp));
  st.driver.requested();
  return rp;
}

/// Queues an operation for a requester and returns its promise.
caf::typed_response_promise<uint64_t>
request_op(self_ptr self, op_kind kind, std::vector<uint8_t> header,
           local_mr local, mr_token remote,
           std::optional<uint32_t> imm = std::nullopt) {
  return request_on_link(self, [&](uint64_t cookie) {
    self->state.path().submit(kind, std::move(header), std::move(local), remote,
                              cookie, imm);
  });
}

/// Queues an atomic for a requester and returns its promise.
caf::typed_response_promise<uint64_t>
request_atomic(self_ptr self, op_kind kind, mr_token word, uint64_t compare_add,
               uint64_t swap) {
  return request_on_link(self, [&](uint64_t cookie) {
    self->state.path().submit_atomic(kind, word, compare_add, swap, cookie);
  });
}

/// Sets the subscriber, flushes what arrived before the subscription to it
/// and returns the link parameters.
caf::result<link_params> subscribe(self_ptr self, transport_subscriber sub) {
  auto& st = self->state;
  if (!st.driver.driving())
    return make_error(errc::closed, st.lent ? "the link is lent to an agent"
                                            : "transport closed");
  st.subscriber = std::move(sub);
  if (st.subscriber) {
    for (auto& ev : st.early) {
      if (ev.msg.valid())
        self->send(st.subscriber, recv_atom::value, std::move(ev.msg));
      else
        self->send(st.subscriber, imm_arrived_atom::value, ev.imm, ev.bytes);
    }
    st.early.clear();
    if (st.path().down())
      self->send(st.subscriber, qp_down_atom::value, st.path().failure());
  }
  return st.path().params();
}

/// What a transport starts with: its link (or why it could not be opened),
/// and whether it is lent to an agent.
struct transport_start {
  caf::expected<std::unique_ptr<driven_link>> opened;
  bool lend = false;
};

transport_actor::behavior_type
transport_impl(self_ptr self, transport_start start, polling how) {
  auto& st = self->state;
  st.self = self;
  if (!start.opened) {
    // Once per connection, and a peer chooses what it offers: a shared
    // budget.
    log_within("connections", spdlog::level::err,
               "transport: cannot open the connection's data path: "
                   + render(start.opened.error()));
    self->quit(start.opened.error());
    return transport_actor::behavior_type::make_empty_behavior();
  }
  st.driver.init(usable_polling(self->home_system(), how), st.poll_wanted);
  st.owned = std::move(*start.opened);
  st.lent = start.lend;
  if (!st.lent && !start_driving(self))
    return transport_actor::behavior_type::make_empty_behavior();
  self->set_exit_handler([self](caf::exit_msg& msg) {
    // Lent: the agent decides when the connection ends, and gives the link
    // back (its exit may overtake its `lease_end`).  During a graceful
    // close the wait for the peer (bounded by the close timeout) goes on.
    if (self->state.lent || self->state.closing)
      return;
    auto reason = msg.reason ? msg.reason
                             : make_error(errc::closed, "transport closed");
    if (self->state.driver.driving())
      self->state.path().fail(std::move(reason)); // quits from on_down
    else
      self->quit(std::move(reason));
  });
  return {
      // Polls first (CAF tries the handlers in order; see agent.cpp).
      [self](poll_atom) {
        if (self->state.quit_deferred) {
          self->quit(self->state.path().failure());
          return;
        }
        drain_cq(self);
      },
      [self](send_atom, std::vector<uint8_t>& header, local_mr& payload) {
        return request_op(self, op_kind::send, std::move(header),
                          std::move(payload), mr_token{});
      },
      [self](post_atom, std::vector<uint8_t>& header, local_mr& payload) {
        auto& st = self->state;
        if (!st.driver.driving())
          return;
        st.path().submit(op_kind::send, std::move(header), std::move(payload),
                         mr_token{}, 0);
        st.driver.posted();
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
        return subscribe(self, std::move(sub));
      },
      [self](cq_event_atom) {
        // The notification consumed the arming.
        self->state.driver.notified();
        self->state.yield_now = true;
      },
      [self](repost_atom, uint32_t) { self->state.driver.reclaim(); },
      [self](lease_end_atom, link_return& back) { take_back(self, back); },
      [self](close_timeout_atom) {
        // The peer did not close its side in time (or cannot: frozen,
        // gone), or said Goodbye itself: close ours now.
        if (self->state.driver.driving())
          self->state.path().fail(make_error(
              errc::closed, "graceful close: the peer said Goodbye too or "
                            "did not close its side within "
                            "close-timeout-ms"));
        else
          self->quit(make_error(errc::closed, "transport closed"));
      },
  };
}

/// The transport actor, run by the runner of every actor that drives a
/// link (scheduling/link_runner.hpp): its activation ends after every
/// poll.  Completions it handed on went to actors queued on this worker
/// (a requester), and an empty poll must not keep them waiting either.  A
/// polling transport would otherwise go on polling, up to
/// `scheduler.max-throughput` system calls, before they run (measured:
/// send ping-pong 8 B p50 72 us instead of 31 us).
class transport_runner
    : public link_runner<
          transport_runner, transport_actor,
          caf::stateful_actor<transport_state, transport_actor::base>> {
public:
  using super = link_runner<
      transport_runner, transport_actor,
      caf::stateful_actor<transport_state, transport_actor::base>>;

  transport_runner(caf::actor_config& cfg, transport_start start, polling how)
      : super(cfg), start_(std::move(start)), how_(how) {}

  behavior_type make_behavior() override {
    state.poll_wanted = &polls().wanted;
    state.direct = direct_wake_for(home_system(), this);
    return transport_impl(this, std::move(start_), how_);
  }

  /// Polls and the CQ's notification (no tail).
  void side_work(const due_work& w) {
    state.in_direct_poll = true;
    if (w.notified)
      state.driver.notified(); // drains too
    else if (w.poll)
      state.driver.drain();
    state.in_direct_poll = false;
  }

private:
  transport_start start_;
  polling how_;
};

/// Opens the data path of `qp` on the calling thread: registers and posts
/// its receives before anything lets our side talk to the peer, so the
/// peer's first messages find buffers.  The peer may send as soon as the
/// connection is established, slightly earlier; the QP's RNR retries bridge
/// that gap.
caf::expected<std::unique_ptr<driven_link>> open_link(device_ptr dev,
                                                      queue_pair_ptr qp) {
  auto l
      = link::open(std::move(dev), std::shared_ptr<queue_pair>{std::move(qp)});
  if (!l)
    return std::move(l.error());
  auto dl = std::make_unique<driven_link>();
  dl->path = std::shared_ptr<link>{std::move(*l)};
  return dl;
}

} // namespace

transport_actor spawn_transport(caf::actor_system& sys, device_ptr dev,
                                queue_pair_ptr qp, polling how) {
  transport_start start{open_link(std::move(dev), std::move(qp)), false};
  return sys.spawn<transport_runner>(std::move(start), how);
}

lent_link spawn_lending_transport(caf::actor_system& sys, device_ptr dev,
                                  queue_pair_ptr qp, polling how) {
  transport_start start{open_link(std::move(dev), std::move(qp)), true};
  lent_link result;
  result.how = how;
  // The link stays where it is when the transport takes it into its state.
  if (start.opened)
    result.link = start.opened->get();
  result.transport = sys.spawn<transport_runner>(std::move(start), how);
  return result;
}

} // namespace rdmactor::transport
