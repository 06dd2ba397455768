#include "actors/remote_actors.hpp"

#include <algorithm>
#include <cstring>

#include <caf/actor_cast.hpp>
#include <caf/atom.hpp>
#include <caf/attachable.hpp>
#include <caf/exit_reason.hpp>
#include <caf/make_actor.hpp>
#include <caf/proxy_registry.hpp>
#include <caf/resumable.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>
#include <caf/sec.hpp>

#include "actors/actor_codec.hpp"
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

/// Tells a connection's remote actors that a published actor ended.
class down_watch final : public caf::attachable {
public:
  down_watch(std::weak_ptr<remote_actors> router, const void* key, uint64_t id)
      : router_(std::move(router)), key_(key), id_(id) {}

  void actor_exited(const caf::error& reason, caf::execution_unit*) override {
    if (auto r = router_.lock())
      r->exported_down(id_, reason);
  }

  bool matches(const token& what) override {
    return what.subtype == subtype && what.ptr == key_;
  }

  static constexpr size_t subtype = 0x7d;

private:
  std::weak_ptr<remote_actors> router_;
  const void* key_;
  uint64_t id_;
};

/// The mailbox element that carries a peer's message to its target: the
/// message's credit returns when the element goes (the target took it
/// from its mailbox and handled it, skipped elements stay), whatever the
/// thread.  CAF's own wrapper for a caf::message is not public.
class credited_element final : public caf::mailbox_element {
public:
  credited_element(caf::strong_actor_ptr sender, caf::message_id mid,
                   caf::message msg, actor_credit credit)
      : caf::mailbox_element(std::move(sender), mid, {}), msg_(std::move(msg)),
        credit_(std::move(credit)) {}

  caf::type_erased_tuple& content() override {
    return msg_;
  }

  const caf::type_erased_tuple& content() const override {
    return msg_;
  }

  caf::message move_content_to_message() override {
    caf::message result;
    result.swap(msg_);
    return result;
  }

  caf::message copy_content_to_message() const override {
    return msg_;
  }

private:
  caf::message msg_;
  actor_credit credit_;
};

} // namespace

// -- the proxy ----------------------------------------------------------------

remote_actor_proxy::remote_actor_proxy(caf::actor_config& cfg,
                                       std::shared_ptr<remote_actors> router,
                                       uint64_t remote_id)
    : caf::actor_proxy(cfg), router_(std::move(router)), remote_id_(remote_id) {
}

remote_actor_proxy::~remote_actor_proxy() = default;

void remote_actor_proxy::enqueue(caf::mailbox_element_ptr what,
                                 caf::execution_unit* ctx) {
  if (!what)
    return;
  auto router = router_.lock();
  if (getf(is_cleaned_up_flag) || !router) {
    // A request fails with rdmactor's cause (peer_gone, closed, ...), not
    // the remote_link_unreachable monitors see.
    auto reason = cause_of(fail_state());
    if (!reason)
      reason = make_error(errc::peer_gone, "the remote actor is gone");
    if (router)
      router->refuse(*what, reason, ctx);
    else if (what->mid.is_request() && what->sender)
      what->sender->enqueue(caf::make_mailbox_element(
                                nullptr, what->mid.response_id(), {}, reason),
                            ctx);
    return;
  }
  router->forward(*this, std::move(what), ctx);
}

void remote_actor_proxy::kill_proxy(caf::execution_unit* ctx,
                                    caf::error reason) {
  cleanup(std::move(reason), ctx);
}

void remote_actor_proxy::on_destroy() {
  // The last handle went: monitors of a proxy that never quit learn it.
  if (!getf(is_cleaned_up_flag))
    cleanup(caf::exit_reason::unreachable, nullptr);
  caf::actor_proxy::on_destroy();
}

// -- the handle resolver ------------------------------------------------------

