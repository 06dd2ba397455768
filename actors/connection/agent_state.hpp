#pragma once

// Internal to the agent actor (actors/connection/agent*.cpp): its state and
// the functions its files share.  The protocol itself lives in `agent_core`
// (actors/core/, no actor); the actor keeps the CAF glue: the actor and its
// shutdown and the core's sink (agent.cpp), and the user operations with
// their response promises (agent_user_ops.cpp).  Not installed.

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <unordered_map>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/connection/keepalive_timer.hpp"
#include "actors/connection/user_mailbox.hpp"
#include "actors/core/agent_core.hpp"
#include "actors/core/remote_gate.hpp"
#include "actors/remote/remote_actors.hpp"
#include "common/heap_trim.hpp"
#include "rdmactor/data_handler.hpp"
#include "rdmactor/detail/agent.hpp"
#include "rdmactor/error.hpp"
#include "scheduling/direct_poll.hpp"
#include "scheduling/link_driver.hpp"
#include "transport/cookie_table.hpp"

namespace rdmactor::agent_detail {

using transport::lent_link;
using transport::link_params;
using transport::transport_actor;

using clock_type = std::chrono::steady_clock;

/// A region from the peer with the tag of its SendMR (0: none).
template <class T>
struct tagged {
  T value;
  uint64_t tag = 0;
};

/// An immediate value from the peer: of a write_with_imm (`bytes` written,
/// no chunk) or of a send_data chunk (the chunk).
struct imm_item {
  uint32_t imm = 0;
  uint64_t bytes = 0;
  local_mr chunk;
};

/// What an item for a receive call holds of our memory (it counts against
/// peer-max-queued-bytes): a received chunk its bytes; a region handle or
/// a write's immediate value nothing.
struct item_weight {
  uint64_t operator()(const local_mr& x) const noexcept {
    return x.size();
  }
  template <class T>
  uint64_t operator()(const tagged<T>&) const noexcept {
    return 0;
  }
  uint64_t operator()(const imm_item& x) const noexcept {
    return x.chunk.size();
  }
};

/// What the peer sent for one kind of receive call, and the calls waiting.
template <class Item>
using receive_box = user_mailbox<Item, item_weight>;

struct agent_state;

using self_ptr = agent_actor::stateful_pointer<agent_state>;

/// Who hears of a one-sided operation: a user's request (`rp`) or a data
/// handler's callback (`fn`, set instead).
struct one_sided_waiter {
  caf::typed_response_promise<uint64_t> rp;
  std::function<void(caf::expected<uint64_t>)> fn;

  void deliver(uint64_t n) {
    if (fn)
      fn(n);
    else
      rp.deliver(n);
  }

  void deliver(caf::error err) {
    if (fn)
      fn(std::move(err));
    else
      rp.deliver(std::move(err));
  }
};

/// Calls `handler->on_detach(reason)`; what it throws is logged, never
/// unwound into the agent (agent_data_handler.cpp).
void notify_detach(data_handler_ptr handler, const caf::error& reason) noexcept;

/// The context a data handler gets (agent_data_handler.cpp): its calls go
/// straight to the core and the link.  One per agent; valid while the
/// agent lives.
class handler_context final : public data_context {
public:
  explicit handler_context(self_ptr self) : self_(self) {}

  void send_data(local_mr chunk, op_done done) override;
  void write(local_mr src, remote_mr dst, op_done done) override;
  void read(local_mr dst, remote_mr src, op_done done) override;
  uint64_t connection() const noexcept override;

private:
  self_ptr self_;
};

/// Carries out the core's effects with the actor (definitions in
/// agent_actor_sink.cpp): posts go to the agent's link (to the transport once
/// it took the link over), deliveries to the user mailboxes or the data
/// subscriber, a disconnect is a `qp_down_atom` to the actor itself, and
/// so are flushes and sweeps.
class actor_sink final : public agent_core::sink {
public:
  explicit actor_sink(self_ptr self) : self_(self) {}

