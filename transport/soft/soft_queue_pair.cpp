#include "transport/soft/soft_queue_pair.hpp"

#include <algorithm>
#include <array>
#include <cerrno>

#include <sys/socket.h>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "rdmactor/error.hpp"
#include "transport/soft/limits.hpp"
#include "transport/soft/soft_device.hpp"

namespace rdmactor::transport::soft {

// -- construction and destruction --------------------------------------------

soft_queue_pair::soft_queue_pair(std::shared_ptr<soft_device> dev,
                                 event_loop& loop, unique_fd sock, config cfg)
    : dev_(std::move(dev)), loop_(&loop), sock_(std::move(sock)),
      params_(cfg.params), peer_(std::move(cfg.peer)),
      rnr_timeout_(cfg.rnr_timeout), transport_timeout_(cfg.transport_timeout),
      owed_ack_limit_(std::clamp<uint32_t>(cfg.params.recv_depth / 4, 1,
                                           limits::max_owed_acks)),
      srq_(std::move(cfg.srq)), srq_waiter_(std::make_shared<srq_waiter>()),
      rx_(limits::rx_buffer_bytes), loop_id_(loop.thread_id()) {
  tx_.set_faults(cfg.faults);
  srq_waiter_->qp = this;
  note_progress(clock_type::now());
}

caf::expected<queue_pair_ptr>
soft_queue_pair::make(std::shared_ptr<soft_device> dev, event_loop& loop,
                      unique_fd sock, config cfg) {
  std::unique_ptr<soft_queue_pair> qp{new soft_queue_pair(
      std::move(dev), loop, std::move(sock), std::move(cfg))};
  if (auto err = loop.attach(qp.get(), qp->hook_, qp->sock_.get()))
    return err;
  return queue_pair_ptr{std::move(qp)};
}

soft_queue_pair::~soft_queue_pair() {
  {
    // The shared receive queue wakes nobody that is gone.
    std::lock_guard<std::mutex> guard{srq_waiter_->mtx};
    srq_waiter_->qp = nullptr;
  }
  {
    std::lock_guard<std::mutex> guard{mutex_};
    destroying_ = true;
    // The ACKs owed go out first, as on close() (at most the linger long).
    failure f{"queue pair destroyed", wc_status::work_request_flushed,
              std::nullopt, true};
    f.flush_answers = true;
    fail_locked(f);
  }
  wake();
  loop_->detach_wait(hook_);
}

// -- posting ------------------------------------------------------------------

bool soft_queue_pair::resolve_local(const sge* sg, size_t n, uint32_t needed,
                                    range_list& out) const {
  return soft::resolve_local(dev_->pd(), sg, n, needed, out);
}

caf::error soft_queue_pair::qp_error() const {
  return make_error(errc::qp_error, "the queue pair to " + peer_
                                        + " is in the error state; reconnect");
}

caf::error soft_queue_pair::post_request(uint64_t wr_id, wc_opcode opcode,
                                         bool signaled, const wire::header& h,
                                         bool local_ok,
                                         const range_list& payload,
                                         const range_list& read_into,
                                         const uint8_t* inline_bytes) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running)
    return qp_error();
  if (outstanding_.size() + unreaped_ >= limits::max_send_wr)
    return make_error(errc::quota_exceeded,
                      "send queue full: " + std::to_string(limits::max_send_wr)
                          + " work requests outstanding or unsignaled since "
                            "the last signaled completion; wait for "
                            "completions (signal a request now and then)");
  auto now = clock_type::now();
  if (outstanding_.empty() && tx_.empty()) {
    note_progress(now);
    if (unwatched_) {
      unwatched_ = false;
      wake(); // the loop runs the transport timer from now on
    }
  }
  outstanding_request req;
  req.wr_id = wr_id;
  req.opcode = opcode;
  req.signaled = signaled;
  req.byte_len = h.length;
  req.read_into = read_into;
  if (!local_ok) {
    req.local_error = wc_status::local_protection_error;
    sq_blocked_ = true;
  }
  outstanding_.push_back(std::move(req));
  if (sq_blocked_) {
    // Stays off the wire; flushed (or failed) when the error is reached.
    settle_front_locked();
    return {};
  }
  auto frame = h;
  frame.acks = take_owed_acks_locked();
  tx_.push(frame, payload, now, inline_bytes);
  if (doorbell_held_)
    return {}; // written with the rest at `ring_doorbell`
  pump_locked(now);
  if (!tx_.empty())
    wake();
  return {};
}

