// The remote actors of a connection: messages to the peer's actors
// (a proxy's forward, and refusals of what cannot travel).

#include "actors/remote/remote_actors.hpp"

#include <algorithm>
#include <cstring>
#include <typeinfo>

#include <caf/actor_cast.hpp>
#include <caf/atom.hpp>
#include <caf/attachable.hpp>
#include <caf/exit_reason.hpp>
#include <caf/make_actor.hpp>
#include <caf/proxy_registry.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/sec.hpp>

#include "actors/remote/actor_codec.hpp"
#include "common/logging.hpp"
#include "common/node_identity.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "rdmactor/atoms.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

namespace {

/// Lines about messages we cannot forward share one budget: an actor in a
/// loop must not flood the log.
rate_limiter::verdict proxy_log_budget() {
  return shared_log_budget("remote_actors")
      .take(rate_limiter::clock_type::now());
}

} // namespace

bool remote_actors::is_proxy(caf::actor_control_block& actor) const {
  // Ours carry this node's id, CAF's carry their actor's (a dynamic_cast
  // to caf::actor_proxy costs ~2,300 instructions).
  const caf::abstract_actor* ptr = actor.get();
  return typeid(*ptr) == typeid(remote_actor_proxy)
         || actor.node() != sys_.node();
}

// -- to the peer --------------------------------------------------------------

void remote_actors::refuse(const caf::mailbox_element& what,
                           const caf::error& err, caf::execution_unit* ctx) {
  if (what.mid.is_request() && what.sender) {
    what.sender->enqueue(
        caf::make_mailbox_element(nullptr, what.mid.response_id(), {}, err),
        ctx);
    return;
  }
  if (what.mid.is_response())
    return; // an answer to a peer that is gone: nobody waits for it here
  if (auto v = proxy_log_budget())
    log().warn("remote actors of {}: dropped a message: {}{}", peer_,
               render(err), suppressed_note(v.denied_before));
}

void remote_actors::forward(remote_actor_proxy& from,
                            caf::mailbox_element_ptr what,
                            caf::execution_unit* ctx) {
  auto mid = what->mid;
  if (mid.is_stream_message() || !what->stages.empty()) {
    refuse(*what,
           make_error(errc::unsupported,
                      "streams and composed (staged) messages cannot go to "
                      "a remote actor"),
           ctx);
    return;
  }
  // Serialized where it is: no message made of the element's content.
  const auto& content = what->content();
  if (!mid.is_response())
    if (auto err = check_not_system_message(content, false)) {
      refuse(*what, err, ctx);
      return;
    }
  bool node_ids = false;
  // A system with a node id of its own (secret_) may keep type lists.
  auto bytes
      = serialize_to_scratch(sys_, content, &node_ids, secret_.has_value());
  // The actors of ours whose handles the message holds: the peer may reach
  // them once it is sent.
  std::vector<uint64_t> handles;
  if (bytes && names_this_node(node_ids, (*bytes)->data(), (*bytes)->size()))
    handles
        = serialized_local_ids(*secret_, (*bytes)->data(), (*bytes)->size());
  if (bytes && (*bytes)->size() > opts_.actor_max_message_bytes)
    bytes = make_error(errc::size_limit,
                       "a remote-actor message of "
                           + std::to_string((*bytes)->size())
                           + " bytes exceeds actor-max-message-bytes="
                           + std::to_string(opts_.actor_max_message_bytes)
                           + "; send large data with send_data or a lent "
                             "memory region instead");
  if (!bytes && !handles.empty()) {
    unregister_serialized(sys_, handles);
    handles.clear();
  }
  if (!bytes && mid.is_response()) {
    // A requester on the peer waits for this answer: it gets the reason
    // instead, never a silent drop (nor a wait until its own timeout).
    if (auto v = proxy_log_budget())
      log().warn("remote actors of {}: a response cannot travel, the "
                 "requester gets the error instead: {}{}",
                 peer_, render(bytes.error()),
                 suppressed_note(v.denied_before));
    bytes = serialize_to_scratch(sys_, caf::make_message(bytes.error()));
  }
  if (!bytes) {
    refuse(*what, bytes.error(), ctx);
    return;
  }
  const auto& scratch = **bytes;
  // One copy to where the bytes travel from: registered memory for a
  // large message (the agent posts it from there), the outbox otherwise.
  local_mr region;
  memory_pool_ptr pool;
  if (scratch.size() >= region_from_bytes_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> guard{mtx_};
    pool = pool_;
  }
  if (pool) {
    {
      auto mr = pool->allocate(scratch.size(), 64,
                               transport::access::local_write, false);
      if (mr) {
        std::memcpy(mr->data(), scratch.data(), scratch.size());
        region = std::move(*mr);
      }
    }
  }
  const auto& sender = what->sender;
  uint64_t sender_id = sender ? sender->id() : 0;
  caf::error failure;
  std::vector<std::pair<uint64_t, caf::strong_actor_ptr>> to_watch;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto agent = agent_.lock();
    if (closed_ || !agent) {
      failure = closed_reason_
                    ? closed_reason_
                    : make_error(errc::peer_gone,
                                 "the connection to " + peer_ + " is gone");
    } else if (mid.is_request() && sender
               && pending_.size() >= opts_.peer_max_actor_requests) {
      failure = make_error(errc::quota_exceeded,
                           std::to_string(pending_.size())
                               + " requests to remote actors of " + peer_
                               + " wait for an answer "
                                 "(peer-max-actor-requests)");
    } else if (auto err = post_locked(agent,
                                      frame_head{from.remote_id(), sender_id,
                                                 uint64_t{mid.integer_value()},
                                                 false, !mid.is_response()},
                                      scratch.data(), scratch.size(),
                                      std::move(region), ctx)) {
      failure = std::move(err);
      if (mid.is_response())
        if (auto v = proxy_log_budget())
          log().warn("remote actors of {}: dropped a response: {}{}", peer_,
                     render(failure), suppressed_note(v.denied_before));
    } else {
      // Handed over or queued (under the lock: nothing reaches the agent
      // after close, and the answer finds its pending entry).
      if (!handles.empty()) {
        to_watch = export_handles_locked(handles);
        handles.clear();
      }
      if (sender) {
        // The peer holds its proxy of the sender until we say it ended.
        auto weak = caf::actor_cast<caf::weak_actor_ptr>(sender);
        // Known already (the common case): watched since it was exported.
        // (try_emplace: no node made for a sender already known.)
        if (exports_.try_emplace(sender_id, weak).second) {
          if (watched_.try_emplace(sender_id, weak).second)
            to_watch.emplace_back(sender_id, sender);
          prune_locked();
        }
        if (mid.is_request())
          add_pending_locked(
              pending_key{sender_id, mid.integer_value()
                                         & caf::message_id::request_id_mask},
              pending_request{
                  caf::actor_cast<caf::weak_actor_ptr>(sender), mid,
                  // A proxy (the request came from another node) lives
                  // only through its handles: the answer must find it.
                  is_proxy(*sender) ? sender : nullptr});
      }
      ++sent;
    }
  }
  watch(to_watch);
  if (failure) {
    unregister_serialized(sys_, handles);
    refuse(*what, failure, ctx);
  }
}

} // namespace rdmactor
