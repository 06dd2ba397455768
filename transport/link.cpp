#include "transport/link.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "rdmactor/error.hpp"
#include "transport/recv_pool.hpp"

namespace rdmactor::transport {

namespace {

static_assert(max_send_header_bytes % 64 == 0,
              "header slots stay cache-line aligned");

using detail::make_recv_pool;
using detail::recv_wr_bit;

} // namespace

const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::send:
      return "send";
    case op_kind::write:
      return "RDMA write";
    case op_kind::read:
      return "RDMA read";
    case op_kind::fetch_add:
      return "atomic fetch-and-add";
    case op_kind::compare_swap:
      return "atomic compare-and-swap";
  }
  return "operation";
}

// -- setup and teardown -------------------------------------------------------

link::link(device_ptr dev, std::shared_ptr<queue_pair> qp)
    : dev_(std::move(dev)), qp_(std::move(qp)) {
  const auto& cp = qp_->params();
  params_ = link_params_of(*qp_);
  credits_ = credit_ledger{cp.recv_depth};
  send_queue_depth_ = tuning::send_queue_depth(cp.recv_depth);
  signal_every_ = tuning::signal_every(send_queue_depth_);
  max_wr_bytes_ = std::max<uint64_t>(dev_->max_wr_bytes(), 4096);
}

caf::expected<std::unique_ptr<link>>
link::open(device_ptr dev, std::shared_ptr<queue_pair> qp) {
  auto pool = make_recv_pool(*dev, *qp);
  if (!pool)
    return std::move(pool.error());
  std::unique_ptr<link> result{new link(std::move(dev), std::move(qp))};
  auto& l = *result;
  l.pool_ = std::move(*pool);
  l.pool_->wake_at.store(tuning::credit_return_threshold(l.pool_->depth));
  // Header slots: the first chunk now (the rest as sends need them).
  if (auto err = l.add_header_slots())
    return err;
  return result;
}

caf::error link::open_atomics() {
  atomic_mem_.resize(send_queue_depth_);
  auto areg = dev_->register_memory(atomic_mem_.data(),
                                    atomic_mem_.size() * sizeof(uint64_t),
                                    access::local_write);
  if (!areg) {
    atomic_mem_ = {};
    return std::move(areg.error());
  }
  atomic_reg_ = std::move(*areg);
  free_atomic_slots_.reserve(send_queue_depth_);
  for (auto i = static_cast<int32_t>(send_queue_depth_); i > 0; --i)
    free_atomic_slots_.push_back(i - 1);
  return {};
}

link::~link() {
  if (!qp_)
    return;
  qp_->close();
  if (pool_ && pool_->shared) {
    // Receives the queue pair completed and nobody polled: their slots go
    // back to the shared queue (a queue pair's own receives die with it).
    work_completion wcs[32];
    while (auto n = qp_->poll_cq(wcs, 32))
      for (size_t i = 0; i < n; ++i)
        if ((wcs[i].wr_id & recv_wr_bit) != 0)
          recycle_shared(wcs[i].wr_id);
  }
}

caf::error link::add_header_slots() {
  auto n = std::min(tuning::header_slot_chunk,
                    send_queue_depth_ - header_slots_made_);
  if (n == 0)
    return make_error(errc::internal_error, "every header slot is made");
  header_chunk c;
  // A full chunk whatever n: slot i lives at i % chunk in chunk i / chunk.
  auto bytes = size_t{tuning::header_slot_chunk} * max_send_header_bytes;
  c.mem.reset(new uint8_t[bytes]);
  auto reg = dev_->register_memory(c.mem.get(), bytes, 0);
  if (!reg)
    return std::move(reg.error());
  c.reg = std::move(*reg);
  header_chunks_.push_back(std::move(c));
  for (auto i = header_slots_made_ + n; i > header_slots_made_; --i)
    free_header_slots_.push_back(static_cast<int32_t>(i - 1));
  header_slots_made_ += n;
  return {};
}

int32_t link::take_header_slot(caf::error& err) {
  if (free_header_slots_.empty()) {
    err = add_header_slots();
    if (err)
      return -1;
  }
  auto slot = free_header_slots_.back();
  free_header_slots_.pop_back();
  return slot;
}

void link::recycle_shared(uint64_t recv_wr_id) noexcept {
  auto slot = recv_wr_id & ~recv_wr_bit;
  if (pool_ && pool_->shared && slot < pool_->slots())
    pool_->shared->recycle(static_cast<uint32_t>(slot));
}