/// What CAF's deserializer asks for the actor handles in the peer's
/// messages: the execution unit it runs with, whose proxy registry (one
/// per connection) keeps a proxy per (node, id) the peer named and asks
/// the router to make new ones.  The registry's entries die with the
/// connection (`close` clears it) or when the peer says the actor ended.
class remote_actors::handle_resolver final
    : public caf::proxy_registry::backend,
      public caf::execution_unit {
public:
  explicit handle_resolver(remote_actors& owner)
      : caf::execution_unit(&owner.sys_), owner_(owner),
        registry_(owner.sys_, *this) {
    proxy_registry_ptr(&registry_);
  }

  caf::strong_actor_ptr make_proxy(caf::node_id nid,
                                   caf::actor_id aid) override {
    return owner_.proxy_for_handle(nid, aid);
  }

  void set_last_hop(caf::node_id*) override {
    // One hop: the peer.
  }

  void exec_later(caf::resumable* ptr) override {
    // Never runs actors: the deserializer only makes proxies.
    system().scheduler().enqueue(ptr);
  }

  caf::proxy_registry& registry() noexcept {
    return registry_;
  }

private:
  remote_actors& owner_;
  caf::proxy_registry registry_;
};

// -- the router ---------------------------------------------------------------

remote_actors::remote_actors(caf::actor_system& sys, const options& opts,
                             std::string peer,
                             actor_directory_ptr node_directory)
    : sys_(sys), opts_(opts), peer_(std::move(peer)),
      node_dir_(std::move(node_directory)),
      inflow_(std::make_shared<actor_inflow>(opts.actor_window_messages,
                                             opts.actor_window_bytes)),
      secret_(secret_of(sys)),
      resolver_(std::make_unique<handle_resolver>(*this)) {}

remote_actors::~remote_actors() {
  // The agent closes its router when it shuts down; a router that goes
  // without (its agent never ran to its end) still fails what waits and
  // ends its proxies, which hold it weakly.
  close(make_error(errc::closed, "the connection to " + peer_ + " ended"),
        make_error(errc::closed, "the connection to " + peer_ + " ended"));
}

caf::strong_actor_ptr remote_actors::proxy_for_handle(const caf::node_id& nid,
                                                      caf::actor_id aid) {
  if (aid == 0 || !nid)
    return nullptr; // a null handle stays null
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!peer_node_) {
      peer_node_ = nid;
    } else if (peer_node_ != nid) {
      resolve_refusal_ = make_error(
          errc::serialization_failed,
          "the peer sent a handle of an actor on node " + caf::to_string(nid)
              + ", which is not its own (" + caf::to_string(peer_node_)
              + "): a handle reaches only the node that sent it");
      return nullptr;
    }
  }
  auto proxy = caf::actor_cast<caf::strong_actor_ptr>(proxy_for(aid));
  if (!proxy)
    resolve_refusal_ = too_many_proxies();
  return proxy;
}

void remote_actors::watch(
    const std::vector<std::pair<uint64_t, caf::strong_actor_ptr>>& actors) {
  for (auto& [id, actor] : actors)
    actor->get()->attach(
        caf::attachable_ptr{new down_watch(weak_from_this(), this, id)});
}

std::vector<std::pair<uint64_t, caf::strong_actor_ptr>>
remote_actors::export_handles_locked(const std::vector<uint64_t>& ids) {
  std::vector<std::pair<uint64_t, caf::strong_actor_ptr>> to_watch;
  for (auto id : ids) {
    // CAF's serializer registered it (save_actor): the registry keeps it
    // alive for the peer, as caf::io does for the handles it sends, until
    // it quits or no connection holds it any more (release_handed).
    caf::strong_actor_ptr actor;
    if (handed_.insert(id).second) {
      auto held = hold_handed(sys_, {id});
      if (held.empty()) {
        handed_.erase(id);
        continue;
      }
      actor = std::move(held.front());
    } else {
      actor = sys_.registry().get(id);
    }
    if (!actor)
      continue;
    auto weak = caf::actor_cast<caf::weak_actor_ptr>(actor);
    exports_[id] = weak;
    if (watched_.emplace(id, weak).second)
      to_watch.emplace_back(id, std::move(actor));
  }
  prune_locked();
  return to_watch;
}

