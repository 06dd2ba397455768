// Rendezvous for actor messages (EXT_ACTOR_RENDEZVOUS): a serialization
// that does not fit one eager frame stays in the sender's registered
// memory; a small Request (ActorMessage with `source`) names it, the
// receiver reads it with RDMA READ, answers like a rendezvous SendData
// (the sender then frees the memory) and delivers the message in order
// with the actor messages around it.  One frame, one READ and one
// (cumulative) answer per message instead of a chunk per eager size.

#include "actors/agent_core.hpp"

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

bool agent_core::offers_actor_rendezvous() const noexcept {
  return opts_.remote_actors && offers_rendezvous();
}

bool agent_core::actor_rendezvous_to_peer() const noexcept {
  return peer_offers(pb::EXT_ACTOR_RENDEZVOUS)
         && peer_offers(pb::EXT_REMOTE_ACTORS);
}

// -- sender -------------------------------------------------------------------

caf::error agent_core::post_actor_rendezvous(pb::ActorMessage head,
                                             local_mr region) {
  auto len = region.size();
  // Its own registration for remote read: the rkey opens exactly this
  // serialization, and it goes when the peer answered.
  auto reg = pool_->register_for_peer_read(region);
  if (!reg)
    return reg.error();
  auto src = std::make_shared<actor_source>();
  src->mr = std::move(region);
  src->read_reg = std::move(*reg);
  pb::Message msg;
  auto* req = msg.mutable_request();
  req->set_request_id(new_request_id());
  auto* m = req->mutable_actor_message();
  *m = std::move(head);
  m->set_len(len);
  *m->mutable_source()
      = pb::make_token(src->mr.addr(), len, src->read_reg->rkey());
  // send_request answers a refusal of its own (closed, too many pending,
  // encoding) synchronously: then nothing went out.
  send_request(
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
          log().debug("agent {}: rendezvous actor message: {}", link_.peer,
                      render(why));
      },
      now_);
  src->in_call = false;
  if (src->refused)
    return std::move(src->refused);
  ++counters_.rendezvous_sent;
  return caf::none;
}

// -- receiver -----------------------------------------------------------------

caf::error agent_core::check_actor_rendezvous(const pb::ActorMessage& m,
                                              pb::Status& status) const {
  auto fail = [&status](pb::Status st, errc code, std::string what) {
    status = st;
    return make_error(code, std::move(what));
  };
  if (!offers_actor_rendezvous())
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous actor message, which this node did not offer "
                "in its Hello (EXT_ACTOR_RENDEZVOUS)");
  if (!m.has_source() || m.total_len() != 0)
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous actor message without a source token or with "
                "total_len set");
  auto len = m.len();
  if (auto err = check_source(m.source(), len, "ActorMessage.len", status))
    return err;
  // An honest sender reads only what an eager frame cannot carry; smaller
  // ones would let a peer keep many tiny READs in flight.
  if (link_.max_message_len_bytes <= pb::actor_frame_overhead
      || len <= link_.max_message_len_bytes - pb::actor_frame_overhead)
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous actor message of " + std::to_string(len)
                    + " bytes, which fit an eager frame");
  if (len > opts_.actor_max_message_bytes)
    return fail(pb::SIZE_LIMIT, errc::size_limit,
                "the peer sent an actor message of " + std::to_string(len)
                    + " bytes, over actor-max-message-bytes="
                    + std::to_string(opts_.actor_max_message_bytes)
                    + " of the receiver");
  return check_queued(len, status);
}

void agent_core::on_actor_rendezvous(uint64_t id, const pb::ActorMessage& m) {
  auto status = pb::OK;
  auto err = check_actor_rendezvous(m, status);
  local_mr dst;
  if (!err) {
    // Not zeroed: the READ overwrites every byte before anyone sees it.
    auto mem
        = pool_->allocate(m.len(), 64, transport::access::local_write, false);
    if (mem) {
      dst = std::move(*mem);
    } else {
      status = pb::OUT_OF_MEMORY;
      err = std::move(mem.error());
    }
  }
  if (err) {
    reject(pb::make_send_data_response(id, status, what_of(err)),
           "a rendezvous actor message");
    // Refused in its turn: the sender's actor learns why (a request fails
    // with it), and the peer's credit counts it.  Only for a well-formed
    // one: a malformed frame names nothing we trust.
    if (status == pb::SIZE_LIMIT || status == pb::QUOTA_EXCEEDED
        || status == pb::OUT_OF_MEMORY) {
      if (actor_inbound_.empty()) {
        out_.refuse_actor_message(m, err);
      } else {
        inbound_actor a;
        a.head = m;
        a.why = std::move(err);
        actor_inbound_.push_failed(std::move(a));
      }
    }
    return;
  }
  accepted();
  ++counters_.rendezvous_read;
  inbound_actor a;
  a.head = m;
  a.head.clear_source();
  a.read_into = dst;
  auto seq
      = actor_inbound_.push_reading(std::move(a), m.len(), partial_deadline());
  out_.schedule_sweep();
  out_.read(std::move(dst), pb::token_of(m.source()),
            [this, seq, id](const caf::error& err) {
              if (closed_)
                return;
              if (err)
                reject(pb::make_send_data_response(
                           id, pb::UNKNOWN_TOKEN,
                           "reading the rendezvous actor message failed: "
                               + what_of(err)),
                       "a rendezvous actor message whose source could not "
                       "be read");
              else
                ack_send_data(id);
              on_actor_read_done(seq, err);
            });
}

void agent_core::on_actor_read_done(uint64_t seq, const caf::error& err) {
  auto* a = actor_inbound_.complete(seq, !err);
  if (!a)
    return;
  if (err)
    a->why = make_error(errc::peer_gone,
                        "the receiver could not read the actor message from "
                        "the sender's memory: "
                            + what_of(err));
  drain_actor_inbound();
}

void agent_core::drain_actor_inbound() {
  actor_inbound_.drain(
      [this](inbound_actor&& a, bool failed) {
        if (failed)
          out_.refuse_actor_message(a.head, a.why);
        else if (a.read_into.valid())
          deliver_actor_frame(a.head, a.read_into.data(), a.read_into.size());
        else
          deliver_actor_frame(a.head, a.bytes.data(), a.bytes.size());
      },
      [this] { return !closed_ && !disconnected_; });
}

} // namespace rdmactor
