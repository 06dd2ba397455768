// The agent protocol's rendezvous (EXT_RENDEZVOUS): a send_data payload
// over the eager size stays in the sender's memory, registered for remote
// read; a small SendData names it (SendData.source) and the receiver reads
// it with RDMA READ into memory of its own, then answers the SendData.  So
// the receive buffers of a connection stay eager-sized whatever the
// message sizes (docs/architecture.md, "Receive memory").

#include "actors/agent_core.hpp"

#include <algorithm>
#include <limits>

#include "common/tuning.hpp"

namespace rdmactor {

namespace pb = protocol;

namespace {

/// Largest chunk one RDMA operation of the link moves (link::refusal).
constexpr uint64_t max_read_bytes = uint64_t{1} << 31;

} // namespace

bool agent_core::offers_rendezvous() const noexcept {
  return opts_.eager_message_len_bytes < opts_.max_message_len_bytes;
}

bool agent_core::rendezvous_to_peer() const noexcept {
  return peer_offers(pb::EXT_RENDEZVOUS) && peer_max_rendezvous_bytes_ > 0;
}

// -- sender -------------------------------------------------------------------

bool agent_core::issue_rendezvous_chunk(
    const std::shared_ptr<send_data_stream>& s) {
  if (!s->read_registration()) {
    // One registration per send_data call, for remote read only: its rkey
    // opens exactly this payload, and it goes with the stream.
    auto reg = pool_->register_for_peer_read(s->mr());
    if (!reg) {
      s->fail(reg.error());
      return false;
    }
    s->set_read_registration(std::move(*reg));
  }
  auto [offset, len]
      = s->next_piece(std::min(peer_max_rendezvous_bytes_, max_read_bytes));
  mr_token source{s->mr().addr() + offset, len, s->read_registration()->rkey()};
  ++counters_.rendezvous_sent;
  auto id = new_request_id();
  send_request(
      pb::make_send_data_rendezvous(id, pb::make_token(source), s->imm()),
      local_mr{}, chunk_answer(s, len), now_);
  return true;
}

// -- receiver -----------------------------------------------------------------

caf::error agent_core::check_rendezvous(const pb::SendData& req,
                                        pb::Status& status) const {
  auto fail = [&status](pb::Status st, errc code, std::string what) {
    status = st;
    return make_error(code, std::move(what));
  };
  if (!offers_rendezvous())
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous SendData (source set), which this node did not "
                "offer in its Hello");
  auto len = req.len();
  if (auto err = check_source(req.source(), len, "SendData.len", status))
    return err;
  // An honest sender uses a rendezvous only for what an eager SendData
  // cannot carry; smaller ones would let a peer keep many tiny READs in
  // flight.
  constexpr size_t overhead = pb::max_frame_overhead + pb::imm_frame_overhead;
  auto eager = link_.max_message_len_bytes > overhead
                   ? size_t{link_.max_message_len_bytes} - overhead
                   : size_t{0};
  if (len < eager)
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous SendData of " + std::to_string(len)
                    + " bytes, which fit an eager one (below "
                    + std::to_string(eager) + ")");
  if (len > opts_.max_message_len_bytes)
    return fail(pb::SIZE_LIMIT, errc::size_limit,
                "a rendezvous SendData of " + std::to_string(len)
                    + " bytes exceeds the "
                    + std::to_string(opts_.max_message_len_bytes)
                    + " this node offered (Hello.max_rendezvous_bytes)");
  return check_queued(len, status);
}

caf::error agent_core::check_source(const pb::MrToken& src, uint64_t len,
                                    const char* what,
                                    pb::Status& status) const {
  if (src.len() != len) {
    status = pb::LENGTH_MISMATCH;
    return make_error(errc::length_mismatch,
                      std::string{what} + " is " + std::to_string(len)
                          + " but its source token names "
                          + std::to_string(src.len()) + " bytes");
  }
  if (src.addr() > std::numeric_limits<uint64_t>::max() - len) {
    status = pb::MALFORMED;
    return make_error(errc::malformed_message,
                      "the source token's range wraps around the address "
                      "space");
  }
  return {};
}

caf::error agent_core::check_queued(uint64_t len, pb::Status& status) const {
  auto queued = buffered_bytes();
  if (queued > opts_.peer_max_queued_bytes
      || len > opts_.peer_max_queued_bytes - queued) {
    status = pb::QUOTA_EXCEEDED;
    return make_error(errc::quota_exceeded,
                      std::to_string(queued)
                          + " bytes you sent are not claimed or still being "
                            "read (peer-max-queued-bytes="
                          + std::to_string(opts_.peer_max_queued_bytes) + ")");
  }
  return {};
}

void agent_core::on_send_data_rendezvous(uint64_t id, const pb::SendData& req) {
  auto status = pb::OK;
  if (auto err = check_rendezvous(req, status)) {
    reject(pb::make_send_data_response(id, status, what_of(err)),
           "a rendezvous SendData");
    return;
  }
  auto len = req.len();
  // Not zeroed: the READ overwrites every byte before anyone sees it.
  auto dst = pool_->allocate(len, 64, transport::access::local_write, false);
  if (!dst) {
    reject(pb::make_send_data_response(id, pb::OUT_OF_MEMORY,
                                       what_of(dst.error())),
           "a rendezvous SendData (no memory to read it into)");
    return;
  }
  accepted();
  ++counters_.rendezvous_read;
  inbound_chunk c;
  c.id = id;
  c.chunk = *dst;
  if (req.has_imm())
    c.imm = req.imm();
  auto seq = inbound_.push_reading(std::move(c), len, partial_deadline());
  out_.schedule_sweep();
  out_.read(std::move(*dst), pb::token_of(req.source()),
            [this, seq](const caf::error& err) { on_read_done(seq, err); });
}

void agent_core::deliver_in_order(uint64_t id, local_mr chunk,
                                  std::optional<uint32_t> imm) {
  if (inbound_.empty()) {
    if (imm)
      out_.deliver_imm_data(std::move(chunk), *imm);
    else
      out_.deliver_data(std::move(chunk));
    ack_send_data(id);
    return;
  }
  // Behind a chunk still being read: wait for it (counted like one).
  auto counted = chunk.size();
  inbound_.push_ready(inbound_chunk{id, std::move(chunk), imm}, counted);
}

void agent_core::on_read_done(uint64_t seq, const caf::error& err) {
  if (closed_)
    return;
  auto* c = inbound_.complete(seq, !err);
  if (!c)
    return;
  if (err) {
    auto id = c->id;
    drain_in_order();
    reject(pb::make_send_data_response(id, pb::UNKNOWN_TOKEN,
                                       "reading the rendezvous source failed: "
                                           + what_of(err)),
           "a rendezvous SendData whose source could not be read");
    return;
  }
  drain_in_order();
}

void agent_core::drain_in_order() {
  inbound_.drain([this](inbound_chunk&& c, bool failed) {
    if (failed)
      return; // answered with an error when its READ failed
    if (c.imm)
      out_.deliver_imm_data(std::move(c.chunk), *c.imm);
    else
      out_.deliver_data(std::move(c.chunk));
    ack_send_data(c.id);
  });
}

} // namespace rdmactor