void link::set_wake(std::function<void()> fn) {
  pool_->wake = std::move(fn);
}

// -- posting ------------------------------------------------------------------

caf::error link::refusal(op_kind kind, const std::vector<uint8_t>& header,
                         const local_mr& local, const mr_token& remote,
                         bool with_imm) const {
  if (queue_.size() >= tuning::max_queued_ops)
    return make_error(errc::quota_exceeded,
                      "more than 2^20 operations wait for the connection to "
                          + params_.peer + "; wait for some to finish");
  auto limit = size_t{params_.max_message_len_bytes};
  if (is_atomic(kind)) {
    if (!atomic_reg_)
      return make_error(errc::unsupported,
                        "the device " + dev_->name() + " (" + dev_->kind()
                            + " fabric) has no atomic operations; use a "
                              "device whose atomic_cap is not "
                              "IBV_ATOMIC_NONE, or the soft fabric");
    if (remote.len != atomic_word_bytes)
      return make_error(errc::out_of_bounds,
                        std::string{to_string(kind)}
                            + " works on 8 bytes; the remote range has "
                            + std::to_string(remote.len));
    if (remote.addr % atomic_word_bytes != 0)
      return make_error(errc::misaligned,
                        std::string{to_string(kind)}
                            + " needs an 8-byte aligned remote address");
    return {};
  }
  if (kind == op_kind::send) {
    if (header.size() > max_send_header_bytes)
      return make_error(errc::invalid_argument,
                        "send header of " + std::to_string(header.size())
                            + " bytes exceeds max_send_header_bytes");
    if (header.size() + local.size() > limit)
      return make_error(
          errc::invalid_argument,
          "message of " + std::to_string(header.size() + local.size())
              + " bytes exceeds the negotiated max message length of "
              + std::to_string(limit) + " bytes; split it or raise "
              + "max-message-len-bytes on both sides");
    return {};
  }
  if (!local.valid() || local.size() != remote.len)
    return make_error(errc::length_mismatch,
                      std::string{to_string(kind)} + " of "
                          + std::to_string(local.size())
                          + " local bytes to a remote range of "
                          + std::to_string(remote.len) + " bytes");
  if (local.size() > (uint64_t{1} << 31))
    return make_error(errc::invalid_argument,
                      "one RDMA operation moves at most 2 GiB");
  if (with_imm && (kind != op_kind::write || local.size() > max_wr_bytes_))
    return make_error(errc::invalid_argument,
                      "a write with immediate data moves at most "
                          + std::to_string(max_wr_bytes_)
                          + " bytes (one work request on this device); "
                            "write the rest without one first");
  return {};
}

void link::answer(uint64_t cookie, caf::expected<uint64_t> result) {
  if (cookie != 0 && observer_ != nullptr)
    observer_->on_done(cookie, std::move(result));
}

void link::submit(op_kind kind, std::vector<uint8_t> header, local_mr local,
                  mr_token remote, uint64_t cookie, std::optional<uint32_t> imm,
                  bool quiet) {
  if (down_) {
    answer(cookie, failure_);
    return;
  }
  auto err = refusal(kind, header, local, remote, imm.has_value());
  bool post = kind == op_kind::send && cookie == 0;
  if (!err && post && queued_posts_ >= tuning::max_queued_posts)
    err = make_error(errc::quota_exceeded,
                     std::to_string(queued_posts_) + " messages wait for "
                         + "credits from " + params_.peer
                         + ": the peer returns too few credits for what we "
                           "send (it keeps sending requests while it takes "
                           "none of our replies); the connection ends");
  if (err) {
    if (cookie != 0) {
      answer(cookie, std::move(err));
      return;
    }
    // A peer can make a link refuse posts (by never taking what we send):
    // a shared budget.
    log_within("connections", spdlog::level::err,
               "transport to " + params_.peer
                   + ": refused a post: " + render(err));
    fail(std::move(err));
    return;
  }
  // Receives released since the owner last ran: a send carries their
  // credits.
  if (kind == op_kind::send)
    repost_released();
  queue_.push_back(
      queued_op{kind, std::move(header), std::move(local), remote, cookie});
  queue_.back().imm = imm;
  queue_.back().post = post;
  queue_.back().quiet = quiet && cookie == 0;
  if (post)
    ++queued_posts_;
  count_queued_tail();
  try_post();
  reclaim(); // what is owed changed: so does the wake-up threshold
}