bool remote_actors::names_this_node(bool node_ids, const char* data,
                                    size_t len) const {
  // The codec saw no node id (no actor handle) go through: nothing to look
  // for, the common case, which costs no pass over the bytes.
  return secret_ && node_ids && holds_secret(*secret_, data, len);
}

void remote_actors::set_agent(caf::strong_actor_ptr agent, memory_pool_ptr pool,
                              size_t region_from_bytes) {
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(agent);
  inflow_->set_wakeup([weak] {
    if (auto a = weak.lock())
      a->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(), {},
                                           actor_ack_atom::value),
                 nullptr);
  });
  std::lock_guard<std::mutex> guard{mtx_};
  agent_ = std::move(weak);
  pool_ = std::move(pool);
  region_from_bytes_ = region_from_bytes;
}

void remote_actors::start_flow(bool flow, uint64_t window_messages,
                               uint64_t window_bytes) {
  inflow_->set_flow(flow);
  std::lock_guard<std::mutex> guard{mtx_};
  outflow_.active = flow;
  outflow_.window_messages = window_messages;
  outflow_.window_bytes = window_bytes;
}

void remote_actors::hand_to_agent_locked(const caf::strong_actor_ptr& agent,
                                         queued_frame& f,
                                         caf::execution_unit* ctx) {
  if (f.counted && outflow_.active) {
    ++outflow_.sent_messages;
    outflow_.sent_bytes += f.size();
  }
  if (f.region.valid())
    agent->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(),
                                             {}, actor_out_atom::value,
                                             f.target, f.sender, f.mid,
                                             std::move(f.region), f.down),
                   ctx);
  else
    agent->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(),
                                             {}, actor_out_atom::value,
                                             f.target, f.sender, f.mid,
                                             std::move(f.bytes), f.down),
                   ctx);
}

caf::error remote_actors::post_locked(const caf::strong_actor_ptr& agent,
                                      queued_frame f,
                                      caf::execution_unit* ctx) {
  // Without flow control (or while nothing waits and the window has room)
  // the frame goes to the agent now; otherwise it waits behind the others,
  // so the order per connection stays.
  if (!outflow_.active
      || (queue_.empty() && (!f.counted || outflow_.allows(f.size())))) {
    hand_to_agent_locked(agent, f, ctx);
    return caf::none;
  }
  auto size = f.size();
  if (!f.down && queued_bytes_ + size > opts_.actor_send_queue_bytes) {
    ++send_refused_;
    return make_error(
        errc::quota_exceeded,
        std::to_string(queued_bytes_)
            + " bytes of messages to remote actors of " + peer_
            + " already wait for the peer's credit, and this one has "
            + std::to_string(size)
            + " (its actors take messages slower than they are sent): "
              "raise actor-send-queue-bytes="
            + std::to_string(opts_.actor_send_queue_bytes)
            + " or wait for answers before sending more");
  }
  queued_bytes_ += size;
  queue_.push_back(std::move(f));
  return caf::none;
}

caf::error remote_actors::take_ack(uint64_t messages, uint64_t bytes) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (!outflow_.active)
    return make_error(errc::not_negotiated,
                      "an ActorAck without actor flow control");
  if (auto err = outflow_.ack(messages, bytes))
    return err;
  ++acks_received_;
  drain_locked();
  return caf::none;
}

void remote_actors::drain_locked() {
  auto agent = agent_.lock();
  if (closed_ || !agent)
    return;
  while (!queue_.empty()) {
    auto& f = queue_.front();
    if (f.counted && !outflow_.allows(f.size()))
      break;
    queued_bytes_ -= f.size();
    hand_to_agent_locked(agent, f, nullptr);
    queue_.pop_front();
  }
}