void soft_queue_pair::hold_doorbell() {
  std::lock_guard<std::mutex> guard{mutex_};
  doorbell_held_ = true;
}

caf::error soft_queue_pair::ring_doorbell() {
  // A write that fails moves the QP to the error state: the held work
  // completes with the failure, as everything posted does.
  std::lock_guard<std::mutex> guard{mutex_};
  if (!doorbell_held_)
    return {};
  doorbell_held_ = false;
  if (tx_.empty())
    return {};
  pump_locked(clock_type::now());
  if (!tx_.empty())
    wake();
  return {};
}

caf::error soft_queue_pair::post_recv(uint64_t wr_id, const sge* sg, size_t n) {
  if (auto err = check_sg(sg, n))
    return err;
  if (srq_)
    return make_error(errc::unsupported,
                      "the queue pair to " + peer_
                          + " takes its receives from a shared receive "
                            "queue; post them there");
  auto r = make_posted_recv(dev_->pd(), wr_id, sg, n);
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running)
    return qp_error();
  if (rq_.size() >= limits::max_recv_wr)
    return make_error(errc::quota_exceeded,
                      "receive queue full: "
                          + std::to_string(limits::max_recv_wr)
                          + " receives posted");
  rq_.push_back(std::move(r));
  if (!pending_.empty())
    drain_pending_locked(clock_type::now());
  else if (stalled_.load())
    wake();
  return {};
}

caf::error soft_queue_pair::post_send(uint64_t wr_id, const sge* sg, size_t n,
                                      std::optional<uint32_t> imm,
                                      bool signaled) {
  if (auto err = check_sg(sg, n))
    return err;
  auto total = total_of(sg, n);
  if (total > params_.max_message_len_bytes)
    return make_error(errc::invalid_argument,
                      "SEND of " + std::to_string(total)
                          + " bytes exceeds the negotiated max message length "
                            "of "
                          + std::to_string(params_.max_message_len_bytes)
                          + " bytes");
  range_list ranges;
  bool ok = resolve_local(sg, n, 0, ranges);
  wire::header h;
  h.type = wire::frame_type::send;
  h.length = static_cast<uint32_t>(total);
  h.has_imm = imm.has_value();
  h.imm = imm.value_or(0);
  return post_request(wr_id, wc_opcode::send, signaled, h, ok, ranges, {});
}

caf::error soft_queue_pair::post_write(uint64_t wr_id, const sge* sg, size_t n,
                                       uint64_t remote_addr, uint32_t rkey,
                                       std::optional<uint32_t> imm,
                                       bool signaled) {
  if (auto err = check_sg(sg, n))
    return err;
  auto total = total_of(sg, n);
  if (total > limits::max_rdma_bytes)
    return make_error(errc::invalid_argument,
                      "one RDMA WRITE moves at most 2 GiB");
  range_list ranges;
  bool ok = resolve_local(sg, n, 0, ranges);
  wire::header h;
  h.type = wire::frame_type::write;
  h.length = static_cast<uint32_t>(total);
  h.addr = remote_addr;
  h.rkey = rkey;
  h.has_imm = imm.has_value();
  h.imm = imm.value_or(0);
  return post_request(wr_id, wc_opcode::rdma_write, signaled, h, ok, ranges,
                      {});
}

caf::error soft_queue_pair::post_read(uint64_t wr_id, const sge* sg, size_t n,
                                      uint64_t remote_addr, uint32_t rkey) {
  if (auto err = check_sg(sg, n))
    return err;
  auto total = total_of(sg, n);
  if (total > limits::max_rdma_bytes)
    return make_error(errc::invalid_argument,
                      "one RDMA READ moves at most 2 GiB");
  range_list into;
  bool ok = resolve_local(sg, n, access::local_write, into);
  wire::header h;
  h.type = wire::frame_type::read;
  h.length = static_cast<uint32_t>(total);
  h.addr = remote_addr;
  h.rkey = rkey;
  return post_request(wr_id, wc_opcode::rdma_read, true, h, ok, {}, into);
}