/// Decides whether the operation about to be posted is signaled and counts
/// the run of unsignaled ones.  Signaling every `signal_every`-th keeps the
/// unsignaled entries far below the send-queue depth, so a completion that
/// frees them always comes.
bool link::next_signaled(bool must) {
  bool signaled = must || unsignaled_run_ + 1 >= signal_every_;
  unsignaled_run_ = signaled ? 0 : unsignaled_run_ + 1;
  return signaled;
}

/// True when the operation after the queue's head could be posted right
/// after the head (so the head need not be signaled).
bool link::next_can_follow() const {
  if (queue_.size() < 2 || inflight_.size() + 1 >= send_queue_depth_)
    return false;
  const auto& head = queue_[0];
  const auto& next = queue_[1];
  if (!next.consumes_recv())
    return true;
  if (!credits_.can_send_data(head.consumes_recv() ? 1 : 0))
    return false;
  auto slots_after
      = header_slots_available()
        - (head.kind == op_kind::send && !head.header.empty() ? 1 : 0);
  return next.kind != op_kind::send || next.header.empty() || slots_after > 0;
}

/// Posts the head of the queue while credits and send-queue entries last.
/// The last operation of a batch is signaled (its requester waits), the
/// ones before only every `signal_every`-th: one completion finishes every
/// operation posted before it.
/// Splits an RDMA WRITE or READ at the head that is larger than one work
/// request may be: its first `max_wr_bytes_` become an operation of their
/// own (nobody waits for it) ahead of the rest, which keeps the cookie.
/// The QP executes them in order, so the last piece's completion finishes
/// the whole operation.  Returns false when slicing failed (answered).
bool link::split_head() {
  auto& op = queue_.front();
  if (op.kind == op_kind::send || op.local.size() <= max_wr_bytes_ || op.imm)
    return true;
  auto first = op.local.slice(0, max_wr_bytes_);
  auto rest = op.local.slice(max_wr_bytes_, op.local.size() - max_wr_bytes_);
  if (!first || !rest) {
    auto cookie = op.cookie;
    pop_queued();
    answer(cookie, first ? std::move(rest.error()) : std::move(first.error()));
    return false;
  }
  queued_op piece{op.kind,
                  {},
                  std::move(*first),
                  mr_token{op.remote.addr, max_wr_bytes_, op.remote.rkey},
                  uint64_t{0}};
  op.local = std::move(*rest);
  op.remote.addr += max_wr_bytes_;
  op.remote.len -= max_wr_bytes_;
  op.posted_before += max_wr_bytes_;
  queue_.push_front(std::move(piece));
  return true;
}

std::vector<uint8_t> link::take_header_buffer() {
  if (spare_headers_.empty())
    return {};
  auto buf = std::move(spare_headers_.back());
  spare_headers_.pop_back();
  return buf;
}

/// Removes the head of the queue (posted, or answered with an error).
void link::pop_queued() {
  auto& op = queue_.front();
  if (op.post)
    --queued_posts_;
  if (queue_.size() == packable_tail_) { // the head is in the tail's run
    --packable_tail_;
    packable_tail_bytes_ -= op.frame_bytes;
  }
  queue_.pop_front();
}