void remote_actors::not_posted(uint64_t sender, uint64_t mid_value, size_t size,
                               bool down, const caf::error& err) {
  caf::message_id mid{mid_value};
  caf::strong_actor_ptr requester;
  caf::message_id request_mid;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_)
      return; // close failed the pending requests
    if (!down && !mid.is_response() && outflow_.active
        && outflow_.sent_messages > outflow_.acked_messages) {
      --outflow_.sent_messages;
      outflow_.sent_bytes -= std::min<uint64_t>(
          size, outflow_.sent_bytes - outflow_.acked_bytes);
    }
    if (mid.is_request() && sender != 0) {
      auto i = pending_.find(pending_key{
          sender, mid.integer_value() & caf::message_id::request_id_mask});
      if (i != pending_.end()) {
        requester = i->second.sender.lock();
        request_mid = i->second.mid;
        pending_.erase(i);
      }
    }
    drain_locked();
  }
  if (requester)
    requester->enqueue(
        caf::make_mailbox_element(nullptr, request_mid.response_id(), {}, err),
        nullptr);
}

remote_actors::flow_counts remote_actors::flow_stats() const {
  flow_counts out;
  out.buffered = inflow_->buffered();
  out.buffered_max = inflow_->buffered_max();
  out.acks_sent = inflow_->acks();
  std::lock_guard<std::mutex> guard{mtx_};
  out.queued = queue_.size();
  out.queued_bytes = queued_bytes_;
  out.in_flight = outflow_.sent_messages - outflow_.acked_messages;
  out.send_refused = send_refused_;
  out.acks_received = acks_received_;
  return out;
}

size_t remote_actors::pending_requests() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return pending_.size();
}

remote_actors::found remote_actors::find(const std::string& name) {
  found result;
  auto actor = own_.get(name);
  if (!actor && node_dir_)
    actor = node_dir_->get(name);
  if (!actor)
    return result;
  for (auto& sig : actor->get()->message_types())
    result.interface.push_back(sig);
  std::vector<std::pair<uint64_t, caf::strong_actor_ptr>> to_watch;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_)
      return result;
    result.id = actor->id();
    exports_[result.id] = caf::actor_cast<caf::weak_actor_ptr>(actor);
    if (watched_.emplace(result.id, caf::actor_cast<caf::weak_actor_ptr>(actor))
            .second)
      to_watch.emplace_back(result.id,
                            caf::actor_cast<caf::strong_actor_ptr>(actor));
  }
  watch(to_watch);
  return result;
}

void remote_actors::exported_down(uint64_t id, const caf::error& reason) {
  auto bytes = serialize_message(sys_, caf::make_message(reason));
  if (!bytes) // a reason of a category that cannot travel
    bytes = serialize_message(
        sys_, caf::make_message(
                  make_error(errc::peer_error, "the remote actor ended: "
                                                   + sys_.render(reason))));
  bool held = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    watched_.erase(id);
    held = handed_.erase(id) != 0;
    auto agent = agent_.lock();
    // Behind our queued messages (a down notice is never refused).
    if (!closed_ && agent && bytes)
      static_cast<void>(post_locked(
          agent, queued_frame{id, 0, 0, std::move(*bytes), true, false},
          nullptr));
  }
  if (held)
    release_handed(sys_, {id});
}

/// Drops what no longer lives from the tables once they doubled.
void remote_actors::prune_locked() {
  if (exports_.size() >= exports_prune_at_) {
    for (auto i = exports_.begin(); i != exports_.end();)
      i = i->second.lock() ? std::next(i) : exports_.erase(i);
    for (auto i = interfaces_.begin(); i != interfaces_.end();)
      i = exports_.count(i->first) != 0 ? std::next(i) : interfaces_.erase(i);
    exports_prune_at_ = std::max<size_t>(1024, exports_.size() * 2);
  }
}

caf::actor remote_actors::proxy_for(uint64_t id) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (closed_ || id == 0)
    return caf::actor{};
  auto i = proxies_.find(id);
  if (i != proxies_.end())
    return caf::actor_cast<caf::actor>(i->second);
  if (proxies_.size() >= tuning::max_peer_proxies)
    return caf::actor{};
  caf::actor_config cfg;
  auto hdl = caf::make_actor<remote_actor_proxy, caf::strong_actor_ptr>(
      sys_.next_actor_id(), sys_.node(), &sys_, cfg, shared_from_this(), id);
  proxies_.emplace(id, hdl);
  return caf::actor_cast<caf::actor>(hdl);
}

bool remote_actors::closed() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return closed_;
}