caf::error soft_queue_pair::post_atomic(uint64_t wr_id, const sge& local,
                                        uint64_t remote_addr, uint32_t rkey,
                                        atomic_op op, uint64_t compare_add,
                                        uint64_t swap) {
  if (local.length != atomic_word_bytes)
    return make_error(errc::invalid_argument,
                      "an atomic's local buffer takes exactly 8 bytes, got "
                          + std::to_string(local.length));
  range_list into;
  bool ok = resolve_local(&local, 1, access::local_write, into);
  wire::header h;
  h.type = op == atomic_op::fetch_add ? wire::frame_type::fetch_add
                                      : wire::frame_type::compare_swap;
  h.length = atomic_word_bytes;
  h.addr = remote_addr;
  h.rkey = rkey;
  std::array<uint8_t, wire::atomic_operand_bytes> operands;
  wire::put_u64(operands.data(), compare_add);
  wire::put_u64(operands.data() + 8, swap);
  auto opcode = op == atomic_op::fetch_add ? wc_opcode::atomic_fetch_add
                                           : wc_opcode::atomic_comp_swap;
  return post_request(wr_id, opcode, true, h, ok, {}, into, operands.data());
}

// -- completion queue ---------------------------------------------------------

size_t soft_queue_pair::poll_cq(work_completion* out, size_t max) {
  if (out == nullptr)
    return 0;
  return cq_.poll(out, max);
}

caf::error soft_queue_pair::do_arm_cq(cq_events which) {
  cq_.arm(which);
  return {};
}

bool soft_queue_pair::ack_cq_event() {
  return cq_.ack();
}

bool soft_queue_pair::set_cq_notify(std::function<void()> fn) {
  cq_.set_notify(std::move(fn));
  return true;
}

void soft_queue_pair::close() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    failure f{"closed locally", wc_status::work_request_flushed, std::nullopt,
              true};
    f.flush_answers = true;
    fail_locked(f);
  }
  wake();
}

void soft_queue_pair::set_faults(const fault_plan& plan) {
  std::lock_guard<std::mutex> guard{mutex_};
  tx_.set_faults(plan);
  wake();
}

// -- with mutex_ held ------------------------------------------------------

void soft_queue_pair::complete_locked(const work_completion& wc) {
  if (cq_.push(wc))
    return;
  if (!cq_overrun_)
    log().error("soft QP to {}: completion queue overrun ({} entries): "
                "poll the CQ; the queue pair enters the error state",
                peer_, limits::max_cq_entries);
  cq_overrun_ = true;
  wake();
}

void soft_queue_pair::settle_front_locked() {
  if (phase_.load() != phase::running || outstanding_.empty()
      || !outstanding_.front().local_error)
    return;
  auto& front = outstanding_.front();
  fail_locked({"work request " + std::to_string(front.wr_id)
                   + " has a scatter/gather element that is not registered, "
                     "lies outside its registration or lacks the access flags",
               *front.local_error});
}

void soft_queue_pair::pump_locked(time_point now) {
  auto ph = phase_.load();
  if (ph == phase::closed || tx_.empty() || write_broken_deadline_)
    return;
  // The owner's held requests wait for its doorbell, unless an answer the
  // peer is owed is queued behind them (one stream: it takes them along).
  if (doorbell_held_ && ph == phase::running && tx_.responses() == 0)
    return;
  auto res = tx_.pump(sock_.get(), now);
  if (res.bytes > 0)
    note_progress(now);
  socket_writes_.fetch_add(res.writes, std::memory_order_relaxed);
  transmitted_ += res.requests_written;
  std::string why;
  switch (res.status) {
    case outbound_stream::pump_status::idle:
    case outbound_stream::pump_status::blocked:
    case outbound_stream::pump_status::delayed:
      return;
    case outbound_stream::pump_status::dropped:
      log().warn("soft QP to {}: fault injection drops the connection", peer_);
      ::shutdown(sock_.get(), SHUT_RDWR);
      why = "fault injection dropped the connection";
      break;
    case outbound_stream::pump_status::failed:
      if (ph == phase::running
          && (res.error == EPIPE || res.error == ECONNRESET)) {
        // The peer is gone, but what it sent before is still to be read
        // (and placed, as a NIC would have).  Read to the end first.
        write_broken_deadline_
            = now + std::chrono::milliseconds{limits::linger_ms};
        wake();
        return;
      }
      why = std::string{"sending to the peer failed: "}
            + std::strerror(res.error);
      break;
    case outbound_stream::pump_status::unregistered:
      why = "memory of a queued frame was deregistered before it was sent; "
            "keep a memory_region alive until its work completes";
      break;
  }
  if (ph == phase::running)
    fail_locked({why});
  else
    finish_locked();
}