void link::try_post() {
  while (!down_ && !queue_.empty() && inflight_.size() < send_queue_depth_) {
    if (!split_head())
      continue;
    if (pack_bytes_ > 0 && packable(queue_.front())) {
      if (head_waits_for_company())
        break;
      if (head_packs()) {
        // Keep one credit in reserve for credit-only messages.
        if (!credits_.can_send_data())
          break;
        post_packed();
        continue;
      }
    }
    auto& op = queue_.front();
    if (op.consumes_recv()) {
      // Keep one credit in reserve for credit-only messages.
      if (!credits_.can_send_data()
          || (op.kind == op_kind::send && !op.header.empty()
              && header_slots_available() == 0))
        break;
    }
    // Atomics need a slot for their old value; one per send-queue entry,
    // so there always is one here.
    if (is_atomic(op.kind) && free_atomic_slots_.empty())
      break;
    auto signaled = next_signaled(op.kind == op_kind::read || is_atomic(op.kind)
                                  || !next_can_follow());
    auto wr_id = next_wr_id_++;
    sge sg[2];
    size_t n = 0;
    int32_t slot = -1;
    int32_t atomic_slot = -1;
    caf::error err;
    if (is_atomic(op.kind)) {
      atomic_slot = free_atomic_slots_.back();
      free_atomic_slots_.pop_back();
      auto* dst = atomic_mem_.data() + atomic_slot;
      *dst = 0;
      sge local{reinterpret_cast<uint64_t>(dst), atomic_word_bytes,
                atomic_reg_->lkey()};
      err = qp_->post_atomic(wr_id, local, op.remote.addr, op.remote.rkey,
                             op.kind == op_kind::fetch_add
                                 ? atomic_op::fetch_add
                                 : atomic_op::compare_swap,
                             op.compare_add, op.swap);
    } else if (op.kind == op_kind::send) {
      if (!op.header.empty()) {
        slot = take_header_slot(err);
        if (slot >= 0) {
          auto* dst = header_slot_ptr(slot);
          std::memcpy(dst, op.header.data(), op.header.size());
          sg[n++] = sge{reinterpret_cast<uint64_t>(dst),
                        static_cast<uint32_t>(op.header.size()),
                        header_slot_lkey(slot)};
        }
      }
      if (op.local.size() > 0)
        sg[n++] = op.local.to_sge();
      // A failed post fails the connection: the credit is not needed back.
      if (!err)
        err = qp_->post_send(wr_id, sg, n, credits_.take_for_send(false),
                             signaled);
    } else {
      sg[n++] = op.local.to_sge();
      if (op.kind == op_kind::write && op.imm) {
        // A failed post fails the connection: the credit is not needed back.
        credits_.take_for_write_imm();
        err = qp_->post_write(wr_id, sg, n, op.remote.addr, op.remote.rkey,
                              op.imm, signaled);
      } else if (op.kind == op_kind::write)
        err = qp_->post_write(wr_id, sg, n, op.remote.addr, op.remote.rkey,
                              std::nullopt, signaled);
      else
        err = qp_->post_read(wr_id, sg, n, op.remote.addr, op.remote.rkey);
    }
    if (err) {
      if (slot >= 0)
        free_header_slots_.push_back(slot);
      if (atomic_slot >= 0)
        free_atomic_slots_.push_back(atomic_slot);
      auto cookie = op.cookie;
      pop_queued();
      answer(cookie, err);
      fail(std::move(err));
      return;
    }
    uint64_t bytes = op.posted_before + op.local.size() + op.header.size();
    if (slot >= 0 && spare_headers_.size() < tuning::spare_header_buffers) {
      op.header.clear(); // its bytes are in the slot now
      spare_headers_.push_back(std::move(op.header));
    }
    if (op.cookie != 0)
      ++waited_;
    if (op.quiet)
      ++quiet_in_flight_;
    inflight_.push_back(inflight_op{wr_id, op.kind, bytes, std::move(op.local),
                                    slot, op.cookie, atomic_slot, op.quiet});
    pop_queued();
    count_held_post();
  }
}

void link::count_held_post() {
  if (posts_held_ && ++held_posts_ >= tuning::doorbell_batch)
    ring_doorbell_held();
}

void link::ring_held() {
  if (!posts_held_)
    return;
  // The sends held back for packing go first.
  flushing_ = true;
  try_post();
  flushing_ = false;
  ring_doorbell_held();
}

void link::ring_doorbell_held() {
  if (!posts_held_ || down_)
    return;
  held_posts_ = 0;
  if (auto err = qp_->ring_doorbell()) {
    fail(std::move(err));
    return;
  }
  qp_->hold_doorbell();
}

/// Sends a credit-only message when enough receives were reposted since
/// the last report and nothing else is going to carry them.  Called after
/// every event that can make it true: a buffer reposted, a send completed,
/// credits arrived (a side that owed credits but had no credit to send them
/// with must report them once the peer's credits arrive, even with nothing
/// of its own queued: the peer may be waiting for exactly these).  The
/// message is unsignaled unless it ends a run of `signal_every`.
void link::maybe_return_credits() {
  if (down_)
    return;
  // A queued send will carry the credits as soon as it can go.
  bool carried = !queue_.empty() && queue_.front().kind == op_kind::send
                 && credits_.can_send_data();
  if (!credits_.credit_only_due(carried, inflight_.size() >= send_queue_depth_))
    return;
  auto imm = credits_.take_for_send(true);
  auto wr_id = next_wr_id_++;
  auto signaled = next_signaled(false);
  if (auto err = qp_->post_send(wr_id, nullptr, 0, imm, signaled)) {
    fail(std::move(err));
    return;
  }
  // Upkeep: its completion is quiet (see `mark_quiet`).
  ++quiet_in_flight_;
  inflight_.push_back(inflight_op{wr_id, op_kind::send, 0, local_mr{}, -1,
                                  uint64_t{0}, -1, true});
  count_held_post();
}