  void post(std::vector<uint8_t> header, local_mr payload) override;
  std::vector<uint8_t> header_buffer() override;
  void post_upkeep(std::vector<uint8_t> header) override;
  void upkeep_frame() override;
  void pack_frames(size_t max_bytes) override;
  void deliver_data(local_mr chunk) override;
  void deliver_local_mr(local_mr mr) override;
  void deliver_remote_mr(const mr_token& token) override;
  void deliver_imm_data(local_mr chunk, uint32_t imm) override;
  void deliver_write_imm(uint32_t imm, uint64_t bytes) override;
  size_t queued_imms() const override;
  uint32_t receive_buffers_held() const override;
  void deliver_tagged_local_mr(local_mr mr, uint64_t tag) override;
  void deliver_tagged_remote_mr(const mr_token& token, uint64_t tag,
                                uint32_t lease_ms) override;
  void disconnect(const caf::error& reason) override;
  void schedule_ack_flush() override;
  void schedule_sweep() override;
  uint64_t queued_data_bytes() const override;
  size_t queued_remote_mrs() const override;
  void read(local_mr dst, const mr_token& src,
            std::function<void(const caf::error&)> done) override;
  caf::error deliver_actor_message(const protocol::ActorMessage& m,
                                   const uint8_t* data, size_t len) override;
  actor_lookup_result find_actor(const std::string& name) override;
  void refuse_actor_message(const protocol::ActorMessage& m,
                            const caf::error& why) override;
  partial_actor_state partial_actor() const override;
  void drop_partial_actor(const caf::error& why) override;
  void actor_flow(bool flow, uint64_t window_messages,
                  uint64_t window_bytes) override;
  caf::error take_actor_ack(uint64_t messages, uint64_t bytes) override;

private:
  self_ptr self_;
};

/// What an operation's caller hears when it completes: the bytes moved
/// (an atomic: the word's old value), or why it failed.
using op_done = std::function<void(caf::expected<uint64_t>)>;

/// The callers of operations in flight on the agent's link.
using op_table = transport::cookie_table<op_done>;

/// Hears the agent's link (agent.cpp): frames go to the core, completions
/// to their callers, a failure becomes a `qp_down_atom` to the agent.
/// Called from inside the link's calls, on the agent's activation.
class link_events final : public transport::link_observer {
public:
  explicit link_events(self_ptr self) : self_(self) {}

  void on_done(uint64_t cookie, caf::expected<uint64_t> result) override;
  void on_message(local_mr msg) override;
  void on_imm(uint32_t imm, uint32_t bytes) override;
  void on_down(const caf::error& cause) override;

private:
  self_ptr self_;
};

struct agent_state {
  explicit agent_state(self_ptr self)
      : events(self), sink(self), handler_ctx(self) {}

