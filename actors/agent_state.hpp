#pragma once

// Internal to the agent (actors/agent*.cpp): its state and the functions
// its files share.  The agent is split along its seams: requests and
// timeouts (agent_requests.cpp), the responder that faces the untrusted
// peer (agent_responder.cpp), user operations (agent_user_ops.cpp), and the
// actor itself with its shutdown (agent.cpp).  Not installed.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <unordered_map>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/agent.hpp"
#include "common/error.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

namespace rdmactor::agent_detail {

namespace pb = protocol;
using transport::link_params;
using transport::transport_actor;

/// Request ids leave the top bit clear (room for a future flag).
constexpr uint64_t reserved_id_bit = uint64_t{1} << 63;

/// Access rights of memory allocated on behalf of the peer.
constexpr uint32_t peer_access = transport::access::local_write
                                 | transport::access::remote_write
                                 | transport::access::remote_read;

using completion_fn
    = std::function<void(const pb::Response* res, const caf::error& err)>;

/// A request to the peer waiting for its response.
struct pending_request {
  completion_fn done;
  std::chrono::steady_clock::time_point deadline;
};

using clock_type = std::chrono::steady_clock;

template <class T>
struct waiter {
  caf::typed_response_promise<T> rp;
  clock_type::time_point deadline;
};

/// A queue of items the peer sent plus the users waiting for one.
template <class T>
struct mailbox {
  std::deque<T> items;
  std::deque<waiter<T>> waiters;
  uint64_t queued_bytes = 0; // of `items`
};

inline uint64_t weight(const local_mr& x) {
  return x.size();
}

inline uint64_t weight(const remote_mr&) {
  return 0;
}

/// A memory region kept alive for the peer.
struct owned_mr {
  local_mr mr;
  bool by_peer; // allocated by the peer's AllocMR (counts to its quota)
};

/// One SendData call split into chunks.
struct send_data_job {
  caf::typed_response_promise<uint64_t> rp;
  local_mr mr;          // what is being sent
  size_t chunk_max = 0; // payload bytes per message
  size_t window = 1;    // chunks in flight at most
  size_t offset = 0;    // next byte to send
  size_t chunks = 0;    // chunks issued so far
  size_t outstanding = 0;
  uint64_t bytes = 0;
  bool failed = false;
};

struct agent_state {
  transport_actor transport;
  memory_pool_ptr pool;
  options opts;
  link_params link;
  std::mt19937_64 rng{std::random_device{}()};
  std::unordered_map<uint64_t, pending_request> pending;
  bool sweep_armed = false; // a timeout_atom is on its way
  /// AllocMR requests that timed out (oldest first, bounded): a late OK
  /// answer to one is released at once instead of staying allocated on the
  /// peer until the connection closes.
  std::deque<uint64_t> late_allocs;
  std::map<mr_token, owned_mr> owned;
  uint64_t peer_alloc_bytes = 0; // sum over owned entries with by_peer
  uint32_t peer_mrs = 0;
  uint32_t violations = 0; // refusals in a row
  mailbox<local_mr> data;
  /// Takes every chunk as it arrives instead of `data` (subscribe_data).
  data_subscriber subscriber;
  mailbox<local_mr> local_mrs;
  mailbox<remote_mr> remote_mrs;
  /// Receive buffers held by users through zero-copy SendData handles.
  std::shared_ptr<std::atomic<uint32_t>> held_buffers
      = std::make_shared<std::atomic<uint32_t>>(0);
  agent_stats counters;
  bool down = false;
  /// The peer's Hello offered cumulative SendData acknowledgements.
  bool peer_takes_cumulative_acks = false;
  /// SendData ids to acknowledge (OK) in one response at the next flush.
  std::vector<uint64_t> acks;
  bool acks_flush_scheduled = false; // a flush_acks_atom is on its way
  /// The node's allocator (alloc_local_mr).
  allocator_actor allocator;
  /// WRITEs and READs the transport has not answered yet: failed by
  /// `shut_down`, since a promise that dies with this actor would leave its
  /// caller waiting for its own timeout.
  std::unordered_map<uint64_t, caf::typed_response_promise<uint64_t>> one_sided;
  uint64_t next_one_sided = 0;

  static inline const char* name = "rdmactor.agent";

  /// When the last handle went (no `shut_down`), the regions lent to the
  /// peer still wait for the transport: it closes the QP when it sees
  /// our exit, and only then may the memory get a new owner.
  ~agent_state() {
    hand_to_transport(transport, std::move(owned));
  }