void link::submit_atomic(op_kind kind, mr_token remote, uint64_t compare_add,
                         uint64_t swap, uint64_t cookie) {
  if (down_) {
    answer(cookie, failure_);
    return;
  }
  if (!is_atomic(kind)) {
    answer(cookie, make_error(errc::internal_error,
                              "submit_atomic with a kind that is no atomic"));
    return;
  }
  // Old values of atomics: registered with the first atomic, where the
  // device has atomics (most connections never use them).
  if (!atomic_reg_ && dev_->supports_atomics()) {
    if (auto err = open_atomics()) {
      answer(cookie, std::move(err));
      return;
    }
  }
  if (auto err = refusal(kind, {}, local_mr{}, remote, false)) {
    answer(cookie, std::move(err));
    return;
  }
  queued_op op{kind, {}, local_mr{}, remote, cookie};
  op.compare_add = compare_add;
  op.swap = swap;
  queue_.push_back(std::move(op));
  try_post();
  reclaim();
}

// -- completions --------------------------------------------------------------

/// Finishes one posted operation with `status`.
void link::finish(inflight_op& op, wc_status status) {
  if (op.cookie != 0)
    --waited_;
  if (op.quiet)
    --quiet_in_flight_;
  if (op.header_slot >= 0)
    free_header_slots_.push_back(op.header_slot);
  if (op.pack_slot >= 0)
    free_pack_slots_.push_back(op.pack_slot);
  uint64_t old_value = 0;
  if (op.atomic_slot >= 0) {
    old_value = atomic_mem_[static_cast<size_t>(op.atomic_slot)];
    free_atomic_slots_.push_back(op.atomic_slot);
  }
  if (status != wc_status::success) {
    auto what = std::string{to_string(op.kind)} + " to " + params_.peer
                + " completed with " + to_string(status);
    if (is_atomic(op.kind) && status == wc_status::remote_access_error)
      what += ": the peer refused the word (unknown rkey, outside the "
              "region, or a region without remote-atomic access: the peer "
              "must register it with access::remote_atomic); the "
              "connection fails with it, as on verbs";
    else if (is_atomic(op.kind) && status == wc_status::remote_operation_error)
      what += ": the peer refused the request (a misaligned word?)";
    else if (status == wc_status::remote_access_error)
      what += op.kind == op_kind::read
                  ? " (the peer's region lacks remote-read access, or the "
                    "token is stale or out of its bounds)"
                  : " (the peer's region lacks remote-write access: lent "
                    "read-only?  Or the token is stale or out of its "
                    "bounds); the connection ends, as on any reliable "
                    "connection";
    auto err = make_error(to_errc(status), std::move(what));
    answer(op.cookie, err);
    fail(std::move(err));
    return;
  }
  answer(op.cookie, is_atomic(op.kind) ? old_value : op.bytes);
}

void link::on_completion(const work_completion& wc) {
  if (wc.wr_id & recv_wr_bit) {
    if (wc.status != wc_status::success) {
      // A shared slot a failed receive consumed goes back to the others.
      recycle_shared(wc.wr_id);
      // A flushed receive says only that the connection is in error: the
      // fabric may know why (the peer closed it, a reset, a timeout).
      auto why = qp_->failure_reason();
      fail(make_error(to_errc(wc.status),
                      std::string{"receive completed with "}
                          + to_string(wc.status) + " on the connection to "
                          + params_.peer
                          + (why.empty() ? std::string{} : " (" + why + ")")));
      return;
    }
    on_recv(wc);
    return;
  }
  if (down_)
    return; // answered already (failure path)
  // wr_ids are handed out in posting order without gaps while the
  // connection is up, so one in the deque's range is in the deque.
  if (inflight_.empty() || wc.wr_id < inflight_.front().wr_id
      || wc.wr_id > inflight_.back().wr_id)
    return;
  // Completions come in posting order: every unsignaled operation posted
  // before this one finished successfully.
  while (inflight_.front().wr_id != wc.wr_id) {
    auto op = std::move(inflight_.front());
    inflight_.pop_front();
    finish(op, wc_status::success);
  }
  auto op = std::move(inflight_.front());
  inflight_.pop_front();
  if (op.quiet && wc.status == wc_status::success)
    mark_quiet();
  finish(op, wc.status);
  if (down_)
    return;
  try_post();
  maybe_return_credits();
}

