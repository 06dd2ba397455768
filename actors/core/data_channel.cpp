// The SendData frames of one connection, both ways
// (actors/core/data_channel.hpp): our transfers in chunks, eager or by
// rendezvous (a payload over the eager size stays in our memory, registered for
// the peer's READ; a small SendData names it), the peer's chunks delivered in
// order, and the acknowledgements.  The receive buffers of a connection stay
// eager-sized whatever the message sizes (docs/architecture.md, "Receive
// memory").

#include "actors/core/data_channel.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "protocol/frame_scratch.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor {

namespace pb = protocol;

namespace {

/// Largest chunk one RDMA operation of the link moves (link::refusal).
constexpr uint64_t max_read_bytes = uint64_t{1} << 31;

} // namespace

// -- our side -----------------------------------------------------------------

void data_channel::send(local_mr mr, time_point now,
                        std::function<void(caf::expected<uint64_t>)> done,
                        std::optional<uint32_t> imm) {
  if (!mr.valid()) {
    if (done)
      done(make_error(errc::invalid_argument,
                      "send_data needs a valid local_mr"));
    return;
  }
  core_.set_now(now);
  auto chunk_max
      = size_t{core_.link().max_message_len_bytes} - pb::max_frame_overhead;
  if (imm)
    chunk_max -= pb::imm_frame_overhead;
  // From the connection's recycled blocks: no heap allocation per call.
  auto s = std::allocate_shared<send_data_stream>(
      recycling_allocator<send_data_stream>{streams_}, std::move(mr), chunk_max,
      tuning::send_data_window(core_.link().recv_depth), imm, std::move(done));
  if (!imm) {
    pump(s);
    return;
  }
  core_.when_offered(pb::EXT_IMMEDIATE_DATA,
                     "send_data with an immediate value", now,
                     [this, s](const caf::error& err) {
                       if (err)
                         s->fail(err);
                       else
                         pump(s);
                     });
}

/// Issues the next chunks of `s` while its window allows.  Each chunk's
/// request timer starts when the chunk is issued, so a long transfer never
/// times out for chunks that merely waited here.
void data_channel::pump(const std::shared_ptr<send_data_stream>& s) {
  while (s->wants_chunk()) {
    // Over the eager size to a peer that reads: by rendezvous.
    if (s->left() > s->chunk_max() && rendezvous_to_peer()) {
      if (!issue_rendezvous_chunk(s))
        return;
      continue;
    }
    auto chunk = s->next_eager();
    auto len = chunk.size();
    auto done = chunk_answer(s, len);
    if (!core_.admit_request(done))
      continue; // failed the stream
    // The data path's frame, encoded by hand (pb::encode_send_data: the
    // bytes a Message would give, without building one).
    pb::send_data_fields f;
    f.request_id = core_.new_request_id();
    f.len = len;
    f.imm = s->imm();
    f.acked = acks_.ids().data();
    f.acked_count = acks_that_fit(s->chunk_max() - len);
    auto header = core_.header_buffer();
    header.resize(pb::max_send_data_header_len(f.acked_count));
    auto n = pb::encode_send_data(f, header.data(), header.size(),
                                  core_.link().max_message_len_bytes);
    if (n == 0) {
      // Cannot happen (chunk_max leaves room for the frame): failed like
      // an encoding error of send_request.
      done(nullptr, make_error(errc::frame_too_large,
                               "cannot encode SendData: the frame exceeds "
                               "max-message-len-bytes"));
      continue;
    }
    header.resize(n);
    acks_attached(f.acked_count);
    core_.post_request(f.request_id, std::move(header), std::move(chunk),
                       std::move(done));
  }
}

/// The completion of one chunk of `s` (`len` bytes): the stream counts it
/// and ends with the first error or the last acknowledgement; more chunks
/// go otherwise.
request_table::completion_fn
data_channel::chunk_answer(const std::shared_ptr<send_data_stream>& s,
                           size_t len) {
  return [this, s, len](const pb::Response* res, const caf::error& err) {
    caf::error e = err;
    if (!e && !s->ended())
      e = check_response(*res, pb::Response::kSendData, "SendData");
    if (s->answered(len, e))
      pump(s);
  };
}

