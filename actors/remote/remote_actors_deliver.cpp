// The remote actors of a connection: messages from the peer to our
// actors (frames, reassembly, checks, delivery).

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
#include "actors/remote/loaded_message.hpp"
#include "common/logging.hpp"
#include "common/node_identity.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "rdmactor/atoms.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

namespace {

/// The mailbox element that carries a peer's message to its target: the
/// message's credit returns when the element goes (the target took it
/// from its mailbox and handled it, skipped elements stay), whatever the
/// thread.  CAF's own wrapper for a caf::message is not public.
class credited_element : public caf::mailbox_element {
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

/// A credited element on the heap.
class heap_element final : public credited_element {
public:
  using credited_element::credited_element;
};

/// A credited element in the companion room of its message's block
/// (loaded_message_data): one allocation for the message and its element.
/// Its deletion (CAF's request_deletion) ends its hold on the block.
class block_element final : public credited_element {
public:
  using credited_element::credited_element;

  static void* operator new(size_t, void* room) noexcept {
    return room;
  }

  static void operator delete(void* room) noexcept {
    loaded_message_data::release_companion(room, sizeof(block_element));
  }

  /// A constructor that threw: the hold ends the same way.
  static void operator delete(void* room, void*) noexcept {
    operator delete(room);
  }
};

/// The element that carries `msg` (taken) to its target.
caf::mailbox_element_ptr make_element(caf::strong_actor_ptr sender,
                                      caf::message_id mid, caf::message& msg,
                                      actor_credit credit) {
  if (void* room
      = loaded_message_data::take_companion(msg, sizeof(block_element)))
    return caf::mailbox_element_ptr{new (room) block_element(
        std::move(sender), mid, std::move(msg), std::move(credit))};
  return caf::mailbox_element_ptr{new heap_element(
      std::move(sender), mid, std::move(msg), std::move(credit))};
}

/// The room a loaded message keeps for its element.
constexpr size_t block_element_bytes = sizeof(block_element);

} // namespace

// -- from the peer ------------------------------------------------------------

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
    if (!p.bytes.reserve(len))
      return no_memory_for_partial(ctx);
    p.bytes.append(data, len);
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
  if (p.bytes.capacity() - p.bytes.size() < len
      && !p.bytes.reserve(std::min<uint64_t>(
          p.total, std::max<uint64_t>(p.bytes.size() + len,
                                      uint64_t{2} * p.bytes.capacity())))) {
    return no_memory_for_partial(ctx);
  }
  p.bytes.append(data, len);
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

/// The system has no memory for the partial message: it is dropped like
/// one over the size limit (its later chunks counted and dropped), and
/// its requester learns why.
caf::error remote_actors::no_memory_for_partial(caf::execution_unit* ctx) {
  auto& p = partial_;
  p.discard = true;
  p.bytes.release();
  auto err = make_error(errc::internal_error,
                        "no memory to reassemble an actor message of "
                            + std::to_string(p.total)
                            + " bytes from the peer; it is dropped");
  answer_peer(p.head.sender(), caf::message_id{p.head.message_id()}, err, ctx);
  return err;
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
  p.bytes.release();
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
  // Read under the same lock: the target's interface once known, and our
  // proxy of the sender once made.
  std::shared_ptr<const std::set<std::string>> interface;
  caf::strong_actor_ptr sender;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (closed_)
      return caf::none;
    if (m.sender() != 0) {
      auto p = proxies_.find(m.sender());
      if (p != proxies_.end())
        sender = p->second;
    }
    if (!mid.is_response()) {
      auto f = interfaces_.find(m.target());
      if (f != interfaces_.end())
        interface = f->second;
    }
    auto i = exports_.find(m.target());
    if (mid.is_response()) {
      auto key = pending_key{
          m.target(), mid.integer_value() & caf::message_id::request_id_mask};
      auto j = pending_.find(key);
      if (j == pending_.end())
        return make_error(errc::malformed_message,
                          "a response to an actor request nobody waits for");
      target = take_pending_locked(j).sender.lock();
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
  if (!signatures_)
    signatures_ = std::make_unique<message_signatures>();
  auto msg = deserialize_message(sys_, data, len, &node_ids, resolver_.get(),
                                 signatures_.get(), block_element_bytes);
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
      refusal = check_interface(m.target(), target, *msg, interface);
    if (refusal) {
      answer_peer(m.sender(), mid, refusal, ctx);
      return refusal;
    }
  }
  if (m.sender() != 0 && !sender) {
    sender = caf::actor_cast<caf::strong_actor_ptr>(proxy_for(m.sender()));
    if (!sender) // closed meanwhile, or too many proxies
      return closed() ? caf::error{} : too_many_proxies();
  }
  ++delivered;
  // The credit returns when the target took the message from its mailbox.
  target->enqueue(make_element(std::move(sender), mid, *msg, std::move(credit)),
                  ctx);
  return caf::none;
}

caf::error remote_actors::check_interface(
    uint64_t id, const caf::strong_actor_ptr& target, const caf::message& msg,
    std::shared_ptr<const std::set<std::string>> sigs) {
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

} // namespace rdmactor