  /// The transport actor: owns the link and lent it to us; it closes the
  /// link once we give it back (`give_link_back`).
  transport_actor transport;
  /// Drives the lent link while the agent lives: posts and polls from the
  /// agent's own activations (scheduling/link_driver.hpp).
  transport::link_driver driver;
  /// The link has gone back to the transport (or never came).
  bool link_given_back = false;
  link_events events;
  op_table ops;
  /// The runner's flags (scheduling/direct_poll.hpp): `wanted` is the
  /// driver's poll flag, `tail` the held acknowledgement flush
  /// (actor_sink::schedule_ack_flush, flush_acks in agent.cpp).
  transport::direct_poll* runner_flags = nullptr;
  /// The runner, which takes the CQ's notification without a message.
  transport::direct_wake* direct = nullptr;
  /// Frames arrived since `after_poll` last ran.
  bool frames_seen = false;
  /// The link failed or the core asked to disconnect: frames from now on
  /// are dropped (a `qp_down_atom` to ourselves shuts down).
  bool link_failing = false;
  actor_sink sink;
  /// Remote actors of this connection
  /// (actors/connection/agent_remote_actors.cpp).
  remote_actors_ptr actors;
  /// The batch of remote-actor messages being posted: swapped with the
  /// remote actors' outbox, so that both keep their capacity.
  actor_outbox actor_batch;
  /// The protocol; emplaced when the actor starts (agent_impl).
  std::optional<agent_core> core;
  bool sweep_armed = false; // a timeout_atom is on its way
  /// Bytes of actor messages delivered in the running activation; past
  /// `tuning::agent_yield_after_bytes` the agent gives its worker back
  /// (agent_runner::resume in agent.cpp).
  size_t activation_delivered_bytes = 0;
  /// End the running activation after this message (agent_runner).
  bool yield_now = false;
  /// A keepalive check is armed on the process's keepalive timer (which
  /// holds us weakly: a delayed message to ourselves would keep a
  /// connection whose last handle went open until it is due).
  bool keepalive_armed = false;
  receive_box<local_mr> data;
  /// Takes every chunk as it arrives instead of `data` (subscribe_data).
  data_subscriber subscriber;
  /// Takes every chunk and immediate value instead of `data` and `imms`
  /// (subscribe_data with a chunk_subscriber); set at most one of both.
  chunk_subscriber chunk_sub;
  /// Takes every chunk inside our activation instead of `data`
  /// (subscribe_data with a data_handler_ptr; agent_data_handler.cpp);
  /// set at most one of it and the subscribers.
  data_handler_ptr handler;
  /// Chunks for `handler`, delivered while the core read frames: it runs
  /// after the poll (run_data_handler), never from inside the core.
  std::vector<local_mr> handler_chunks;
  /// What `handler` gets to act on the connection.
  handler_context handler_ctx;
  /// Immediate values for receive_imm.
  receive_box<imm_item> imms;
  receive_box<tagged<local_mr>> local_mrs;
  receive_box<tagged<remote_mr>> remote_mrs;
  /// The node's allocator (alloc_local_mr).
  allocator_actor allocator;
  /// Bytes held by the local_mrs of alloc_for_peer; shared with their
  /// release actions, which may run on any thread after the agent is gone.
  std::shared_ptr<std::atomic<uint64_t>> claimed
      = std::make_shared<std::atomic<uint64_t>>(0);
  /// WRITEs, READs and atomics the transport has not answered yet.  When
  /// the connection ends with some of them pending, the agent drains
  /// (`drain_one_sided`): a success still reaches its caller, and the
  /// failures are answered once the transport has terminated, i.e. when
  /// its queue pair can no longer place data into the caller's buffer.
  std::unordered_map<uint64_t, one_sided_waiter> one_sided;
  uint64_t next_one_sided = 0;
  /// Set by `shut_down` while one-sided operations drain: what they fail
  /// with, and what the agent quits with once the transport is gone.
  caf::error drain_error;
  caf::error drain_reason;
  bool draining = false;

  static inline const char* name = "rdmactor.agent";

  /// When the last handle went (no `shut_down`), the link goes back to the
  /// transport as in `shut_down`: with our Goodbye if the peer offered it,
  /// and with the regions lent to the peer, which are released only once
  /// the transport has closed the queue pair.
  ~agent_state() {
    if (handler) // no shut_down ran (the last handle went)
      notify_detach(
          std::move(handler),
          make_error(errc::closed, "the last handle to the connection went"));
    auto why = std::string{"the last handle to the connection went"};
    if (!core) {
      give_link_back(make_error(errc::closed, why), nullptr, why, {});
      return;
    }
    give_link_back(make_error(errc::closed, why),
                   core->closed() ? nullptr : &*core, why, core->take_owned());
  }