void soft_queue_pair::respond_locked(wire::header h, const range_list& payload,
                                     time_point now,
                                     const uint8_t* inline_bytes) {
  // The ACKs owed go first: in the ACK itself, or ahead of another answer.
  if (h.type == wire::frame_type::ack)
    h.length += take_owed_acks_locked();
  else
    h.acks = take_owed_acks_locked();
  if (tx_.responses() >= limits::max_send_wr) {
    violation_locked("the peer keeps more than "
                     + std::to_string(limits::max_send_wr)
                     + " requests outstanding without reading our answers");
    return;
  }
  if (tx_.empty() && outstanding_.empty())
    note_progress(now);
  tx_.push(h, payload, now, inline_bytes);
  // The reader writes the answers to one batch of inbound frames at once.
  if (batching_thread_.load(std::memory_order_relaxed)
      == std::this_thread::get_id())
    return;
  pump_locked(now);
  if (!tx_.empty())
    wake();
}

void soft_queue_pair::owe_ack_locked(time_point now) {
  if (++owed_acks_ >= owed_ack_limit_) {
    flush_acks_locked(now);
    return;
  }
  if (owed_acks_ == 1) {
    ack_deadline_ = now + std::chrono::microseconds{limits::ack_delay_us};
    // The loop recomputes its timeout; a polling owner runs the timers
    // itself, and wakes the loop when it stops polling.
    if (std::this_thread::get_id() != loop_id_ && !polled_.load())
      wake();
  }
}

void soft_queue_pair::flush_acks_locked(time_point now) {
  if (owed_acks_ == 0)
    return;
  wire::header ack;
  ack.type = wire::frame_type::ack; // length: the owed ACKs, added below
  respond_locked(ack, {}, now);
}

uint8_t soft_queue_pair::take_owed_acks_locked() noexcept {
  auto n = static_cast<uint8_t>(owed_acks_);
  owed_acks_ = 0;
  ack_deadline_.reset();
  return n;
}

bool soft_queue_pair::on_acks_locked(uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) {
    if (transmitted_ == 0 || outstanding_.empty()) {
      violation_locked("an ACK arrived while no request was outstanding");
      return false;
    }
    auto& front = outstanding_.front();
    if (front.opcode == wc_opcode::rdma_read
        || front.opcode == wc_opcode::atomic_fetch_add
        || front.opcode == wc_opcode::atomic_comp_swap) {
      violation_locked("an ACK answered an RDMA READ or an atomic");
      return false;
    }
    auto done = std::move(front);
    outstanding_.pop_front();
    --transmitted_;
    if (done.signaled) {
      unreaped_ = 0;
      complete_locked(
          make_wc(done.wr_id, wc_status::success, done.opcode, done.byte_len));
    } else {
      ++unreaped_;
    }
    settle_front_locked();
    if (phase_.load() != phase::running)
      return false;
  }
  return true;
}

std::string soft_queue_pair::failure_reason() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return failure_reason_;
}

void soft_queue_pair::fail_locked(failure f) {
  if (phase_.load() != phase::running) {
    // Already failing: the destructor cuts a pending linger short.
    if (destroying_ && phase_.load() == phase::draining && tx_.empty())
      finish_locked();
    return;
  }
  {
    std::lock_guard<std::mutex> placement{placement_mutex_};
    phase_.store(phase::draining);
  }
  failure_reason_ = f.reason;
  // Once per connection a peer opens and drops: a shared budget.
  if (f.quiet)
    log().debug("soft QP to {}: error state: {}", peer_, f.reason);
  else
    log_within("connections", spdlog::level::info,
               "soft QP to " + peer_ + ": error state: " + f.reason);
  auto now = clock_type::now();
  bool answer = f.nak.has_value() || f.flush_answers;
  if (answer && owed_acks_ > 0) {
    // They precede the NAK; a local close owes them too.
    wire::header ack;
    ack.type = wire::frame_type::ack;
    ack.length = owed_acks_;
    tx_.push(ack, {}, now);
  }
  owed_acks_ = 0;
  ack_deadline_.reset();
  bool intact = tx_.abort(answer);
  bool nak_queued = false;
  if (f.nak && intact) {
    wire::header nak;
    nak.type = wire::frame_type::nak;
    nak.status = *f.nak;
    tx_.push(nak, {}, now);
    nak_queued = true;
  }
  bool front = true;
  for (auto& req : outstanding_) {
    complete_locked(make_wc(
        req.wr_id, front ? f.front_status : wc_status::work_request_flushed,
        req.opcode));
    front = false;
  }
  outstanding_.clear();
  unreaped_ = 0;
  transmitted_ = 0;
  sq_blocked_ = false;
  if (srq_) {
    srq_->give_back(rq_); // for the other queue pairs, as on hardware
    complete_locked(make_wc(srq_error_wr_id, wc_status::work_request_flushed,
                            wc_opcode::recv));
  } else {
    for (auto& r : rq_)
      complete_locked(
          make_wc(r.wr_id, wc_status::work_request_flushed, wc_opcode::recv));
    rq_.clear();
  }
  pending_.clear();
  pending_bytes_ = 0;
  rnr_deadline_.reset();
  stalled_.store(false);
  if (nak_queued || (f.flush_answers && intact && !tx_.empty())) {
    // The answers go out (the loop keeps writing until the stream is
    // empty or the linger ends), then the connection closes.
    linger_deadline_ = now + std::chrono::milliseconds{limits::linger_ms};
    pump_locked(now);
  } else {
    finish_locked();
  }
  wake();
}

