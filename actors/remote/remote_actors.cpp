#include "actors/remote/remote_actors.hpp"

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

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/handle_resolver.hpp"
#include "common/logging.hpp"
#include "common/node_identity.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "rdmactor/atoms.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

namespace {

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
  region_from_bytes_.store(region_from_bytes, std::memory_order_release);
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
                                         const frame_head& head,
                                         const char* data, size_t len,
                                         local_mr region,
                                         caf::execution_unit* ctx) {
  if (head.counted && outflow_.active) {
    ++outflow_.sent_messages;
    outflow_.sent_bytes += region.valid() ? region.size() : len;
  }
  // One wake-up per batch: the agent takes the whole outbox.
  if (outbox_.push(head.target, head.sender, head.mid, head.down, data, len,
                   std::move(region)))
    agent->enqueue(caf::make_mailbox_element(nullptr, caf::make_message_id(),
                                             {}, actor_out_atom::value),
                   ctx);
}

void remote_actors::take_outbox(actor_outbox& into) {
  std::lock_guard<std::mutex> guard{mtx_};
  outbox_.take(into);
}

caf::error remote_actors::post_locked(const caf::strong_actor_ptr& agent,
                                      const frame_head& head, const char* data,
                                      size_t len, local_mr region,
                                      caf::execution_unit* ctx) {
  // Without flow control (or while nothing waits and the window has room)
  // the frame goes to the agent now; otherwise it waits behind the others,
  // so the order per connection stays.
  auto size = region.valid() ? region.size() : len;
  if (!outflow_.active
      || (queue_.empty() && (!head.counted || outflow_.allows(size)))) {
    hand_to_agent_locked(agent, head, data, len, std::move(region), ctx);
    return caf::none;
  }
  if (!head.down && queued_bytes_ + size > opts_.actor_send_queue_bytes) {
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
  queued_frame f{head, {}, std::move(region)};
  if (!f.region.valid())
    f.bytes.assign(data, data + len);
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
    if (f.head.counted && !outflow_.allows(f.size()))
      break;
    queued_bytes_ -= f.size();
    hand_to_agent_locked(agent, f.head, f.bytes.data(), f.bytes.size(),
                         std::move(f.region), nullptr);
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
        auto req = take_pending_locked(i);
        requester = req.sender.lock();
        request_mid = req.mid;
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

void remote_actors::add_pending_locked(const pending_key& key,
                                       pending_request req) {
  if (spare_pending_.empty()) {
    pending_[key] = std::move(req);
    return;
  }
  auto node = std::move(spare_pending_.back());
  spare_pending_.pop_back();
  node.key() = key;
  node.mapped() = std::move(req);
  auto res = pending_.insert(std::move(node));
  if (!res.inserted) {
    // The same key again (a sender reusing a request id): the newer wins,
    // as pending_[key] = req would have it.
    res.position->second = std::move(res.node.mapped());
    res.node.mapped() = pending_request{};
    spare_pending_.push_back(std::move(res.node));
  }
}

remote_actors::pending_request
remote_actors::take_pending_locked(pending_map::iterator i) {
  auto node = pending_.extract(i);
  auto req = std::move(node.mapped());
  if (spare_pending_.size() < max_spare_pending) {
    node.mapped() = pending_request{};
    if (spare_pending_.capacity() == 0)
      spare_pending_.reserve(max_spare_pending);
    spare_pending_.push_back(std::move(node));
  }
  return req;
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
      static_cast<void>(post_locked(agent, frame_head{id, 0, 0, true, false},
                                    bytes->data(), bytes->size(), {}, nullptr));
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

void remote_actors::close(const caf::error& reason, const caf::error& err) {
  pending_map pending;
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
    spare_pending_.clear();
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
    outbox_.clear();
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