  /// Stops driving the link and gives it back to the transport that lent
  /// it, once (`lease_end_atom`): with our Goodbye (saying `why`) when
  /// `closing` (a core not closed yet) is given and the peer offered
  /// Goodbye (graceful close: the transport posts it and waits for the
  /// peer's side to close), else to fail with `reason`; with `regions`
  /// (what the peer may still reach through tokens it holds), which the
  /// transport keeps until its queue pair is closed.  Sent in the
  /// transport's own name: our handle may go before the transport handled
  /// it.  Returns whether a Goodbye went.  Definition in
  /// agent_keepalive.cpp.
  bool give_link_back(const caf::error& reason, agent_core* closing,
                      const std::string& why, owned_regions regions);
};

// -- timeouts (agent.cpp) -----------------------------------------------------

/// Makes sure one sweep (`timeout_atom`) is scheduled.
void arm_sweep(self_ptr self);

/// Now plus the request timeout, on the actor system's clock.
clock_type::time_point deadline(self_ptr self);

/// Ends what waited past its deadline; re-arms while anything waits.
void sweep(self_ptr self);

// -- keepalive and graceful close (agent_keepalive.cpp) -----------------------

/// Called after every inbound frame: ends the connection when the peer
/// said Goodbye, starts the keepalive timer when it can run.
void after_frame(self_ptr self);

/// The keepalive timer fired: pings, or ends a silent peer (`peer_gone`).
void on_keepalive(self_ptr self);

// -- remote actors (agent_remote_actors.cpp) ----------------------------------

/// Creates the connection's remote actors (when the agent starts).
void start_remote_actors(self_ptr self, actor_directory_ptr node_actors);

/// `(publish_atom, name, actor) -> replaced`.
caf::result<bool> publish_actor(self_ptr self, const std::string& name,
                                const caf::actor& actor);

/// `(lookup_atom, name[, interface]) -> caf::actor`.
caf::typed_response_promise<caf::actor>
lookup_actor(self_ptr self, const std::string& name,
             std::vector<std::string> expected_interface);

/// Proxies handed serialized messages over (`actor_out_atom`, one per
/// batch): post every message of the outbox, in order.
void post_actor_messages(self_ptr self);

// -- user operations (agent_user_ops.cpp) -------------------------------------

caf::typed_response_promise<remote_mr>
request_remote_mr(self_ptr self, uint64_t size, uint64_t align);

/// Memory counted against peer-max-claim-bytes until its last handle goes.
caf::result<local_mr> alloc_for_peer(self_ptr self, uint64_t size,
                                     uint64_t align);

caf::typed_response_promise<mr_token> send_local_mr(self_ptr self, local_mr mr);

caf::typed_response_promise<mr_token> send_remote_mr(self_ptr self,
                                                     remote_mr mr);

/// ReleaseMR of `token`; answers the promise only when `answer`.
caf::typed_response_promise<uint64_t> release(self_ptr self, mr_token token,
                                              bool answer);

caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr);

/// Sets (or, with an invalid handle, ends) the data subscription.
uint64_t subscribe_data(self_ptr self, data_subscriber sub);

/// Sets (or, with an invalid handle, ends) the subscription that names the
/// connection and takes immediate values.
uint64_t subscribe_chunks(self_ptr self, chunk_subscriber sub);

/// Ends every subscription (the subscribers' and the data handler's)
/// before another is set.
void unsubscribe(self_ptr self);

/// Checks a one-sided operation locally before anything is posted.
caf::error check_one_sided(self_ptr self, const char* what,
                           const local_mr& local, const remote_mr& remote);

/// Posts a WRITE or READ for a data handler: `done` hears of it as a
/// user's request would (agent_user_ops.cpp).
void one_sided_for_handler(self_ptr self, transport::op_kind kind,
                           const char* what, local_mr local, remote_mr remote,
                           std::function<void(caf::expected<uint64_t>)> done);

// -- data handler (agent_data_handler.cpp) ------------------------------------

/// Sets (or, with a null pointer, ends) the inline data handler; hands the
/// queued chunks to it at once.  Returns how many.
uint64_t subscribe_handler(self_ptr self, data_handler_ptr handler);

/// Ends the data handler's subscription (`on_detach(reason)`), if one is
/// set; chunks not yet handed to it go back to `data`.
void detach_handler(self_ptr self, const caf::error& reason);

/// Hands the chunks gathered in `handler_chunks` to the handler.  Called
/// after every poll (after_poll), outside the core.
void run_data_handler(self_ptr self);

/// Registered local memory with the access rights peers get.
caf::result<local_mr> alloc_local_mr(self_ptr self, uint64_t size,
                                     uint64_t align, uint32_t access);

/// SendMR with an application tag.
caf::typed_response_promise<mr_token> send_local_mr(self_ptr self, local_mr mr,
                                                    uint64_t tag);
