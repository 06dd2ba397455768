#include "rdmactor/detail/transport_actor.hpp"

#include <atomic>
#include <chrono>
#include <deque>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/activation.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/scheduler_job.hpp"
#include "scheduling/direct_poll.hpp"
#include "scheduling/link_driver.hpp"
#include "transport/cookie_table.hpp"
#include "transport/link.hpp"

namespace rdmactor::transport {

namespace {

/// The promises of operations a requester waits for.
using reply_table = cookie_table<caf::typed_response_promise<uint64_t>>;

struct transport_state;

/// Where the byte that tells an agent frame's kind sits: behind the
/// frame's 4-byte length (protocol/codec.hpp).
constexpr size_t goodbye_marker_offset = 4;

using self_ptr = transport_actor::stateful_pointer<transport_state>;

struct transport_state : link_observer {
  self_ptr self = nullptr;
  /// Drives the data path (scheduling/link_driver.hpp); drives nothing when
  /// the link failed to open, or while it is parked (an agent drives it).
  link_driver driver;
  /// Parked: where the agent leaves its link when it is done with it.
  std::shared_ptr<link_handoff> handoff;
  /// Parked: the connection's parameters (for `subscribe`).
  link_params parked_params;
  reply_table replies;

  /// The runner's poll flag (scheduling/direct_poll.hpp).
  std::atomic<bool>* poll_wanted = nullptr;
  /// `drain` runs from `resume`, outside any message handler.
  bool in_direct_poll = false;
  /// The link went down during such a poll: quit from a handler.
  bool quit_deferred = false;
  /// The last message was a poll: the activation ends so that what waits
  /// on this worker runs before our next poll (see transport_runner).
  bool yield_now = false;

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

  bool down() const {
    return driver.down();
  }