  /// Keeps `regions` alive until `tr` has terminated (see shut_down).
  static void hand_to_transport(const transport_actor& tr,
                                std::map<mr_token, owned_mr> regions) {
    if (regions.empty())
      return;
    auto keep
        = std::make_shared<std::map<mr_token, owned_mr>>(std::move(regions));
    auto ptr = caf::actor_cast<caf::strong_actor_ptr>(tr);
    if (!ptr)
      return; // no transport: nothing can reach the memory any more
    ptr->get()->attach_functor([keep]() mutable { keep.reset(); });
  }
};

using self_ptr = agent_actor::stateful_pointer<agent_state>;

// -- requests and timeouts (agent_requests.cpp) -------------------------------

std::chrono::milliseconds request_timeout(self_ptr self);

/// A fresh random request id, not pending.
uint64_t new_request_id(self_ptr self);

/// Encodes `msg` into a header buffer for the transport.
caf::expected<std::vector<uint8_t>> encode(self_ptr self,
                                           const pb::Message& msg);

/// Makes sure one sweep (`timeout_atom`) is scheduled.
void arm_sweep(self_ptr self);

/// Now plus the request timeout, on the actor system's clock.
clock_type::time_point deadline(self_ptr self);

/// Sends a response (or Hello) as a post: nothing waits for it.
void send_unsolicited(self_ptr self, const pb::Message& msg);

/// Finishes a pending request exactly once.
void complete(self_ptr self, uint64_t id, const pb::Response* res,
              const caf::error& err);

/// Sends a request with `payload` behind it and calls `done` with the
/// response, or with an error (send failure, timeout, peer gone).
void send_request(self_ptr self, pb::Message msg, local_mr payload,
                  completion_fn done);

/// Turns a non-OK response status into an error.
caf::error status_error(const pb::Response& res, const char* what);

/// Ends what waited past its deadline; re-arms while anything waits.
void sweep(self_ptr self);

/// Checks that `res` answers a request of kind `expected` with status OK.
caf::error check_response(const pb::Response& res,
                          pb::Response::BodyCase expected, const char* what);

mr_token to_token(const pb::MrToken& t);

pb::MrToken to_pb(const mr_token& t);

// -- the responder: frames from the peer (agent_responder.cpp) ----------------

/// Handles one inbound frame (request or response); never trusts it.
void on_message(self_ptr self, local_mr& buf);

// -- user operations (agent_user_ops.cpp) -------------------------------------

caf::typed_response_promise<remote_mr>
request_remote_mr(self_ptr self, uint64_t size, uint64_t align);

caf::typed_response_promise<mr_token> send_local_mr(self_ptr self, local_mr mr);

caf::typed_response_promise<mr_token> send_remote_mr(self_ptr self,
                                                     remote_mr mr);

/// ReleaseMR of `token`; answers the promise only when `answer`.
caf::typed_response_promise<uint64_t> release(self_ptr self, mr_token token,
                                              bool answer);

caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr);

/// Sets (or, with an invalid handle, ends) the data subscription.
uint64_t subscribe_data(self_ptr self, data_subscriber sub);

/// One-sided operations, checked locally first.
caf::result<uint64_t> write_to_peer(self_ptr self, local_mr src, remote_mr dst);
caf::result<uint64_t> read_from_peer(self_ptr self, local_mr dst,
                                     remote_mr src);

/// Acknowledges the SendData `id` (OK): at once, or gathered into one
/// cumulative response when the peer takes those.
void ack_send_data(self_ptr self, uint64_t id);

/// Sends the gathered acknowledgements in one response.
void flush_acks(self_ptr self);

// -- shutdown (agent.cpp) -----------------------------------------------------

/// Fails everything pending, hands what the peer holds to the transport
/// and quits; idempotent.
void shut_down(self_ptr self, const caf::error& cause);

// -- receive mailboxes --------------------------------------------------------

template <class T>
void put(self_ptr self, mailbox<T>& box, T item) {
  if (!box.waiters.empty()) {
    auto w = std::move(box.waiters.front());
    box.waiters.pop_front();
    w.rp.deliver(std::move(item));
    return;
  }
  box.queued_bytes += weight(item);
  box.items.emplace_back(std::move(item));
}

template <class T>
caf::typed_response_promise<T> take(self_ptr self, mailbox<T>& box) {
  auto rp = self->make_response_promise<T>();
  if (!box.items.empty()) {
    box.queued_bytes -= weight(box.items.front());
    rp.deliver(std::move(box.items.front()));
    box.items.pop_front();
    return rp;
  }
  if (self->state.down) {
    rp.deliver(make_error(errc::peer_gone,
                          "the peer " + self->state.link.peer + " is gone"));
    return rp;
  }
  box.waiters.push_back(waiter<T>{rp, deadline(self)});
  arm_sweep(self);
  return rp;
}

/// Fails the waiters of `box` whose deadline passed (they queue in deadline
/// order); returns whether any are left.
template <class T>
bool expire(self_ptr self, mailbox<T>& box, clock_type::time_point now) {
  while (!box.waiters.empty() && box.waiters.front().deadline <= now) {
    box.waiters.front().rp.deliver(
        make_error(errc::request_timeout,
                   "nothing arrived from " + self->state.link.peer + " within "
                       + std::to_string(self->state.opts.request_timeout_ms)
                       + " ms (request-timeout-ms)"));
    box.waiters.pop_front();
  }
  return !box.waiters.empty();
}

template <class T>
void fail_all(mailbox<T>& box, const caf::error& err) {
  for (auto& w : box.waiters)
    w.rp.deliver(err);
  box.waiters.clear();
  box.items.clear();
  box.queued_bytes = 0;
}

} // namespace rdmactor::agent_detail