caf::error remote_actors::too_many_proxies() const {
  return make_error(errc::quota_exceeded,
                    "the peer's messages named "
                        + std::to_string(tuning::max_peer_proxies)
                        + " of its actors that are alive, the most one "
                          "connection holds proxies of");
}

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
  auto content = what->move_content_to_message();
  if (!mid.is_response())
    if (auto err = check_not_system_message(content, false)) {
      refuse(*what, err, ctx);
      return;
    }
  bool node_ids = false;
  auto bytes = serialize_to_scratch(sys_, content, &node_ids);
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
    content = caf::make_message(bytes.error());
    bytes = serialize_to_scratch(sys_, content);
  }
  if (!bytes) {
    refuse(*what, bytes.error(), ctx);
    return;
  }
  const auto& scratch = **bytes;
  // One copy to where the bytes travel from: registered memory for a
  // large message (the agent posts it from there), a vector otherwise.
  local_mr region;
  memory_pool_ptr pool;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (scratch.size() >= region_from_bytes_)
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
  std::vector<char> copy;
  if (!region.valid())
    copy.assign(scratch.begin(), scratch.end());
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
    } else if (auto err = post_locked(
                   agent,
                   queued_frame{from.remote_id(), sender_id,
                                uint64_t{mid.integer_value()}, std::move(copy),
                                false, !mid.is_response(), std::move(region)},
                   ctx)) {
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
        if (exports_.emplace(sender_id, weak).second) {
          if (watched_.emplace(sender_id, weak).second)
            to_watch.emplace_back(sender_id, sender);
          prune_locked();
        }
        if (mid.is_request())
          pending_[pending_key{sender_id,
                               mid.integer_value()
                                   & caf::message_id::request_id_mask}]
              = pending_request{
                  caf::actor_cast<caf::weak_actor_ptr>(sender), mid,
                  // A proxy (the request came from another node) lives
                  // only through its handles: the answer must find it.
                  dynamic_cast<caf::actor_proxy*>(sender->get()) != nullptr
                      ? sender
                      : nullptr};
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

void remote_actors::answer_peer(uint64_t peer_sender, caf::message_id mid,
                                caf::error err, caf::execution_unit* ctx) {
  if (!mid.is_request() || peer_sender == 0)
    return;
  auto proxy = proxy_for(peer_sender);
  if (!proxy)
    return;
  caf::actor_cast<caf::abstract_actor*>(proxy)->enqueue(
      caf::make_mailbox_element(nullptr, mid.response_id(), {}, std::move(err)),
      ctx);
}

caf::error remote_actors::on_frame(const protocol::ActorMessage& m,
                                   const uint8_t* data, size_t len,
                                   caf::execution_unit* ctx) {
  auto& p = partial_;
  if (!p.active) {
    uint64_t total = m.total_len() != 0 ? m.total_len() : m.len();
    if (total < m.len())
      return make_error(errc::malformed_message,
                        "an actor message announces fewer bytes than its "
                        "first chunk carries");
    if (total > opts_.actor_max_message_bytes) {
      auto err = make_error(errc::size_limit,
                            "the peer announced an actor message of "
                                + std::to_string(total)
                                + " bytes, over actor-max-message-bytes="
                                + std::to_string(opts_.actor_max_message_bytes)
                                + " of the receiver");
      // Its chunks are dropped as they come; the requester learns why.
      if (total > len) {
        p.active = true;
        p.discard = true;
        p.head = m;
        p.total = total;
        p.received = len;
      } else {
        actor_credit dropped; // counted, returned at once
        if (auto q = admit(m, total, dropped))
          return q;
      }
      answer_peer(m.sender(), caf::message_id{m.message_id()}, err, ctx);
      return err;
    }
    if (total == len) {
      actor_credit credit;
      if (auto q = admit(m, total, credit))
        return q;
      return deliver(m, data, len, std::move(credit), ctx);
    }
    p.active = true;
    p.head = m;
    p.total = total;
    p.received = len;
    p.bytes.assign(data, data + len);
    return caf::none;
  }
  if (m.total_len() != 0 || m.target() != p.head.target()
      || m.sender() != p.head.sender() || m.message_id() != p.head.message_id()
      || m.down() != p.head.down() || len == 0 || len > p.total - p.received) {
    p = partial{};
    return make_error(errc::malformed_message,
                      "a chunk of an actor message does not continue the "
                      "message before it");
  }
  p.received += len;
  if (p.discard) {
    if (p.received == p.total) {
      auto head = p.head;
      auto total = p.total;
      p = partial{};
      actor_credit dropped; // counted, returned at once
      return admit(head, total, dropped);
    }
    return caf::none;
  }
  // Grows geometrically but never past the announced size, so the buffer
  // (what the agent counts against the peer's budget) holds at most what
  // an honest message needs.
  if (p.bytes.capacity() - p.bytes.size() < len)
    p.bytes.reserve(std::min<uint64_t>(
        p.total, std::max<uint64_t>(p.bytes.size() + len,
                                    uint64_t{2} * p.bytes.capacity())));
  p.bytes.insert(p.bytes.end(), data, data + len);
  if (p.bytes.size() < p.total)
    return caf::none;
  auto whole = std::move(p);
  p = partial{};
  actor_credit credit;
  if (auto q = admit(whole.head, whole.total, credit))
    return q;
  return deliver(whole.head, whole.bytes.data(), whole.bytes.size(),
                 std::move(credit), ctx);
}

std::optional<uint64_t> remote_actors::partial_bytes() const noexcept {
  if (!partial_.active || partial_.discard)
    return std::nullopt;
  return partial_.bytes.capacity();
}

bool remote_actors::drop_partial(const caf::error& why,
                                 caf::execution_unit* ctx) {
  auto& p = partial_;
  if (!p.active || p.discard)
    return false;
  p.discard = true;
  std::vector<uint8_t>{}.swap(p.bytes);
  answer_peer(p.head.sender(), caf::message_id{p.head.message_id()}, why, ctx);
  return true;
}

void remote_actors::refuse_frame(const protocol::ActorMessage& m,
                                 const caf::error& why,
                                 caf::execution_unit* ctx) {
  actor_credit dropped; // counted, returned at once
  if (auto err = admit(m, m.len(), dropped))
    log().debug("remote actors of {}: a refused actor message was over the "
                "window: {}",
                peer_, render(err));
  answer_peer(m.sender(), caf::message_id{m.message_id()}, why, ctx);
}

caf::error remote_actors::admit(const protocol::ActorMessage& m, uint64_t total,
                                actor_credit& credit) {
  // Responses are bounded by our requests, down notices by our proxies.
  if (m.down() || caf::message_id{m.message_id()}.is_response())
    return caf::none;
  if (auto err = inflow_->admit(total))
    return err;
  credit = actor_credit{inflow_, total};
  return caf::none;
}

caf::error remote_actors::deliver(const protocol::ActorMessage& m,
                                  const uint8_t* data, size_t len,
                                  actor_credit credit,
                                  caf::execution_unit* ctx) {
  if (m.down()) {
    // The peer's actor m.target() ended; its payload says why.  Checked
    // like any other frame: the payload of a notice for an actor we have
    // no proxy of (gone already, or never ours) is not even read.
    caf::strong_actor_ptr proxy;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = proxies_.find(m.target());
      if (i != proxies_.end())
        proxy = i->second;
    }
    if (!proxy)
      return caf::none;
    auto msg = deserialize_message(sys_, data, len);
    if (!msg)
      return msg.error();
    if (!msg->match_elements<caf::error>())
      return make_error(errc::malformed_message,
                        "an actor's down notice without its reason");
    caf::node_id node;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      auto i = proxies_.find(m.target());
      if (i != proxies_.end() && i->second == proxy)
        proxies_.erase(i);
      node = peer_node_;
    }
    const auto& reason = msg->get_as<caf::error>(0);
    static_cast<remote_actor_proxy*>(proxy->get())->kill_proxy(ctx, reason);
    // A proxy a handle made leaves the registry too (already ended, the
    // registry's kill does nothing more).
    if (node && resolver_->registry().get(node, m.target()))
      resolver_->registry().erase(node, m.target(), reason);
    return caf::none;
  }
  caf::message_id mid{m.message_id()};
  if (mid.is_answered() || mid.is_stream_message())
    return make_error(errc::malformed_message,
                      "an actor message with an id CAF does not take from "
                      "peers (answered or stream)");
  caf::strong_actor_ptr target;
  caf::error unknown;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_)
      return caf::none;
    auto i = exports_.find(m.target());
    if (mid.is_response()) {
      auto key = pending_key{
          m.target(), mid.integer_value() & caf::message_id::request_id_mask};
      auto j = pending_.find(key);
      if (j == pending_.end())
        return make_error(errc::malformed_message,
                          "a response to an actor request nobody waits for");
      target = j->second.sender.lock();
      pending_.erase(j);
      if (!target)
        return caf::none; // the requester ended meanwhile
    } else if (i == exports_.end()) {
      // Not published, never a sender: the peer cannot reach it.
      unknown = make_error(errc::unknown_actor,
                           "no actor with id " + std::to_string(m.target())
                               + " is reachable on this node");
    } else {
      target = i->second.lock();
    }
  }
  if (unknown) {
    answer_peer(m.sender(), mid, unknown, ctx);
    return unknown;
  }
  if (!target) {
    answer_peer(m.sender(), mid,
                caf::make_error(caf::sec::request_receiver_down), ctx);
    return caf::none;
  }
  bool node_ids = false;
  resolve_refusal_ = caf::none;
  auto msg = deserialize_message(sys_, data, len, &node_ids, resolver_.get());
  if (msg && resolve_refusal_)
    msg = std::move(resolve_refusal_);
  if (!msg) {
    if (mid.is_response()) // the requester gets the failure as its answer
      target->enqueue(caf::make_mailbox_element(nullptr, mid, {}, msg.error()),
                      ctx);
    else
      answer_peer(m.sender(), mid, msg.error(), ctx);
    return msg.error();
  }
  if (names_this_node(node_ids, reinterpret_cast<const char*>(data), len)) {
    // CAF resolved a handle of our node by the actor id alone (the local
    // registry): a peer could reach actors it was never given.  An honest
    // peer names only its own actors (its proxies of ours included).
    auto err = make_error(errc::serialization_failed,
                          "the peer sent an actor handle that names an actor "
                          "of this node by its id: refused (a peer's handles "
                          "name the peer's own actors and proxies)");
    if (mid.is_response())
      target->enqueue(caf::make_mailbox_element(nullptr, mid, {}, err), ctx);
    else
      answer_peer(m.sender(), mid, err, ctx);
    return err;
  }
  if (!mid.is_response()) {
    // What the target would not take as a message for its behavior, or,
    // for a typed actor, not at all: refused here, so that a peer can
    // neither make the actor quit nor fill its default handler's output.
    auto refusal = check_not_system_message(*msg, true);
    if (!refusal)
      refusal = check_interface(m.target(), target, *msg);
    if (refusal) {
      answer_peer(m.sender(), mid, refusal, ctx);
      return refusal;
    }
  }
  caf::strong_actor_ptr sender;
  if (m.sender() != 0) {
    sender = caf::actor_cast<caf::strong_actor_ptr>(proxy_for(m.sender()));
    if (!sender) // closed meanwhile, or too many proxies
      return closed() ? caf::error{} : too_many_proxies();
  }
  ++delivered;
  // The credit returns when the target took the message from its mailbox.
  target->enqueue(
      caf::mailbox_element_ptr{new credited_element(
          std::move(sender), mid, std::move(*msg), std::move(credit))},
      ctx);
  return caf::none;
}