void soft_queue_pair::violation_locked(const std::string& what) {
  // One line per connection (it closes), but peers open connections at
  // will: shares the budget of the connection lines
  // (actors/connection/agent.cpp).
  warn_within("connections", "soft QP to " + peer_ + ": protocol violation: "
                                 + what + "; closing the connection");
  fail_locked({"protocol violation: " + what});
}

void soft_queue_pair::finish_locked() {
  if (phase_.load() == phase::closed)
    return;
  {
    std::lock_guard<std::mutex> placement{placement_mutex_};
    phase_.store(phase::closed);
  }
  ::shutdown(sock_.get(), SHUT_RDWR);
  linger_deadline_.reset();
  tx_.abort(false);
  wake();
}

void soft_queue_pair::check_timers_locked(time_point now) {
  auto ph = phase_.load();
  if (ph == phase::draining) {
    if (linger_deadline_ && now >= *linger_deadline_)
      finish_locked();
    return;
  }
  if (ph != phase::running)
    return;
  if (cq_overrun_) {
    fail_locked({"completion queue overrun"});
    return;
  }
  if (write_broken_deadline_ && now >= *write_broken_deadline_) {
    fail_locked({"the peer reset the connection"});
    return;
  }
  if (rnr_deadline_ && now >= *rnr_deadline_) {
    // On a shared queue a wait is flow control while the queue moves (the
    // waiters take its receives in turn): the timer counts from the last
    // receive posted to it, so only a receiver that stopped fails us.
    auto moved = srq_ ? srq_->last_post() + rnr_timeout_ : now;
    if (moved > now) {
      rnr_deadline_ = moved;
    } else {
      fail_locked(
          {"receiver not ready: no receive posted "
               + std::string{srq_ ? "to the shared receive queue " : ""}
               + "within rnr_timeout_ms=" + std::to_string(rnr_timeout_.count())
               + "; the owner must post receives before the peer sends",
           wc_status::work_request_flushed, wc_status::rnr_retry_exceeded});
      return;
    }
  }
  if (ack_deadline_ && now >= *ack_deadline_)
    flush_acks_locked(now);
  if ((!outstanding_.empty() || !tx_.empty())
      && now - last_progress() >= transport_timeout_) {
    fail_locked({"transport retry exceeded: no progress from the peer for "
                     + std::to_string(transport_timeout_.count()) + " ms",
                 wc_status::transport_retry_exceeded});
  }
}

std::optional<time_point>
soft_queue_pair::next_deadline_locked(time_point now) {
  std::optional<time_point> next;
  auto consider = [&](time_point t) {
    if (!next || t < *next)
      next = t;
  };
  auto ph = phase_.load();
  if (ph == phase::running) {
    if (rnr_deadline_)
      consider(*rnr_deadline_);
    if (ack_deadline_)
      consider(*ack_deadline_);
    if (write_broken_deadline_)
      consider(*write_broken_deadline_);
    unwatched_ = false;
    if (!outstanding_.empty() || !tx_.empty()) {
      consider(last_progress() + transport_timeout_);
    } else if (now - last_progress() < transport_timeout_ / 2) {
      // Recently busy: a post may start the transport timer without
      // waking us, so look again in a while.
      consider(last_progress() + transport_timeout_ / 2);
    } else {
      unwatched_ = true; // idle: the next post wakes us (post_request)
    }
  } else if (ph == phase::draining && linger_deadline_) {
    consider(*linger_deadline_);
  }
  if (auto t = tx_.release_time(); t && *t > now)
    consider(*t);
  return next;
}

void soft_queue_pair::note_progress(time_point now) noexcept {
  last_progress_.store(now.time_since_epoch().count(),
                       std::memory_order_relaxed);
}

time_point soft_queue_pair::last_progress() const noexcept {
  return time_point{
      clock_type::duration{last_progress_.load(std::memory_order_relaxed)}};
}

} // namespace rdmactor::transport::soft
