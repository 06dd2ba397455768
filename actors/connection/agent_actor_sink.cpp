// The core's sink of the agent actor (actor_sink, agent_state.hpp): how the
// protocol's effects reach the link, the user mailboxes and the actor.

#include <chrono>
#include <memory>
#include <optional>

#include "actors/connection/agent_state.hpp"
#include "actors/node/remote_mr_access.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"

namespace rdmactor::agent_detail {

// -- the core's sink ----------------------------------------------------------

void actor_sink::post(std::vector<uint8_t> header, local_mr payload) {
  // No answer wanted: a failed send takes the connection down (qp_down).
  // Once the link went back to the transport (the connection is ending),
  // nothing more goes to the peer.
  auto& st = self_->state;
  if (!st.driver.driving())
    return;
  st.driver.path().submit(transport::op_kind::send, std::move(header),
                          std::move(payload), mr_token{}, 0);
  st.driver.posted();
}

std::vector<uint8_t> actor_sink::header_buffer() {
  auto& st = self_->state;
  if (!st.driver.driving())
    return {};
  return st.driver.path().take_header_buffer();
}

void actor_sink::post_upkeep(std::vector<uint8_t> header) {
  auto& st = self_->state;
  if (!st.driver.driving())
    return; // the connection is ending (see `post`)
  st.driver.path().submit(transport::op_kind::send, std::move(header),
                          local_mr{}, mr_token{}, 0, std::nullopt, true);
  st.driver.posted(true);
}

void actor_sink::pack_frames(size_t max_bytes) {
  auto& st = self_->state;
  if (st.driver.driving())
    st.driver.path().pack_sends(max_bytes, protocol::mark_more_frames);
}

void actor_sink::upkeep_frame() {
  auto& st = self_->state;
  if (st.driver.driving())
    st.driver.path().mark_quiet();
}

void actor_sink::read(local_mr dst, const mr_token& src,
                      std::function<void(const caf::error&)> done) {
  // The link answers every READ; when it goes down, or this actor goes
  // first, `done` goes with it.
  submit_op(self_, transport::op_kind::read, std::move(dst), src, std::nullopt,
            [done](caf::expected<uint64_t> result) {
              done(result ? caf::error{} : result.error());
            });
}

void actor_sink::deliver_data(local_mr chunk) {
  auto& st = self_->state;
  if (st.handler) {
    // Maybe from inside the core: the handler runs after the poll.  A
    // chunk finished by a READ's completion (rendezvous) sets no frame
    // flag of its own; this one makes sure after_poll hands it over.
    st.handler_chunks.emplace_back(std::move(chunk));
    st.frames_seen = true;
  } else if (st.chunk_sub)
    self_->send(st.chunk_sub, data_atom::value, self_->id(), std::move(chunk));
  else if (st.subscriber)
    self_->send(st.subscriber, data_atom::value, std::move(chunk));
  else
    st.data.put(std::move(chunk));
}

void actor_sink::deliver_imm_data(local_mr chunk, uint32_t imm) {
  auto& st = self_->state;
  if (st.chunk_sub) {
    self_->send(st.chunk_sub, imm_atom::value, imm, self_->id(),
                std::move(chunk));
    return;
  }
  auto bytes = uint64_t{chunk.size()};
  st.imms.put(imm_item{imm, bytes, std::move(chunk)});
}

void actor_sink::deliver_write_imm(uint32_t imm, uint64_t bytes) {
  auto& st = self_->state;
  if (st.chunk_sub)
    self_->send(st.chunk_sub, imm_atom::value, imm, self_->id(), bytes);
  else
    st.imms.put(imm_item{imm, bytes, local_mr{}});
}

size_t actor_sink::queued_imms() const {
  return self_->state.imms.queued();
}

uint32_t actor_sink::receive_buffers_held() const {
  auto& st = self_->state;
  return st.driver.driving() ? st.driver.path().receive_buffers_held() : 0;
}

void actor_sink::deliver_local_mr(local_mr mr) {
  deliver_tagged_local_mr(std::move(mr), 0);
}

void actor_sink::deliver_remote_mr(const mr_token& token) {
  deliver_tagged_remote_mr(token, 0, 0);
}

void actor_sink::deliver_tagged_local_mr(local_mr mr, uint64_t tag) {
  self_->state.local_mrs.put(tagged<local_mr>{std::move(mr), tag});
}

void actor_sink::deliver_tagged_remote_mr(const mr_token& token, uint64_t tag,
                                          uint32_t lease_ms) {
  auto state = std::make_shared<remote_mr_state>(
      token, caf::actor_cast<caf::actor_addr>(self_));
  if (lease_ms != 0) {
    // Our end of the lease: before the lender's (see lease_margin_ms).
    auto end = self_->clock().now()
               + std::chrono::milliseconds{lease_ms
                                           - tuning::lease_margin_ms(lease_ms)};
    state->set_lease_end_ns(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            end.time_since_epoch())
            .count());
  }
  self_->state.remote_mrs.put(
      tagged<remote_mr>{remote_mr{std::move(state)}, tag});
}

void actor_sink::disconnect(const caf::error& reason) {
  // Maybe from inside the link's poll.
  shut_down_later(self_, reason);
}

void actor_sink::schedule_ack_flush() {
  // The runner flushes once we went through the worker's queue (see
  // flush_acks below): no message to ourselves.
  self_->state.runner_flags->tail.store(true, std::memory_order_relaxed);
}

void actor_sink::schedule_sweep() {
  arm_sweep(self_);
}

uint64_t actor_sink::queued_data_bytes() const {
  return self_->state.data.queued_bytes() + self_->state.imms.queued_bytes();
}

size_t actor_sink::queued_remote_mrs() const {
  return self_->state.remote_mrs.queued();
}

} // namespace rdmactor::agent_detail