caf::typed_response_promise<mr_token>
send_remote_mr(self_ptr self, remote_mr mr, uint64_t tag);

/// SendMR LOCAL with a tag and a lease.
caf::typed_response_promise<mr_token>
send_local_mr(self_ptr self, local_mr mr, uint64_t tag, uint32_t lease_ms);

/// RenewLease of a region the peer lent us with a lease.
caf::result<uint32_t> renew_lease(self_ptr self, remote_mr mr,
                                  uint32_t lease_ms);

/// `check_remote` (actors/core/remote_gate.hpp) of `mr` for `use` by this
/// agent, now by its clock: every use of a remote_mr passes it.
caf::error check_remote(self_ptr self, const remote_mr& mr, remote_use use,
                        std::string_view what);

/// SendData of `size` bytes at `data`, copied into pool memory first
/// (actors/connection/agent_send_bytes.cpp); with `imm`, every chunk carries
/// it.
caf::result<uint64_t> send_bytes(self_ptr self, const void* data, size_t size,
                                 std::optional<uint32_t> imm);

/// SendData whose chunks carry `imm`.
caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr,
                                                uint32_t imm);

/// RDMA WRITE with immediate data, checked locally first.
caf::result<uint64_t> write_with_imm(self_ptr self, local_mr src, remote_mr dst,
                                     uint32_t imm);

/// One-sided operations, checked locally first.
caf::result<uint64_t> write_to_peer(self_ptr self, local_mr src, remote_mr dst);
caf::result<uint64_t> read_from_peer(self_ptr self, local_mr dst,
                                     remote_mr src);

// -- atomics (agent_atomics.cpp) ----------------------------------------------

/// Atomics on the first 8 bytes of `word`, checked locally first; answer:
/// the word's old value.
caf::result<uint64_t> fetch_add_on_peer(self_ptr self, remote_mr word,
                                        uint64_t add);
caf::result<uint64_t> compare_swap_on_peer(self_ptr self, remote_mr word,
                                           uint64_t expected, uint64_t desired);

// -- the link (agent_link.cpp) ------------------------------------------------

/// Posts an operation a caller waits for (a WRITE, READ or WRITE with
/// immediate data) on the agent's link; `done` hears how it ended.  Once
/// the link went back to the transport (shut down), `done` hears `closed`
/// at once.  From a handler of the agent.
void submit_op(self_ptr self, transport::op_kind kind, local_mr local,
               const mr_token& remote, std::optional<uint32_t> imm,
               op_done done);

/// Posts an atomic on the 8-byte word `word` names; as `submit_op`.
void submit_atomic_op(self_ptr self, transport::op_kind kind,
                      const mr_token& word, uint64_t compare_add, uint64_t swap,
                      op_done done);

/// Shuts down with `cause` from a handler (a `qp_down_atom` to the agent
/// itself), for callers inside the link's calls, where handing the link
/// on is not allowed; frames from now on are dropped.  Once.
void shut_down_later(self_ptr self, const caf::error& cause);

/// Runs after the link was polled: what frames that arrived ask of the
/// actor (`after_frame`).  `in_handler`: called from a message handler;
/// otherwise (a poll in `resume`) a shutdown they ask for is left to the
/// `poll_atom` handler, since CAF cleans up after `quit` only there.
void after_poll(self_ptr self, bool in_handler);

// -- shutdown (agent.cpp) -----------------------------------------------------

/// Fails everything pending, hands what the peer holds to the transport
/// and quits, after draining the one-sided operations the transport has
/// not answered yet (`drain_one_sided`); idempotent.  `transport_gone`:
/// the transport has terminated (its exit reached us), so its queue pair
/// is closed.
void shut_down(self_ptr self, const caf::error& cause,
               bool transport_gone = false);

/// Quits with `reason` once no one-sided operation is pending; those the
/// transport fails are answered with `err` only after the transport has
/// terminated (`transport_gone`), so that no fabric still writes into a
/// buffer its caller already got back.  Called by `shut_down`.
void drain_one_sided(self_ptr self, caf::error reason, caf::error err,
                     bool transport_gone);

