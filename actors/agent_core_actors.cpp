// The agent core's part of remote actors: ActorLookup requests both ways
// and ActorMessage frames (chunked when they exceed the max message
// length).  The CAF side (proxies, serialization, delivery) is in
// actors/remote_actors.cpp, reached through the sink.

#include <cstring>

#include "actors/agent_core.hpp"
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

} // namespace

void agent_core::post_actor_ack(uint64_t messages, uint64_t bytes) {
  if (closed_)
    return;
  pb::Message msg;
  auto* ack = msg.mutable_actor_ack();
  ack->set_messages(messages);
  ack->set_bytes(bytes);
  send_unsolicited(msg);
}

void agent_core::on_actor_ack(const pb::ActorAck& m) {
  caf::error err;
  if (!opts_.remote_actors || !opts_.actor_flow
      || !peer_offers(pb::EXT_ACTOR_FLOW))
    err = make_error(errc::not_negotiated,
                     "an ActorAck, but actor flow control was not offered "
                     "both ways");
  else
    err = out_.take_actor_ack(m.messages(), m.bytes());
  if (!err)
    return;
  ++counters_.protocol_errors;
  if (auto v = may_log(spdlog::level::warn))
    log().warn("agent {}: refused an ActorAck: {}{}", link_.peer, render(err),
               suppressed_note(v.denied_before));
  count_violation();
}

void agent_core::lookup_actor(
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
    req->set_request_id(new_request_id());
    auto* body = req->mutable_actor_lookup();
    body->set_name(name);
    for (auto& x : ifs)
      body->add_expected_interface(std::move(x));
    send_request(
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
        now_);
  };
  when_offered(pb::EXT_REMOTE_ACTORS, "remote actors", now, std::move(go));
}

caf::error agent_core::post_actor_message(uint64_t target, uint64_t sender,
                                          uint64_t message_id, const char* data,
                                          size_t len, bool down) {
  return post_actor(target, sender, message_id, data, len, local_mr{}, down);
}

caf::error agent_core::post_actor_message(uint64_t target, uint64_t sender,
                                          uint64_t message_id, local_mr bytes,
                                          bool down) {
  auto data = reinterpret_cast<const char*>(bytes.data());
  auto len = bytes.size();
  return post_actor(target, sender, message_id, data, len, std::move(bytes),
                    down);
}

caf::error agent_core::post_actor(uint64_t target, uint64_t sender,
                                  uint64_t message_id, const char* data,
                                  size_t len, local_mr region, bool down) {
  if (closed_)
    return peer_gone_error();
  if (!peer_offers(pb::EXT_REMOTE_ACTORS))
    return make_error(errc::not_negotiated,
                      "the peer " + link_.peer
                          + " did not offer remote actors in its Hello");
  const size_t max_len = link_.max_message_len_bytes;
  if (max_len <= pb::actor_frame_overhead)
    return make_error(errc::invalid_argument,
                      "the max message length leaves no room for actor "
                      "messages");
  const size_t chunk_max = max_len - pb::actor_frame_overhead;
  if (len > chunk_max && actor_rendezvous_to_peer()) {
    pb::ActorMessage head;
    head.set_target(target);
    head.set_sender(sender);
    head.set_message_id(message_id);
    head.set_down(down);
    if (!region.valid()) {
      auto mr = pool_->allocate(len, 64, transport::access::local_write, false);
      if (!mr)
        return mr.error();
      std::memcpy(mr->data(), data, len);
      region = std::move(*mr);
    }
    return post_actor_rendezvous(std::move(head), std::move(region));
  }
  // Small messages ride in the header (no registered memory); larger ones
  // are copied once into registered memory that the frames' payload slices
  // name (it returns to the pool when the sends completed), unless they
  // came in registered memory.
  if (!region.valid()
      && len + pb::actor_frame_overhead > transport::max_send_header_bytes) {
    auto mr = pool_->allocate(len, 64, transport::access::local_write, false);
    if (!mr)
      return mr.error();
    std::memcpy(mr->data(), data, len);
    region = std::move(*mr);
  }
  size_t offset = 0;
  bool first = true;
  do {
    size_t n = std::min(chunk_max, len - offset);
    pb::Message msg;
    auto* m = msg.mutable_actor_message();
    m->set_target(target);
    m->set_sender(sender);
    m->set_message_id(message_id);
    m->set_len(n);
    if (first && n < len)
      m->set_total_len(len);
    m->set_down(down);
    auto inline_bytes = region.valid() ? size_t{0} : n;
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong()
                             + inline_bytes);
    auto res = pb::encode(msg, buf.data(), buf.size(), max_len);
    if (res.code != errc::none)
      return make_error(res.code, "cannot encode an actor message");
    local_mr payload;
    if (region.valid()) {
      auto slice = region.slice(offset, n);
      if (!slice)
        return slice.error();
      payload = std::move(*slice);
    } else if (n > 0) {
      std::memcpy(buf.data() + res.header_len, data + offset, n);
    }
    buf.resize(res.header_len + inline_bytes);
    out_.post(std::move(buf), std::move(payload));
    offset += n;
    first = false;
  } while (offset < len);
  return caf::none;
}