bool data_channel::rendezvous_to_peer() const noexcept {
  return core_.peer_offers(pb::EXT_RENDEZVOUS)
         && peer_max_rendezvous_bytes_ > 0;
}

bool data_channel::issue_rendezvous_chunk(
    const std::shared_ptr<send_data_stream>& s) {
  if (!s->read_registration()) {
    // One registration per send_data call, for remote read only: its rkey
    // opens exactly this payload, and it goes with the stream.
    auto reg = core_.pool()->register_for_peer_read(s->mr());
    if (!reg) {
      s->fail(reg.error());
      return false;
    }
    s->set_read_registration(std::move(*reg));
  }
  auto [offset, len]
      = s->next_piece(std::min(peer_max_rendezvous_bytes_, max_read_bytes));
  mr_token source{s->mr().addr() + offset, len, s->read_registration()->rkey()};
  ++core_.counters().rendezvous_sent;
  auto id = core_.new_request_id();
  core_.send_request(
      pb::make_send_data_rendezvous(id, pb::make_token(source), s->imm()),
      local_mr{}, chunk_answer(s, len), core_.now());
  return true;
}

// -- the peer's side ----------------------------------------------------------

void data_channel::on_send_data(uint64_t id, const pb::SendData& req,
                                const local_mr& buf,
                                const pb::decode_result& frame) {
  if (req.has_imm() && !core_.opts().immediate_data) {
    core_.reject(
        pb::make_send_data_response(
            id, pb::MALFORMED,
            "SendData with an immediate value, which this node did not "
            "offer in its Hello (immediate-data=false)"),
        "SendData with an immediate value we did not offer");
    return;
  }
  if (req.has_imm()
      && core_.out().queued_imms() >= core_.opts().peer_max_queued_imms) {
    core_.reject(pb::make_send_data_response(
                     id, pb::QUOTA_EXCEEDED,
                     std::to_string(core_.out().queued_imms())
                         + " immediate values you sent are not claimed yet "
                           "(peer-max-queued-imms)"),
                 "SendData over the immediate-value queue limit");
    return;
  }
  if (req.has_source()) {
    on_send_data_rendezvous(id, req);
    return;
  }
  auto offset = static_cast<size_t>(frame.payload - buf.data());
  auto view = buf.slice(offset, frame.payload_len);
  if (!view) {
    core_.reject(pb::make_send_data_response(id, pb::LENGTH_MISMATCH,
                                             "payload outside the message"),
                 "SendData");
    return;
  }
  // Rendezvous chunks still being read count as well.
  auto queued = core_.out().queued_data_bytes() + inbound_.bytes();
  if (queued > core_.opts().peer_max_queued_bytes
      || view->size() > core_.opts().peer_max_queued_bytes - queued) {
    core_.reject(
        pb::make_send_data_response(
            id, pb::QUOTA_EXCEEDED,
            std::to_string(queued)
                + " bytes you sent are not claimed yet (peer-max-queued-bytes="
                + std::to_string(core_.opts().peer_max_queued_bytes) + ")"),
        "SendData over the queue limit");
    return;
  }
  local_mr chunk;
  // Zero copy (a view of the receive buffer) while few receive buffers are
  // held; beyond half of the pool, copy out so the peer keeps its send
  // credits.  The frame being handled holds one itself.
  auto held = core_.out().receive_buffers_held();
  if (tuning::zero_copy_receive(held > 0 ? held - 1 : 0,
                                core_.link().recv_depth)) {
    chunk = std::move(*view);
  } else {
    auto copy = core_.pool()->allocate(view->size(), 64,
                                       transport::access::local_write, false);
    if (!copy) {
      core_.reject(pb::make_send_data_response(id, pb::OUT_OF_MEMORY,
                                               what_of(copy.error())),
                   "SendData (no memory for the copy)");
      return;
    }
    if (view->size() > 0)
      std::memcpy(copy->data(), view->data(), view->size());
    chunk = std::move(*copy);
  }
  core_.accepted();
  deliver_in_order(id, std::move(chunk),
                   req.has_imm() ? std::optional<uint32_t>{req.imm()}
                                 : std::nullopt);
}

