// Packed sends: a run of small sends nobody waits for, copied into one
// registered buffer and posted as one SEND (one receive and one credit of
// the peer's), for a peer that parses several frames in one message.  The
// rest of link is in link.cpp and link_receive.cpp.

#include <algorithm>
#include <cstring>

#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "transport/link.hpp"

namespace rdmactor::transport {

void link::pack_sends(size_t max_bytes, void (*mark_more)(uint8_t*)) {
  if (mark_more == nullptr || pack_bytes_ > 0 || pack_mem_)
    return; // on once (and off for good once its buffers failed)
  pack_bytes_ = std::min<size_t>(max_bytes, params_.max_message_len_bytes);
  mark_more_ = mark_more;
  // The queue's tail run is counted from now on.
  packable_tail_ = 0;
  packable_tail_bytes_ = 0;
}

bool link::packable(const queued_op& op) const noexcept {
  return pack_bytes_ > 0 && op.kind == op_kind::send && op.cookie == 0
         && !op.quiet && !op.imm && op.header.size() >= 4
         && op.header.size() + op.local.size() <= tuning::pack_frame_max_bytes
         && op.header.size() + op.local.size() <= pack_bytes_;
}

/// Keeps `packable_tail_` (the packable sends at the back of the queue,
/// back to back) true after a push to the back.
void link::count_queued_tail() {
  if (pack_bytes_ == 0)
    return;
  auto& op = queue_.back();
  if (packable(op)) {
    op.frame_bytes = op.header.size() + op.local.size();
    ++packable_tail_;
    packable_tail_bytes_ += op.frame_bytes;
  } else {
    packable_tail_ = 0;
    packable_tail_bytes_ = 0;
  }
}

/// While posts are held, a packable head that is the whole queue and
/// fills less than one packed message (bytes and frames) waits: more sends of
/// the same activation may join it (flush_posts and ring_held post it, packed
/// or alone).
bool link::head_waits_for_company() const noexcept {
  return posts_held_ && !flushing_ && packable_tail_ == queue_.size()
         && packable_tail_bytes_ < pack_bytes_
         && packable_tail_ < tuning::max_packed_frames && pack_buffer_free();
}

/// The head and the send behind it are packable and a buffer is free.
bool link::head_packs() const noexcept {
  return queue_.size() >= 2 && packable(queue_[0]) && packable(queue_[1])
         && pack_buffer_free();
}

/// A packed buffer is free, or none was made yet (the first pack makes
/// them).
bool link::pack_buffer_free() const noexcept {
  return !free_pack_slots_.empty() || !pack_mem_;
}

bool link::make_pack_buffers() {
  if (pack_mem_)
    return true;
  // Default-initialized: pages cost RSS only once written.
  pack_mem_.reset(new uint8_t[tuning::pack_buffers * pack_bytes_]);
  auto reg = dev_->register_memory(pack_mem_.get(),
                                   tuning::pack_buffers * pack_bytes_, 0);
  if (!reg) {
    log().warn("transport to {}: cannot register the buffers of packed "
               "sends ({}); every send goes alone",
               params_.peer, render(reg.error()));
    pack_bytes_ = 0;
    packable_tail_ = 0;
    packable_tail_bytes_ = 0;
    return false;
  }
  pack_reg_ = std::move(*reg);
  for (auto i = static_cast<int32_t>(tuning::pack_buffers); i > 0; --i)
    free_pack_slots_.push_back(i - 1);
  return true;
}

/// Posts the packable run at the head of the queue (at least two sends,
/// checked by the caller, as many as fit one buffer) as one signaled SEND;
/// every frame but the last is marked.  The caller checked the credit and
/// the send-queue entry.
void link::post_packed() {
  if (!make_pack_buffers())
    return; // packing is off now: try_post posts them one by one
  auto slot = free_pack_slots_.back();
  free_pack_slots_.pop_back();
  auto* base = pack_mem_.get() + size_t(slot) * pack_bytes_;
  size_t used = 0;
  size_t frames = 0;
  uint8_t* last = nullptr;
  while (!queue_.empty() && packable(queue_.front())
         && frames < tuning::max_packed_frames) {
    auto& op = queue_.front();
    auto n = op.header.size() + op.local.size();
    if (used + n > pack_bytes_)
      break;
    if (last != nullptr)
      mark_more_(last);
    last = base + used;
    std::memcpy(last, op.header.data(), op.header.size());
    if (op.local.size() > 0)
      std::memcpy(last + op.header.size(), op.local.data(), op.local.size());
    used += n;
    ++frames;
    if (spare_headers_.size() < tuning::spare_header_buffers) {
      op.header.clear(); // its bytes are in the buffer now
      spare_headers_.push_back(std::move(op.header));
    }
    pop_queued();
  }
  auto wr_id = next_wr_id_++;
  // Signaled: the buffer comes back with this completion, not with a
  // later one's.
  auto signaled = next_signaled(true);
  sge sg{reinterpret_cast<uint64_t>(base), static_cast<uint32_t>(used),
         pack_reg_->lkey()};
  // A failed post fails the connection: the credit is not needed back.
  if (auto err = qp_->post_send(wr_id, &sg, 1, credits_.take_for_send(false),
                                signaled)) {
    free_pack_slots_.push_back(slot);
    fail(std::move(err));
    return;
  }
  ++packed_messages_;
  packed_sends_ += frames;
  inflight_op op{wr_id, op_kind::send, used, local_mr{}, -1, uint64_t{0}};
  op.pack_slot = slot;
  inflight_.push_back(std::move(op));
  // The doorbell batch counts the frames: a long burst still reaches the
  // peer in pieces it can start on.
  if (posts_held_)
    held_posts_ += frames - 1;
  count_held_post();
}

} // namespace rdmactor::transport