caf::error remote_actors::check_interface(uint64_t id,
                                          const caf::strong_actor_ptr& target,
                                          const caf::message& msg) {
  std::shared_ptr<const std::set<std::string>> sigs;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = interfaces_.find(id);
    if (i != interfaces_.end())
      sigs = i->second;
  }
  if (!sigs) {
    // An actor's interface does not change: read once per actor (CAF
    // builds the set on every call).
    sigs = std::make_shared<const std::set<std::string>>(
        target->get()->message_types());
    std::lock_guard<std::mutex> guard{mtx_};
    interfaces_.emplace(id, sigs);
  }
  if (sigs->empty())
    return caf::none; // untyped: its behavior (or default handler) decides
  // CAF names a typed signature "caf::replies_to<IN,...>::with<OUT,...>"
  // with the portable names of its input types, an atom constant by its
  // text ("add"), a plain atom_value as "@atom" (caf/replies_to.hpp).
  static const std::string head = "caf::replies_to<";
  static const std::string tail = ">::with<";
  auto& types = sys_.types();
  auto takes = [&](const std::string& sig) {
    if (sig.compare(0, head.size(), head) != 0)
      return false;
    size_t pos = head.size();
    // Whether `name` is the next input of the signature at `pos`.
    auto next_is = [&](const std::string& name) {
      auto end = pos + name.size();
      return sig.compare(pos, name.size(), name) == 0 && end < sig.size()
             && (sig[end] == ',' || sig[end] == '>');
    };
    for (size_t i = 0; i < msg.size(); ++i) {
      if (i > 0) {
        if (pos >= sig.size() || sig[pos] != ',')
          return false;
        ++pos;
      }
      const auto& name = types.portable_name(msg.type(i));
      if (msg.match_element<caf::atom_value>(i)) {
        auto text = caf::to_string(msg.get_as<caf::atom_value>(i));
        if (next_is(text)) {
          pos += text.size();
          continue;
        }
      }
      if (!next_is(name))
        return false;
      pos += name.size();
    }
    return sig.compare(pos, tail.size(), tail) == 0;
  };
  for (const auto& sig : *sigs)
    if (takes(sig))
      return caf::none;
  std::string got;
  for (size_t i = 0; i < msg.size(); ++i) {
    if (i > 0)
      got += ',';
    got += msg.match_element<caf::atom_value>(i)
               ? "'" + caf::to_string(msg.get_as<caf::atom_value>(i)) + "'"
               : types.portable_name(msg.type(i));
  }
  return make_error(errc::unexpected_message,
                    "the peer sent (" + got + ") to typed actor "
                        + std::to_string(id)
                        + ", whose interface does not take it");
}