void data_channel::on_send_data_rendezvous(uint64_t id,
                                           const pb::SendData& req) {
  auto status = pb::OK;
  if (auto err = check_rendezvous(req, status)) {
    core_.reject(pb::make_send_data_response(id, status, what_of(err)),
                 "a rendezvous SendData");
    return;
  }
  auto len = req.len();
  // Not zeroed: the READ overwrites every byte before anyone sees it.
  auto dst
      = core_.pool()->allocate(len, 64, transport::access::local_write, false);
  if (!dst) {
    core_.reject(pb::make_send_data_response(id, pb::OUT_OF_MEMORY,
                                             what_of(dst.error())),
                 "a rendezvous SendData (no memory to read it into)");
    return;
  }
  core_.accepted();
  ++core_.counters().rendezvous_read;
  inbound_chunk c;
  c.id = id;
  c.chunk = *dst;
  if (req.has_imm())
    c.imm = req.imm();
  auto seq = inbound_.push_reading(std::move(c), len, core_.partial_deadline());
  core_.out().schedule_sweep();
  core_.out().read(
      std::move(*dst), pb::token_of(req.source()),
      [this, seq](const caf::error& err) { on_read_done(seq, err); });
}

void data_channel::deliver_in_order(uint64_t id, local_mr chunk,
                                    std::optional<uint32_t> imm) {
  if (inbound_.empty()) {
    if (imm)
      core_.out().deliver_imm_data(std::move(chunk), *imm);
    else
      core_.out().deliver_data(std::move(chunk));
    ack(id);
    return;
  }
  // Behind a chunk still being read: wait for it (counted like one).
  auto counted = chunk.size();
  inbound_.push_ready(inbound_chunk{id, std::move(chunk), imm}, counted);
}

void data_channel::on_read_done(uint64_t seq, const caf::error& err) {
  if (core_.closed())
    return;
  auto* c = inbound_.complete(seq, !err);
  if (!c)
    return;
  if (err) {
    auto id = c->id;
    drain_in_order();
    core_.reject(pb::make_send_data_response(
                     id, pb::UNKNOWN_TOKEN,
                     "reading the rendezvous source failed: " + what_of(err)),
                 "a rendezvous SendData whose source could not be read");
    return;
  }
  drain_in_order();
}

void data_channel::drain_in_order() {
  inbound_.drain([this](inbound_chunk&& c, bool failed) {
    if (failed)
      return; // answered with an error when its READ failed
    if (c.imm)
      core_.out().deliver_imm_data(std::move(c.chunk), *c.imm);
    else
      core_.out().deliver_data(std::move(c.chunk));
    ack(c.id);
  });
}

caf::error data_channel::check_rendezvous(const pb::SendData& req,
                                          pb::Status& status) const {
  auto fail = [&status](pb::Status st, errc code, std::string what) {
    status = st;
    return make_error(code, std::move(what));
  };
  if (!core_.offers_rendezvous())
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous SendData (source set), which this node did not "
                "offer in its Hello");
  auto len = req.len();
  if (auto err = core_.check_source(req.source(), len, "SendData.len", status))
    return err;
  // An honest sender uses a rendezvous only for what an eager SendData
  // cannot carry; smaller ones would let a peer keep many tiny READs in
  // flight.
  constexpr size_t overhead = pb::max_frame_overhead + pb::imm_frame_overhead;
  auto eager = core_.link().max_message_len_bytes > overhead
                   ? size_t{core_.link().max_message_len_bytes} - overhead
                   : size_t{0};
  if (len < eager)
    return fail(pb::MALFORMED, errc::malformed_message,
                "a rendezvous SendData of " + std::to_string(len)
                    + " bytes, which fit an eager one (below "
                    + std::to_string(eager) + ")");
  if (len > core_.opts().max_rendezvous_bytes)
    return fail(pb::SIZE_LIMIT, errc::size_limit,
                "a rendezvous SendData of " + std::to_string(len)
                    + " bytes exceeds the "
                    + std::to_string(core_.opts().max_rendezvous_bytes)
                    + " this node offered (Hello.max_rendezvous_bytes; "
                      "rdmactor.max-rendezvous-bytes)");
  return core_.check_queued(len, status);
}