void link::hold_posts() {
  if (posts_held_)
    return;
  posts_held_ = true;
  held_posts_ = 0;
  qp_->hold_doorbell();
}

void link::flush_posts() {
  if (!posts_held_)
    return;
  posts_held_ = false;
  try_post(); // the sends held back for packing
  if (auto err = qp_->ring_doorbell())
    fail(std::move(err));
}

size_t link::poll() {
  // What the completions make us post (READs of rendezvous headers, sends
  // the credits they return let go) leaves in one doorbell.
  bool own_batch = !posts_held_;
  hold_posts();
  auto total = poll_held();
  if (own_batch)
    flush_posts();
  return total;
}

size_t link::poll_held() {
  // Not from inside a poll: the nested one would take completions from the
  // CQ (and, paused, hold them) while the running one still works through
  // its own batch, and a pause of either would drop what the other held.
  if (polling_) {
    repoll_ = true;
    return 0;
  }
  polling_ = true;
  quiet_ = 0;
  work_completion wcs[tuning::cq_batch];
  size_t total = 0;
  paused_ = false;
  // What a paused poll left, first (completions come in order).
  while (held_pos_ < held_.size() && !down_ && !paused_) {
    ++total;
    on_completion(held_[held_pos_++]);
  }
  if (held_pos_ >= held_.size()) {
    held_.clear();
    held_pos_ = 0;
  }
  if (polled_ && !down_ && !paused_)
    qp_->progress();
  while (!down_ && !paused_) {
    auto n = qp_->poll_cq(wcs, tuning::cq_batch);
    for (size_t i = 0; i < n && !down_; ++i) {
      ++total;
      on_completion(wcs[i]);
      if (paused_) {
        // The rest waits here (counted when handled).
        held_.assign(wcs + i + 1, wcs + n);
        held_pos_ = 0;
        break;
      }
    }
    if (n < tuning::cq_batch && !std::exchange(repoll_, false))
      break;
  }
  polling_ = false;
  repoll_ = false;
  // Completions change what is owed (a credit-only message reposts at
  // once): the wake-up threshold follows.
  if (total > 0 && !down_)
    reclaim();
  return total - std::min(quiet_, total);
}

void link::set_polled(bool on) {
  if (polled_ == on)
    return;
  polled_ = on;
  qp_->set_polled(on);
}

void link::arm() {
  if (down_)
    return;
  auto want
      = waited_ > 0 || !queue_.empty() ? armed_for::all : armed_for::receives;
  if (armed_ == armed_for::all || armed_ == want)
    return;
  auto which = want == armed_for::all ? cq_events::all : cq_events::receives;
  if (auto err = qp_->arm_cq(which)) {
    fail(std::move(err));
    return;
  }
  armed_ = want;
}

void link::fail(caf::error cause) {
  if (down_)
    return;
  down_ = true;
  failure_ = cause;
  // A close on purpose (ours, the peer's Goodbye, or the end of our own
  // graceful close) is no failure worth a warning.
  if (closing_ || code_of(cause) == errc::closed
      || code_of(cause) == errc::peer_closed
      || cause.category() == caf::atom("exit"))
    log().debug("transport to {}: closed ({})", params_.peer, render(cause));
  else // peers open and drop connections at will: a shared budget
    warn_within("connections", "transport to " + params_.peer
                                   + ": connection down: " + render(cause));
  auto flushed = make_error(errc::work_request_flushed,
                            "operation aborted: the connection to "
                                + params_.peer + " failed: " + render(cause));
  // Answer now; the entries (and the memory they keep registered) stay
  // until the QP is closed with the link.
  for (auto& op : inflight_) {
    answer(op.cookie, flushed);
    op.cookie = 0;
  }
  waited_ = 0;
  auto queue = std::move(queue_);
  queue_.clear();
  queued_posts_ = 0;
  packable_tail_ = 0;
  packable_tail_bytes_ = 0;
  for (auto& op : queue)
    answer(op.cookie, flushed);
  if (observer_ != nullptr)
    observer_->on_down(cause);
}

} // namespace rdmactor::transport