void remote_actors::close(const caf::error& reason, const caf::error& err) {
  std::unordered_map<pending_key, pending_request, pending_hash> pending;
  std::unordered_map<uint64_t, caf::strong_actor_ptr> proxies;
  std::unordered_map<uint64_t, caf::weak_actor_ptr> exports;
  std::unordered_map<uint64_t, caf::weak_actor_ptr> watched;
  std::vector<uint64_t> handed;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_)
      return;
    closed_ = true;
    closed_reason_ = err;
    pending.swap(pending_);
    proxies.swap(proxies_);
    exports.swap(exports_);
    watched.swap(watched_);
    handed.assign(handed_.begin(), handed_.end());
    handed_.clear();
    agent_.reset();
  }
  // The actors whose handles only this connection held may go now.
  release_handed(sys_, handed);
  // Long-lived published actors must not collect an attachable per
  // connection they ever served.
  for (auto& kv : watched)
    if (auto actor = kv.second.lock())
      actor->get()->detach(caf::attachable::token{down_watch::subtype, this});
  partial_ = partial{};
  {
    std::lock_guard<std::mutex> guard{mtx_};
    queue_.clear();
    queued_bytes_ = 0;
  }
  for (auto& kv : pending)
    if (auto sender = kv.second.sender.lock())
      sender->enqueue(caf::make_mailbox_element(
                          nullptr, kv.second.mid.response_id(), {}, err),
                      nullptr);
  // Monitors see CAF's remote_link_unreachable, as with CAF io, with the
  // connection's end beside it (cause_of).
  auto unreachable = link_unreachable(reason);
  for (auto& kv : proxies)
    static_cast<remote_actor_proxy*>(kv.second->get())
        ->kill_proxy(nullptr, unreachable);
  // The proxies handles made (ended above; their references go).
  resolver_->registry().clear();
  own_.clear();
}

} // namespace rdmactor