// -- cumulative acknowledgements ----------------------------------------------

void data_channel::flush_acks() {
  const auto& ids = acks_.ids();
  if (ids.empty() || core_.closed()) {
    acks_.clear();
    return;
  }
  core_.counters().merged_acks_sent += ids.size() - 1;
  // Built on the thread's reused arena: no heap allocation per flush.
  pb::frame_scratch scratch;
  pb::fill_send_data_acks(ids, scratch.message());
  acks_.clear();
  core_.send_unsolicited(scratch.message());
}

/// Acknowledges the SendData `id` (OK): at once, or gathered into one
/// cumulative response when the peer takes those.
void data_channel::ack(uint64_t id) {
  if (!peer_takes_cumulative_acks_) {
    core_.send_unsolicited(pb::make_send_data_response(id, pb::OK, {}));
    return;
  }
  // Gather until the frames queued now are handled: the owner flushes
  // behind them.  A full response goes at once.
  switch (acks_.add(id)) {
    case ack_gatherer::step::flush_now:
      flush_acks();
      break;
    case ack_gatherer::step::schedule_flush:
      core_.out().schedule_ack_flush();
      break;
    case ack_gatherer::step::none:
      break;
  }
}

// The largest SendData header with acknowledgements still goes in the
// transport's header slot (no spill into pool memory).
static_assert(pb::max_frame_overhead + pb::imm_frame_overhead
                  + pb::piggyback_ack_overhead(tuning::max_acks_per_response)
              <= transport::max_send_header_bytes);

bool data_channel::acks_may_ride() const noexcept {
  return !acks_.empty() && !core_.closed()
         && core_.peer_offers(pb::EXT_PIGGYBACK_ACKS);
}

/// How many gathered acknowledgements (the oldest) may ride on our next
/// SendData: as many as `room` bytes of its frame take, so they need no
/// response of their own.
size_t data_channel::acks_that_fit(size_t room) const noexcept {
  return acks_may_ride() ? acks_.fit(room) : 0;
}

/// The first `n` acknowledgements went out on a SendData.
void data_channel::acks_attached(size_t n) {
  acks_.attached(n);
  core_.counters().piggybacked_acks_sent += n;
}

/// Completes the requests of ours that the peer's SendData acknowledges
/// (SendData.acked): OK, as a SendDataResponse would.  Ids that are not
/// pending are counted and dropped like any unknown id; a list longer than
/// the protocol allows is dropped whole.
void data_channel::on_piggybacked_acks(const pb::SendData& req) {
  if (req.acked_size() == 0)
    return;
  if (static_cast<size_t>(req.acked_size()) > tuning::max_acks_per_response) {
    ++core_.counters().protocol_errors;
    if (auto v = core_.may_log(spdlog::level::warn))
      log().warn("agent {}: a SendData acknowledged {} requests (at most {}); "
                 "ignored them{}",
                 core_.link().peer, req.acked_size(),
                 tuning::max_acks_per_response,
                 suppressed_note(v.denied_before));
    core_.count_noise("a SendData that acknowledged too many requests");
    return;
  }
  static const pb::Response ok = [] {
    pb::Response r;
    r.mutable_send_data()->set_status(pb::OK);
    return r;
  }();
  core_.complete_acked(req.acked(), ok,
                       core_.counters().piggybacked_acks_received);
}

} // namespace rdmactor
