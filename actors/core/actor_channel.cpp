// The actor channel (actors/core/actor_channel.hpp): ActorLookup both ways,
// eager and chunked ActorMessage frames, ActorAck, and the deadline and
// budget of the chunked message being reassembled.  Rendezvous messages
// are in actor_channel_rendezvous.cpp.  The CAF side (proxies,
// serialization, delivery) is in actors/remote/remote_actors.cpp, reached
// through the sink.

#include <cstring>

#include "actors/core/actor_channel.hpp"
#include "common/logging.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "rdmactor/transport/link_params.hpp"

namespace rdmactor {

namespace pb = protocol;

namespace {

/// Longest name an ActorLookup may carry, and the most interface entries
/// (and bytes per entry) a lookup answer may carry.
constexpr size_t max_name_len = 256;
constexpr int max_interface_entries = 1024;
constexpr size_t max_interface_entry_len = 4096;

/// A copy of `len` bytes at `data` in registered memory of `pool`.
caf::expected<local_mr> copy_to_pool(memory_pool& pool, const char* data,
                                     size_t len) {
  auto mr = pool.allocate(len, 64, transport::access::local_write, false);
  if (mr)
    std::memcpy(mr->data(), data, len);
  return mr;
}

} // namespace

void actor_channel::post_ack(uint64_t messages, uint64_t bytes) {
  if (core_.closed())
    return;
  pb::Message msg;
  auto* ack = msg.mutable_actor_ack();
  ack->set_messages(messages);
  ack->set_bytes(bytes);
  core_.send_unsolicited(msg);
}

void actor_channel::on_ack(const pb::ActorAck& m) {
  caf::error err;
  if (!core_.opts().remote_actors || !core_.opts().actor_flow
      || !core_.peer_offers(pb::EXT_ACTOR_FLOW))
    err = make_error(errc::not_negotiated,
                     "an ActorAck, but actor flow control was not offered "
                     "both ways");
  else
    err = core_.out().take_actor_ack(m.messages(), m.bytes());
  if (!err)
    return;
  ++core_.counters().protocol_errors;
  if (auto v = core_.may_log(spdlog::level::warn))
    log().warn("agent {}: refused an ActorAck: {}{}", core_.link().peer,
               render(err), suppressed_note(v.denied_before));
  core_.count_violation();
}

void actor_channel::lookup(
    const std::string& name, std::vector<std::string> expected_interface,
    time_point now,
    std::function<void(caf::expected<actor_lookup_result>)> done) {
  if (name.empty() || name.size() > max_name_len) {
    done(make_error(errc::invalid_argument,
                    "actor names have 1 to 256 bytes; this one has "
                        + std::to_string(name.size())));
    return;
  }
  auto go = [this, name, ifs = std::move(expected_interface),
             done](const caf::error& err) mutable {
    if (err) {
      done(err);
      return;
    }
    pb::Message msg;
    auto* req = msg.mutable_request();
    req->set_request_id(core_.new_request_id());
    auto* body = req->mutable_actor_lookup();
    body->set_name(name);
    for (auto& x : ifs)
      body->add_expected_interface(std::move(x));
    core_.send_request(
        std::move(msg), local_mr{},
        [done](const pb::Response* res, const caf::error& err) {
          if (err) {
            done(err);
            return;
          }
          if (auto e = check_response(*res, pb::Response::kActorLookup,
                                      "ActorLookup")) {
            done(e);
            return;
          }
          const auto& body = res->actor_lookup();
          if (body.interface_size() > max_interface_entries) {
            done(make_error(errc::malformed_message,
                            "the peer's lookup answer names too many "
                            "signatures"));
            return;
          }
          actor_lookup_result out;
          out.id = body.actor_id();
          for (const auto& sig : body.interface()) {
            if (sig.size() > max_interface_entry_len) {
              done(make_error(errc::malformed_message,
                              "the peer's lookup answer has an overlong "
                              "signature"));
              return;
            }
            out.interface.push_back(sig);
          }
          done(std::move(out));
        },
        core_.now());
  };
  core_.when_offered(pb::EXT_REMOTE_ACTORS, "remote actors", now,
                     std::move(go));
}

caf::error actor_channel::post(uint64_t target, uint64_t sender,
                               uint64_t message_id, const char* data,
                               size_t len, bool down) {
  return post(target, sender, message_id, data, len, local_mr{}, down);
}

caf::error actor_channel::post(uint64_t target, uint64_t sender,
                               uint64_t message_id, local_mr bytes, bool down) {
  auto data = reinterpret_cast<const char*>(bytes.data());
  auto len = bytes.size();
  return post(target, sender, message_id, data, len, std::move(bytes), down);
}

caf::error actor_channel::post(uint64_t target, uint64_t sender,
                               uint64_t message_id, const char* data,
                               size_t len, local_mr region, bool down) {
  if (core_.closed())
    return core_.peer_gone_error();
  if (!core_.peer_offers(pb::EXT_REMOTE_ACTORS))
    return make_error(errc::not_negotiated,
                      "the peer " + core_.link().peer
                          + " did not offer remote actors in its Hello");
  const size_t max_len = core_.link().max_message_len_bytes;
  if (max_len <= pb::actor_frame_overhead)
    return make_error(errc::invalid_argument,
                      "the max message length leaves no room for actor "
                      "messages");
  const size_t chunk_max = max_len - pb::actor_frame_overhead;
  if (len > chunk_max && rendezvous_to_peer()) {
    pb::ActorMessage head;
    head.set_target(target);
    head.set_sender(sender);
    head.set_message_id(message_id);
    head.set_down(down);
    if (!region.valid()) {
      auto mr = copy_to_pool(*core_.pool(), data, len);
      if (!mr)
        return mr.error();
      region = std::move(*mr);
    }
    return post_rendezvous(std::move(head), std::move(region));
  }
  // Small messages ride in the header (no registered memory); larger ones
  // are copied once into registered memory that the frames' payload slices
  // name (it returns to the pool when the sends completed), unless they
  // came in registered memory.
  if (!region.valid()
      && len + pb::actor_frame_overhead > transport::max_send_header_bytes) {
    auto mr = copy_to_pool(*core_.pool(), data, len);
    if (!mr)
      return mr.error();
    region = std::move(*mr);
  }
  size_t offset = 0;
  bool first = true;
  do {
    size_t n = std::min(chunk_max, len - offset);
    // Written by hand (pb::encode_actor_message: the bytes protobuf would
    // write) into a header buffer the link recycled: no Message built,
    // sized and serialized, no heap allocation per message.
    pb::actor_message_fields f;
    f.target = target;
    f.sender = sender;
    f.message_id = message_id;
    f.len = n;
    f.total_len = first && n < len ? len : 0;
    f.down = down;
    auto inline_bytes = region.valid() ? size_t{0} : n;
    auto buf = core_.header_buffer();
    buf.resize(pb::actor_frame_overhead + inline_bytes);
    auto header_len
        = pb::encode_actor_message(f, buf.data(), buf.size(), max_len);
    if (header_len == 0)
      return make_error(errc::frame_too_large,
                        "cannot encode an actor message");
    local_mr payload;
    if (region.valid()) {
      auto slice = region.slice(offset, n);
      if (!slice)
        return slice.error();
      payload = std::move(*slice);
    } else if (n > 0) {
      std::memcpy(buf.data() + header_len, data + offset, n);
    }
    buf.resize(header_len + inline_bytes);
    core_.out().post(std::move(buf), std::move(payload));
    offset += n;
    first = false;
  } while (offset < len);
  return caf::none;
}

void actor_channel::on_lookup(uint64_t id, const pb::ActorLookup& req) {
  pb::Message res;
  auto* r = res.mutable_response();
  r->set_request_id(id);
  auto* body = r->mutable_actor_lookup();
  if (!core_.opts().remote_actors) {
    body->set_status(pb::MALFORMED);
    body->set_detail("this node does not offer remote actors");
    core_.reject(res, "ActorLookup without remote actors offered");
    return;
  }
  if (req.name().empty() || req.name().size() > max_name_len) {
    body->set_status(pb::MALFORMED);
    body->set_detail("actor names have 1 to 256 bytes");
    core_.reject(res, "ActorLookup with an invalid name");
    return;
  }
  core_.accepted();
  auto found = core_.out().find_actor(req.name());
  body->set_status(pb::OK);
  body->set_actor_id(found.id);
  for (auto& sig : found.interface)
    body->add_interface(std::move(sig));
  core_.send_unsolicited(res);
}

void actor_channel::on_message(const pb::ActorMessage& m,
                               const pb::decode_result& frame) {
  if (!core_.opts().remote_actors || inbound_.empty()) {
    deliver(m, frame.payload, frame.payload_len);
    return;
  }
  // Behind a rendezvous actor message still being read: wait for it.
  auto queued = core_.buffered_bytes();
  if (queued > core_.opts().peer_max_queued_bytes
      || frame.payload_len > core_.opts().peer_max_queued_bytes - queued) {
    ++core_.counters().protocol_errors;
    core_.end_connection(make_error(errc::quota_exceeded,
                                    "the peer sent more actor messages than "
                                    "peer-max-queued-bytes holds while one was "
                                    "being read"),
                         "the peer exceeded peer-max-queued-bytes with actor "
                         "messages");
    return;
  }
  core_.accepted();
  inbound_actor a;
  a.head = m;
  a.bytes.assign(frame.payload, frame.payload + frame.payload_len);
  inbound_.push_ready(std::move(a), frame.payload_len);
}

void actor_channel::deliver(const pb::ActorMessage& m, const uint8_t* data,
                            size_t len) {
  caf::error err;
  if (!core_.opts().remote_actors)
    err = make_error(errc::not_negotiated,
                     "an actor message, but we did not offer remote actors");
  else
    err = core_.out().deliver_actor_message(m, data, len);
  if (!err) {
    core_.accepted();
    track_partial();
    return;
  }
  track_partial();
  ++core_.counters().protocol_errors;
  if (auto v = core_.may_log(spdlog::level::warn))
    log().warn("agent {}: refused an actor message: {}{}", core_.link().peer,
               render(err), suppressed_note(v.denied_before));
  // A peer over our window of actor messages is disconnected at once: it
  // ignores the credit we returned (or, without EXT_ACTOR_FLOW, floods a
  // slow actor).
  if (err.category() == error_category
      && err.code() == static_cast<uint8_t>(errc::quota_exceeded)) {
    core_.end_connection(err, "the peer exceeded actor-window-messages or "
                              "actor-window-bytes");
    return;
  }
  core_.count_violation();
}

// -- the chunked message being reassembled ------------------------------------

/// Called after each actor frame the sink took: notes when a chunked
/// message starts (its deadline runs from there) and drops one that
/// outgrew the peer's budget.
void actor_channel::track_partial() {
  auto p = core_.out().partial_actor();
  if (!p.active) {
    partial_ = false;
    return;
  }
  if (!partial_) {
    partial_ = true;
    partial_since_ = core_.now();
    core_.out().schedule_sweep();
  }
  auto held = core_.buffered_bytes();
  const auto& opts = core_.opts();
  if (held <= opts.peer_max_queued_bytes)
    return;
  partial_ = false;
  ++core_.counters().partials_dropped;
  ++core_.counters().protocol_errors;
  auto why = make_error(
      errc::quota_exceeded,
      "the receiver holds " + std::to_string(held)
          + " bytes for this peer with the actor message being reassembled, "
            "over its peer-max-queued-bytes="
          + std::to_string(opts.peer_max_queued_bytes)
          + "; send smaller messages or raise it there");
  core_.out().drop_partial_actor(why);
  if (auto v = core_.may_log(spdlog::level::warn))
    log().warn("agent {}: dropped a chunked actor message over "
               "peer-max-queued-bytes{}",
               core_.link().peer, suppressed_note(v.denied_before));
  core_.count_violation();
}

actor_channel::time_point actor_channel::expire_partial(time_point now) {
  if (!partial_)
    return time_point::max();
  if (!core_.out().partial_actor().active) {
    partial_ = false;
    return time_point::max();
  }
  const auto& opts = core_.opts();
  auto deadline = partial_since_
                  + std::chrono::milliseconds{opts.peer_partial_timeout_ms};
  if (now < deadline)
    return deadline;
  partial_ = false;
  ++core_.counters().partials_dropped;
  ++core_.counters().protocol_errors;
  core_.out().drop_partial_actor(make_error(
      errc::request_timeout,
      "the rest of the chunked actor message did not arrive within the "
      "receiver's peer-partial-timeout-ms="
          + std::to_string(opts.peer_partial_timeout_ms)
          + " of its first chunk; send it faster or raise the option there"));
  if (auto v = core_.may_log(spdlog::level::warn))
    log().warn("agent {}: dropped a chunked actor message unfinished after "
               "peer-partial-timeout-ms={}{}",
               core_.link().peer, opts.peer_partial_timeout_ms,
               suppressed_note(v.denied_before));
  core_.count_violation();
  return time_point::max();
}

} // namespace rdmactor