  link& path() {
    return driver.path();
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

/// Drains the CQ (link_driver::drain); the activation ends after it.
void drain_cq(self_ptr self) {
  self->state.driver.drain();
  self->state.yield_now = true;
}

/// Starts driving `dl` (at spawn, or when a parked transport takes over an
/// agent's link); quits when it is down already.  From a handler.
void start_driving(self_ptr self, std::unique_ptr<driven_link> dl) {
  auto& st = self->state;
  auto& path = *dl->path;
  st.driver.start(std::move(dl), st,
                  caf::actor_cast<caf::weak_actor_ptr>(self));
  if (path.down())
    self->quit(path.failure());
}

/// A parked transport takes over what the agent left (see
/// `spawn_parked_transport`); first thing in every handler that touches
/// the link.
void adopt(self_ptr self) {
  auto& st = self->state;
  if (!st.handoff || st.driver.driving())
    return;
  if (auto dl = st.handoff->take())
    start_driving(self, std::move(dl));
}

/// Returns the promise of a requester's operation: `submit(cookie)` queues
/// it on the link, whose completion answers the promise; a transport that
/// no longer drives its link answers `closed` at once.
template <class Submit>
caf::typed_response_promise<uint64_t> request_on_link(self_ptr self,
                                                      Submit submit) {
  adopt(self);
  auto& st = self->state;
  auto rp = self->make_response_promise<uint64_t>();
  if (!st.driver.driving()) {
    rp.deliver(make_error(errc::closed, "transport closed"));
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

/// Flushes what arrived before the subscription to `sub` (already stored
/// in the state, strongly or weakly) and returns the link parameters.
link_params subscribe(self_ptr self, const transport_subscriber& sub) {
  auto& st = self->state;
  if (!st.driver.driving())
    return st.parked_params; // parked: the agent drives the link for now
  if (sub) {
    for (auto& ev : st.early) {
      if (ev.msg.valid())
        self->send(sub, recv_atom::value, std::move(ev.msg));
      else
        self->send(sub, imm_arrived_atom::value, ev.imm, ev.bytes);
    }
    st.early.clear();
    if (st.path().down())
      self->send(sub, qp_down_atom::value, st.path().failure());
  }
  return st.path().params();
}

/// What a transport starts with: a link to drive now, or (parked) a place
/// where an agent leaves its link later.
struct transport_start {
  caf::expected<std::unique_ptr<driven_link>> opened;
  std::shared_ptr<link_handoff> handoff;
  link_params parked_params;
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
  st.handoff = std::move(start.handoff);
  st.parked_params = std::move(start.parked_params);
  if (*start.opened)
    start_driving(self, std::move(*start.opened));
  self->set_exit_handler([self](caf::exit_msg& msg) {
    // During a graceful close the agent's exit follows its close request:
    // the wait for the peer (bounded by the close timeout) goes on.
    if (self->state.closing)
      return;
    adopt(self);
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
        adopt(self);
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
        self->state.driver.notified();
        self->state.yield_now = true;
      },
      [self](repost_atom, uint32_t) { self->state.driver.reclaim(); },
      [self](close_atom, std::vector<uint8_t>& header, uint32_t timeout_ms,
             uint8_t marker) {
        auto& st = self->state;
        if (st.closing)
          return;
        adopt(self);
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
        st.path().set_closing();
        st.path().submit(op_kind::send, std::move(header), local_mr{},
                         mr_token{}, 0);
        st.driver.posted();
        self->delayed_send(self, std::chrono::milliseconds{timeout_ms},
                           close_timeout_atom::value);
      },
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

/// The transport actor, run one message at a time: its activation ends
/// after every poll.  Completions it handed on went to actors queued on
/// this worker (the agent, a requester), and an empty poll must not keep
/// them waiting either.  A polling transport would otherwise go on
/// polling, up to `scheduler.max-throughput` system calls, before they run
/// (measured: send ping-pong 8 B p50 72 us instead of 31 us).  Polls run
/// without messages (scheduling/direct_poll.hpp).
class transport_runner
    : public with_scheduler_job<
          caf::stateful_actor<transport_state, transport_actor::base>> {
public:
  using super = with_scheduler_job<
      caf::stateful_actor<transport_state, transport_actor::base>>;

  transport_runner(caf::actor_config& cfg, transport_start start, polling how)
      : super(cfg), start_(std::move(start)), how_(how) {}

  behavior_type make_behavior() override {
    state.poll_wanted = &polls_.wanted;
    return transport_impl(this, std::move(start_), how_);
  }

  /// Called by a CAF worker (one thread at a time); see run_activation.
  caf::resumable::resume_result resume(caf::execution_unit* ctx,
                                       size_t max_throughput) override {
    // Not after a result other than resume_later: the actor may already
    // run on another worker then, or its state be gone.
    bool alive = !getf(is_terminated_flag);
    if (alive)
      state.yield_now = false;
    return resume_with_polls<transport_actor>(
        this, polls_, alive,
        [&](const due_work&) { // polls only: no tail, no direct wake
          detach_caf_logger();
          context(ctx);
          state.in_direct_poll = true;
          state.driver.drain();
          state.in_direct_poll = false;
        },
        [&] {
          return run_activation(
              max_throughput, [&] { return super::resume(ctx, 1); },
              [&] { return state.yield_now; });
        });
  }

private:
  transport_start start_;
  polling how_;
  transport::direct_poll polls_;
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
  transport_start start{open_link(std::move(dev), std::move(qp)), nullptr,
                        link_params{}};
  return sys.spawn<transport_runner>(std::move(start), how);
}

parked_link spawn_parked_transport(caf::actor_system& sys, device_ptr dev,
                                   queue_pair_ptr qp, polling how) {
  auto params = link_params_of(*qp);
  auto opened = open_link(std::move(dev), std::move(qp));
  parked_link result;
  result.handoff = std::make_shared<link_handoff>();
  result.how = how;
  if (opened) {
    result.handoff->put(std::move(*opened));
    opened = std::unique_ptr<driven_link>{};
  }
  transport_start start{std::move(opened), result.handoff, std::move(params)};
  result.transport = sys.spawn<transport_runner>(std::move(start), how);
  return result;
}

} // namespace rdmactor::transport
