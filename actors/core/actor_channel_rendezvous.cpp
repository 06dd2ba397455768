// Rendezvous for actor messages (EXT_ACTOR_RENDEZVOUS): a serialization
// that does not fit one eager frame stays in the sender's registered
// memory; a small Request (ActorMessage with `source`) names it, the
// receiver reads it with RDMA READ, answers like a rendezvous SendData
// (the sender then frees the memory) and delivers the message in order
// with the actor messages around it.  One frame, one READ and one
// (cumulative) answer per message instead of a chunk per eager size.

#include "actors/core/actor_channel.hpp"

#include <algorithm>
#include <cstring>

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

namespace pb = protocol;

namespace {

/// What a rendezvous actor message keeps alive on the sender until the
/// peer answered (or the request timed out): the copy of the
/// serialization and its registration for remote read.
struct actor_source {
  local_mr mr;
  std::unique_ptr<transport::memory_region> read_reg;
  /// Set while send_request runs: a completion then is its own refusal
  /// (closed, too many pending, encoding), kept in `refused`.
  bool in_call = true;
  caf::error refused;
};

} // namespace

bool actor_channel::offers_rendezvous() const noexcept {
  return core_.opts().remote_actors && core_.offers_rendezvous();
}

bool actor_channel::rendezvous_to_peer() const noexcept {
  return core_.peer_offers(pb::EXT_ACTOR_RENDEZVOUS)
         && core_.peer_offers(pb::EXT_REMOTE_ACTORS);
}

// -- sender -------------------------------------------------------------------

caf::error actor_channel::post_rendezvous(pb::ActorMessage head,
                                          local_mr region) {
  auto len = region.size();
  // Its own registration for remote read: the rkey opens exactly this
  // serialization, and it goes when the peer answered.
  auto reg = core_.pool()->register_for_peer_read(region);
  if (!reg)
    return reg.error();
  auto src = std::make_shared<actor_source>();
  src->mr = std::move(region);
  src->read_reg = std::move(*reg);
  pb::Message msg;
  auto* req = msg.mutable_request();
  req->set_request_id(core_.new_request_id());
  auto* m = req->mutable_actor_message();
  *m = std::move(head);
  m->set_len(len);
  *m->mutable_source()
      = pb::make_token(src->mr.addr(), len, src->read_reg->rkey());
  // send_request answers a refusal of its own (closed, too many pending,
  // encoding) synchronously: then nothing went out.
  core_.send_request(
      std::move(msg), local_mr{},
      [this, src](const pb::Response* res, const caf::error& err) {
        if (src->in_call) {
          src->refused = err;
          return;
        }
        // The peer read the serialization (or will not): `src` goes with
        // this function.  A refusal reached the sender's actor from the
        // peer already (an error answer to a request among it); a timeout
        // or the connection's end fails the remote actors' requests there.
        caf::error why = err;
        if (!why && res != nullptr)
          why = check_response(*res, pb::Response::kSendData,
                               "a rendezvous actor message");
        if (why)
          log().debug("agent {}: rendezvous actor message: {}",
                      core_.link().peer, render(why));
      },
      core_.now());
  src->in_call = false;
  if (src->refused)
    return std::move(src->refused);
  ++core_.counters().rendezvous_sent;
  return caf::none;
}

// -- receiver -----------------------------------------------------------------

caf::error actor_channel::check_rendezvous(const pb::ActorMessage& m,
                                           pb::Status& status) const {
  auto fail = [&status](pb::Status st, errc code, std::string what) {
    status = st;
    return make_error(code, std::move(what));
  };
  if (!offers_rendezvous())
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous actor message, which this node did not offer "
                "in its Hello (EXT_ACTOR_RENDEZVOUS)");
  if (!m.has_source() || m.total_len() != 0)
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous actor message without a source token or with "
                "total_len set");
  auto len = m.len();
  if (auto err
      = core_.check_source(m.source(), len, "ActorMessage.len", status))
    return err;
  // An honest sender reads only what an eager frame cannot carry; smaller
  // ones would let a peer keep many tiny READs in flight.
  if (core_.link().max_message_len_bytes <= pb::actor_frame_overhead
      || len <= core_.link().max_message_len_bytes - pb::actor_frame_overhead)
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous actor message of " + std::to_string(len)
                    + " bytes, which fit an eager frame");
  if (len > core_.opts().actor_max_message_bytes)
    return fail(pb::SIZE_LIMIT, errc::size_limit,
                "the peer sent an actor message of " + std::to_string(len)
                    + " bytes, over actor-max-message-bytes="
                    + std::to_string(core_.opts().actor_max_message_bytes)
                    + " of the receiver");
  return core_.check_queued(len, status);
}

void actor_channel::on_rendezvous(uint64_t id, const pb::ActorMessage& m) {
  auto status = pb::OK;
  auto err = check_rendezvous(m, status);
  local_mr dst;
  if (!err) {
    // Not zeroed: the READ overwrites every byte before anyone sees it.
    auto mem = core_.pool()->allocate(m.len(), 64,
                                      transport::access::local_write, false);
    if (mem) {
      dst = std::move(*mem);
    } else {
      status = pb::OUT_OF_MEMORY;
      err = std::move(mem.error());
    }
  }
  if (err) {
    core_.reject(pb::make_send_data_response(id, status, what_of(err)),
                 "a rendezvous actor message");
    // Refused in its turn: the sender's actor learns why (a request fails
    // with it), and the peer's credit counts it.  Only for a well-formed
    // one: a malformed frame names nothing we trust.
    if (status == pb::SIZE_LIMIT || status == pb::QUOTA_EXCEEDED
        || status == pb::OUT_OF_MEMORY) {
      if (inbound_.empty()) {
        core_.out().refuse_actor_message(m, err);
      } else {
        inbound_actor a;
        a.head = m;
        a.why = std::move(err);
        inbound_.push_failed(std::move(a));
      }
    }
    return;
  }
  core_.accepted();
  ++core_.counters().rendezvous_read;
  inbound_actor a;
  a.head = m;
  a.head.clear_source();
  a.read_into = dst;
  auto seq
      = inbound_.push_reading(std::move(a), m.len(), core_.partial_deadline());
  core_.out().schedule_sweep();
  core_.out().read(std::move(dst), pb::token_of(m.source()),
                   [this, seq, id](const caf::error& err) {
                     if (core_.closed())
                       return;
                     if (err)
                       core_.reject(
                           pb::make_send_data_response(
                               id, pb::UNKNOWN_TOKEN,
                               "reading the rendezvous actor message failed: "
                                   + what_of(err)),
                           "a rendezvous actor message whose source could not "
                           "be read");
                     else
                       core_.ack_send_data(id);
                     on_read_done(seq, err);
                   });
}

void actor_channel::on_read_done(uint64_t seq, const caf::error& err) {
  auto* a = inbound_.complete(seq, !err);
  if (!a)
    return;
  if (err)
    a->why = make_error(errc::peer_gone,
                        "the receiver could not read the actor message from "
                        "the sender's memory: "
                            + what_of(err));
  drain();
}

void actor_channel::drain() {
  inbound_.drain(
      [this](inbound_actor&& a, bool failed) {
        if (failed)
          core_.out().refuse_actor_message(a.head, a.why);
        else if (a.read_into.valid())
          deliver(a.head, a.read_into.data(), a.read_into.size());
        else
          deliver(a.head, a.bytes.data(), a.bytes.size());
      },
      [this] { return core_.serving(); });
}

} // namespace rdmactor