void agent_core::on_actor_lookup(uint64_t id, const pb::ActorLookup& req) {
  pb::Message res;
  auto* r = res.mutable_response();
  r->set_request_id(id);
  auto* body = r->mutable_actor_lookup();
  if (!opts_.remote_actors) {
    body->set_status(pb::MALFORMED);
    body->set_detail("this node does not offer remote actors");
    reject(res, "ActorLookup without remote actors offered");
    return;
  }
  if (req.name().empty() || req.name().size() > max_name_len) {
    body->set_status(pb::MALFORMED);
    body->set_detail("actor names have 1 to 256 bytes");
    reject(res, "ActorLookup with an invalid name");
    return;
  }
  accepted();
  auto found = out_.find_actor(req.name());
  body->set_status(pb::OK);
  body->set_actor_id(found.id);
  for (auto& sig : found.interface)
    body->add_interface(std::move(sig));
  send_unsolicited(res);
}

void agent_core::on_actor_message(const pb::ActorMessage& m,
                                  const pb::decode_result& frame) {
  if (!opts_.remote_actors || actor_inbound_.empty()) {
    deliver_actor_frame(m, frame.payload, frame.payload_len);
    return;
  }
  // Behind a rendezvous actor message still being read: wait for it.
  auto queued = buffered_bytes();
  if (queued > opts_.peer_max_queued_bytes
      || frame.payload_len > opts_.peer_max_queued_bytes - queued) {
    ++counters_.protocol_errors;
    end_connection(make_error(errc::quota_exceeded,
                              "the peer sent more actor messages than "
                              "peer-max-queued-bytes holds while one was "
                              "being read"),
                   "the peer exceeded peer-max-queued-bytes with actor "
                   "messages");
    return;
  }
  accepted();
  inbound_actor a;
  a.head = m;
  a.bytes.assign(frame.payload, frame.payload + frame.payload_len);
  actor_inbound_.push_ready(std::move(a), frame.payload_len);
}

void agent_core::deliver_actor_frame(const pb::ActorMessage& m,
                                     const uint8_t* data, size_t len) {
  caf::error err;
  if (!opts_.remote_actors)
    err = make_error(errc::not_negotiated,
                     "an actor message, but we did not offer remote actors");
  else
    err = out_.deliver_actor_message(m, data, len);
  if (!err) {
    accepted();
    track_partial_actor();
    return;
  }
  track_partial_actor();
  ++counters_.protocol_errors;
  if (auto v = may_log(spdlog::level::warn))
    log().warn("agent {}: refused an actor message: {}{}", link_.peer,
               render(err), suppressed_note(v.denied_before));
  // A peer over our window of actor messages is disconnected at once: it
  // ignores the credit we returned (or, without EXT_ACTOR_FLOW, floods a
  // slow actor).
  if (err.category() == error_category
      && err.code() == static_cast<uint8_t>(errc::quota_exceeded)) {
    end_connection(err, "the peer exceeded actor-window-messages or "
                        "actor-window-bytes");
    return;
  }
  count_violation();
}

} // namespace rdmactor