// -- receive mailboxes --------------------------------------------------------

/// What a call fails with once the connection closed: `peer_gone`.
inline caf::error peer_is_gone(self_ptr self) {
  return self->state.core->peer_gone_error();
}

/// The error of a receive call that waited request-timeout-ms in vain.
inline caf::error nothing_arrived(self_ptr self) {
  return make_error(
      errc::request_timeout,
      "nothing arrived from " + self->state.core->link().peer + " within "
          + std::to_string(self->state.core->opts().request_timeout_ms)
          + " ms (request-timeout-ms)");
}

/// Whether a transport's answer is a value (not a caf::error).
inline bool is_value(const uint64_t&) {
  return true;
}
inline bool is_value(const caf::error&) {
  return false;
}

/// The link's completion of an operation started by run_one_sided or
/// start_one_sided: hands the value or the error to its `finish`.
template <class Finish>
auto finish_with(Finish finish) {
  return [finish](caf::expected<uint64_t> n) mutable {
    if (n)
      finish(*n);
    else
      finish(n.error());
  };
}

/// The part of run_one_sided after the closed check, with the waiter given
/// (a data handler's callback: handler_context).
template <class Keep, class Start>
void start_one_sided(self_ptr self, one_sided_waiter waiter, Keep keep,
                     Start start) {
  auto& st = self->state;
  auto id = st.next_one_sided++;
  st.one_sided.emplace(id, std::move(waiter));
  start([self, id, keep = std::move(keep)](auto&& result) mutable {
    static_cast<void>(keep);
    auto& st = self->state;
    auto i = st.one_sided.find(id);
    if (i == st.one_sided.end())
      return;
    // While draining, a failure waits for the transport's end (the QP may
    // still write into the buffer until then); a success is final.
    if (st.draining && !is_value(result))
      return;
    i->second.deliver(std::forward<decltype(result)>(result));
    st.one_sided.erase(i);
    if (st.draining && st.one_sided.empty())
      self->quit(st.drain_reason);
  });
}

/// Registers a one-sided operation of the user (write, read,
/// write_with_imm, an atomic) in `one_sided`, or fails with `peer_gone`
/// once the connection closed.  `start(finish)` posts it; `finish(result)`
/// answers the user once (closing may have answered already) and keeps
/// `keep` (the remote_mr) alive until the transport answered.
template <class Keep, class Start>
caf::result<uint64_t> run_one_sided(self_ptr self, Keep keep, Start start) {
  auto& st = self->state;
  if (st.core->closed())
    return peer_is_gone(self);
  auto rp = self->make_response_promise<uint64_t>();
  start_one_sided(self, one_sided_waiter{rp, {}}, std::move(keep),
                  std::move(start));
  return rp;
}

// -- receive calls ------------------------------------------------------------

/// Answers a receive call with the next item of `box`, or when one comes
/// (`peer_gone` once the connection closed, `request_timeout` after
/// request-timeout-ms: sweep): `answer(rp, item)` delivers the item in the
/// shape this call replies with.
template <class... Ts, class Item, class Answer>
caf::typed_response_promise<Ts...>
take_as(self_ptr self, receive_box<Item>& box, Answer answer) {
  auto rp = self->make_response_promise<Ts...>();
  if (auto item = box.take()) {
    answer(rp, std::move(*item));
    return rp;
  }
  if (self->state.core->closed()) {
    rp.deliver(peer_is_gone(self));
    return rp;
  }
  box.wait({[rp, answer](Item&& x) mutable { answer(rp, std::move(x)); },
            [rp](const caf::error& err) mutable { rp.deliver(err); },
            deadline(self)});
  arm_sweep(self);
  return rp;
}

/// Answers a receive call with the next item of `box` as it is.
template <class T>
caf::typed_response_promise<T> take(self_ptr self, receive_box<T>& box) {
  return take_as<T>(self, box,
                    [](auto& rp, T&& x) { rp.deliver(std::move(x)); });
}

} // namespace rdmactor::agent_detail
