// The loop thread of a soft queue pair: reads and executes inbound frames,
// writes what `post_*` left in the outbound stream, runs the timers.

#include "transport/soft/soft_queue_pair.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <shared_mutex>

#include <sys/epoll.h>
#include <sys/socket.h>

#include "common/logging.hpp"
#include "transport/soft/limits.hpp"
#include "transport/soft/soft_device.hpp"

namespace rdmactor::transport::soft {

namespace {

/// Frames or payload chunks the loop handles before it looks at its timers
/// and the outbound stream again.
constexpr int max_steps_per_wakeup = 256;

} // namespace

service_result soft_queue_pair::service(uint32_t revents) {
  service_result res;
  auto now = clock_type::now();
  // While the owner polls a running QP, it reads the socket (`progress`);
  // the loop reads only when the peer closed or the connection broke, or
  // when the owner made no progress for owner_stall_ms (its worker is held
  // elsewhere): then it reads and acknowledges, as a NIC would.
  constexpr uint32_t ended = EPOLLRDHUP | EPOLLHUP | EPOLLERR;
  const auto stall = std::chrono::milliseconds{limits::owner_stall_ms};
  auto owner_at = time_point{
      clock_type::duration{owner_progress_.load(std::memory_order_relaxed)}};
  bool owner_polls = polled_.load() && now - owner_at < stall;
  bool owner_reads = owner_polls && phase_.load() == phase::running
                     && (revents & ended) == 0;
  std::unique_lock<std::mutex> rx{rx_mutex_, std::defer_lock};
  if (!owner_reads) {
    rx.lock();
    if (stalled_.load() && phase_.load() == phase::running)
      decide_request(now);
  }
  // Frames already in the read buffer do not make the socket readable.
  bool rx_ready
      = !owner_reads && phase_.load() == phase::running && buffered_work();
  bool may_read = false;
  uint32_t events = 0;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    check_timers_locked(now);
    pump_locked(now);
    auto ph = phase_.load();
    if (ph == phase::closed) {
      res.done = true;
      return res;
    }
    if (ph == phase::draining) {
      if (write_broken_deadline_) {
        // Nothing more can go out: no reason to wait for the peer.
        finish_locked();
        res.done = true;
        return res;
      }
      if (tx_.empty()) {
        if (!write_shut_) {
          ::shutdown(sock_.get(), SHUT_WR);
          write_shut_ = true;
        }
        if (destroying_) {
          finish_locked();
          res.done = true;
          return res;
        }
      }
      may_read = true;
    } else {
      may_read = !stalled_.load();
    }
    if (may_read)
      events = ph == phase::running && owner_polls ? EPOLLRDHUP : EPOLLIN;
    if (tx_.blocked())
      events |= EPOLLOUT;
    loop_writes_ = (events & EPOLLOUT) != 0;
    res.deadline = next_deadline_locked(now);
    if (owner_polls && ph == phase::running
        && (!res.deadline || owner_at + stall < *res.deadline))
      res.deadline = owner_at + stall; // is the owner still there?
  }
  res.interest = events;
  if (!owner_reads && (rx_ready || (revents & (EPOLLIN | ended)))) {
    if (may_read) {
      // Answers to the frames of one read go out together, in one write,
      // when the loop services this queue pair again.
      read_batch();
      res.again = true;
    } else if (revents & (EPOLLHUP | EPOLLERR)) {
      // Not reading (stalled) and the connection is gone.
      std::lock_guard<std::mutex> guard{mutex_};
      fail_locked({"the connection to the peer broke"});
      res.again = true;
    }
  }
  return res;
}

void soft_queue_pair::set_polled(bool on) {
  if (on)
    owner_progress_.store(clock_type::now().time_since_epoch().count(),
                          std::memory_order_relaxed);
  if (polled_.exchange(on) == on || on)
    return;
  // The loop watches the socket again and recomputes its timers.
  wake();
}

void soft_queue_pair::progress() {
  if (!polled_.load())
    return;
  std::unique_lock<std::mutex> rx{rx_mutex_, std::try_to_lock};
  if (!rx.owns_lock())
    return; // the loop reads what a broken connection left
  auto now = clock_type::now();
  owner_progress_.store(now.time_since_epoch().count(),
                        std::memory_order_relaxed);
  if (phase_.load() == phase::running) {
    if (stalled_.load())
      decide_request(now);
    if (!stalled_.load()) {
      owner_frames_.fetch_add(read_batch(), std::memory_order_relaxed);
    }
  }
  rx.unlock();
  std::lock_guard<std::mutex> guard{mutex_};
  check_timers_locked(now);
  pump_locked(now);
  if (!tx_.empty() && !loop_writes_)
    wake(); // blocked: the loop writes the rest when the socket drains
}

uint32_t soft_queue_pair::read_batch() {
  auto seq = rx_seq_;
  rx_drained_ = false;
  batching_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  on_readable();
  batching_thread_.store(std::thread::id{}, std::memory_order_relaxed);
  return rx_seq_ - seq;
}

bool soft_queue_pair::buffered_work() const noexcept {
  switch (rx_phase_) {
    case rx_phase::header:
      return rx_.available() >= wire::header_size;
    case rx_phase::payload:
      return remaining_ == 0 || rx_.available() > 0;
    case rx_phase::stalled:
      return false;
  }
  return false;
}

void soft_queue_pair::on_readable() {
  for (int step = 0; step < max_steps_per_wakeup; ++step) {
    auto ph = phase_.load();
    if (ph == phase::closed)
      return;
    if (ph == phase::draining) {
      discard_input();
      return;
    }
    bool progress = false;
    switch (rx_phase_) {
      case rx_phase::header:
        progress = step_header();
        break;
      case rx_phase::payload:
        progress = step_payload();
        break;
      case rx_phase::stalled:
        return;
    }
    if (!progress)
      return;
  }
}

void soft_queue_pair::discard_input() {
  for (int step = 0; step < max_steps_per_wakeup; ++step) {
    rx_.consume(rx_.available());
    int err = 0;
    auto st = rx_.fill(sock_.get(), err);
    if (st == io_status::ok)
      continue;
    if (st == io_status::would_block)
      return;
    // The peer closed (it read our NAK) or the socket failed: done.
    std::lock_guard<std::mutex> guard{mutex_};
    finish_locked();
    return;
  }
}

bool soft_queue_pair::step_header() {
  if (rx_.available() < wire::header_size)
    return fill_rx();
  wire::header h;
  if (!wire::decode(rx_.data(), h)) {
    violation("malformed frame header (corrupted stream, or not an "
              "rdmactor peer)");
    return false;
  }
  rx_.consume(wire::header_size);
  if (h.seq != rx_seq_) {
    violation("frame " + std::to_string(h.seq) + " arrived where frame "
              + std::to_string(rx_seq_) + " was due");
    return false;
  }
  ++rx_seq_;
  on_frame(h);
  return true;
}

bool soft_queue_pair::step_payload() {
  if (remaining_ == 0) {
    finish_payload();
    return true;
  }
  if (rx_.available() > 0) {
    auto n
        = static_cast<size_t>(std::min<uint64_t>(remaining_, rx_.available()));
    deliver(rx_.data(), n);
    rx_.consume(n);
    return true;
  }
  if (remaining_ >= limits::direct_recv_bytes && action_ != rx_action::discard
      && action_ != rx_action::none)
    return recv_direct();
  return fill_rx();
}

/// Reads what the socket holds into the receive buffer: true when bytes
/// came (progress noted), false when it would block or ended (then
/// `on_socket_end` ran).
bool soft_queue_pair::fill_rx() {
  if (rx_drained_)
    return false; // this batch's last read emptied the socket
  int err = 0;
  auto asked = rx_.room();
  auto had = rx_.available();
  auto st = rx_.fill(sock_.get(), err);
  return read_done(st, err, asked, rx_.available() - had);
}

/// What one read that asked for `asked` bytes and got `got` means: bytes
/// (progress; fewer than asked: the socket had no more, the batch ends
/// there), nothing (counted), or the end of the connection.
bool soft_queue_pair::read_done(io_status st, int err, size_t asked,
                                size_t got) {
  if (st == io_status::ok) {
    rx_drained_ = got < asked;
    note_progress(clock_type::now());
    return true;
  }
  if (st == io_status::would_block)
    empty_reads_.fetch_add(1, std::memory_order_relaxed);
  else
    on_socket_end(st, err);
  return false;
}

bool soft_queue_pair::recv_direct() {
  if (rx_drained_)
    return false; // this batch's last read emptied the socket
  size_t got = 0;
  size_t asked = 0;
  int err = 0;
  auto st = io_status::ok;
  if (action_ == rx_action::buffer) {
    asked = static_cast<size_t>(remaining_);
    st = recv_some(sock_.get(), buffer_.data() + buffer_off_, asked, got, err);
    buffer_off_ += got;
    remaining_ -= got;
  } else {
    bool invalid = false;
    {
      std::lock_guard<std::mutex> placement{placement_mutex_};
      if (phase_.load() != phase::running) {
        action_ = rx_action::discard;
        return true;
      }
      if (target_idx_ >= target_.size) {
        invalid = true;
      } else {
        auto& r = target_.items[target_idx_];
        auto k = static_cast<size_t>(
            std::min<uint64_t>(remaining_, r.len - target_off_));
        std::shared_lock<std::shared_mutex> guard{r.reg->mtx};
        if (!r.reg->valid) {
          invalid = true;
        } else {
          asked = k;
          st = recv_some(sock_.get(), r.ptr + target_off_, k, got, err);
          advance(got);
        }
      }
    }
    if (invalid) {
      auto action = action_;
      action_ = rx_action::discard;
      on_target_invalid(action);
      return true;
    }
  }
  return read_done(st, err, asked, got);
}

void soft_queue_pair::deliver(const uint8_t* src, size_t n) {
  switch (action_) {
    case rx_action::buffer:
      std::memcpy(buffer_.data() + buffer_off_, src, n);
      buffer_off_ += n;
      remaining_ -= n;
      return;
    case rx_action::none:
    case rx_action::discard:
      remaining_ -= n;
      return;
    case rx_action::recv:
    case rx_action::write:
    case rx_action::read_response:
      break;
  }
  bool invalid = false;
  {
    std::lock_guard<std::mutex> placement{placement_mutex_};
    if (phase_.load() != phase::running) {
      action_ = rx_action::discard;
      remaining_ -= n;
      return;
    }
    while (n > 0) {
      if (target_idx_ >= target_.size) {
        invalid = true;
        break;
      }
      auto& r = target_.items[target_idx_];
      auto k = std::min(n, r.len - target_off_);
      {
        std::shared_lock<std::shared_mutex> guard{r.reg->mtx};
        if (!r.reg->valid) {
          invalid = true;
          break;
        }
        std::memcpy(r.ptr + target_off_, src, k);
      }
      advance(k);
      src += k;
      n -= k;
    }
  }
  if (invalid) {
    remaining_ -= n;
    auto action = action_;
    action_ = rx_action::discard;
    on_target_invalid(action);
  }
}

void soft_queue_pair::advance(size_t n) noexcept {
  remaining_ -= n;
  target_off_ += n;
  if (target_idx_ < target_.size
      && target_off_ == target_.items[target_idx_].len) {
    ++target_idx_;
    target_off_ = 0;
  }
}

void soft_queue_pair::on_frame(const wire::header& h) {
  cur_ = h;
  if (!wire::is_request(h.type)) {
    on_response(h);
    return;
  }
  if (h.acks > 0) {
    // The ACKs this request carries count before it.
    std::lock_guard<std::mutex> guard{mutex_};
    if (phase_.load() == phase::running && !on_acks_locked(h.acks))
      return;
  }
  if (h.type == wire::frame_type::send
      && h.length > params_.max_message_len_bytes) {
    violation("SEND of " + std::to_string(h.length)
              + " bytes exceeds the negotiated max message length of "
              + std::to_string(params_.max_message_len_bytes) + " bytes");
    return;
  }
  if (h.length > limits::max_rdma_bytes) {
    violation("RDMA operation of " + std::to_string(h.length)
              + " bytes exceeds 2 GiB");
    return;
  }
  decide_request(clock_type::now());
}

void soft_queue_pair::on_response(const wire::header& h) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running) {
    start_payload(rx_action::discard, wire::payload_bytes(h));
    return;
  }
  if (h.acks > 0 && !on_acks_locked(h.acks))
    return;
  if (transmitted_ == 0 || outstanding_.empty()) {
    violation_locked("a response arrived while no request was outstanding");
    return;
  }
  auto& front = outstanding_.front();
  switch (h.type) {
    case wire::frame_type::ack:
      on_acks_locked(h.length);
      return;
    case wire::frame_type::nak:
      fail_locked({std::string{"the peer answered work request "}
                       + std::to_string(front.wr_id) + " with "
                       + to_string(h.status),
                   h.status});
      return;
    case wire::frame_type::read_response:
    case wire::frame_type::atomic_response: {
      bool atomic = front.opcode == wc_opcode::atomic_fetch_add
                    || front.opcode == wc_opcode::atomic_comp_swap;
      bool fits = h.type == wire::frame_type::read_response
                      ? front.opcode == wc_opcode::rdma_read
                      : atomic;
      if (!fits || h.length != front.byte_len) {
        violation_locked("a READ or atomic response does not match the "
                         "oldest outstanding request");
        return;
      }
      target_ = front.read_into;
      target_idx_ = 0;
      target_off_ = 0;
      start_payload(rx_action::read_response, h.length);
      return;
    }
    default:
      violation_locked("unexpected frame type");
      return;
  }
}

void soft_queue_pair::decide_request(time_point now) {
  std::lock_guard<std::mutex> guard{mutex_};
  const auto& h = cur_;
  if (phase_.load() != phase::running) {
    stalled_.store(false);
    start_payload(rx_action::discard, wire::payload_bytes(h));
    return;
  }
  bool needs_recv = consumes_receive(h);
  uint64_t payload = wire::payload_bytes(h);
  // An atomic runs once its operands are read: through the buffer, which
  // executes it at once when nothing waits ahead of it.
  if (pending_.empty() && (!needs_recv || have_recv_locked())
      && !wire::is_atomic(h.type)) {
    stalled_.store(false);
    rnr_deadline_.reset();
    execute_inline_locked(now);
    return;
  }
  if (pending_.size() < limits::max_pending_requests
      && payload <= limits::pending_budget_bytes - pending_bytes_) {
    stalled_.store(false);
    if (pending_.empty() && !rnr_deadline_)
      rnr_deadline_ = now + rnr_timeout_;
    pending_bytes_ += payload;
    buffer_.assign(static_cast<size_t>(payload), 0);
    buffer_off_ = 0;
    start_payload(rx_action::buffer, payload);
    return;
  }
  // Backpressure: stop reading until a receive or the RNR timer comes.
  if (pending_.empty() && !rnr_deadline_)
    rnr_deadline_ = now + rnr_timeout_;
  stalled_.store(true);
  rx_phase_ = rx_phase::stalled;
}

void soft_queue_pair::execute_inline_locked(time_point now) {
  const auto& h = cur_;
  switch (h.type) {
    case wire::frame_type::send: {
      auto& r = rq_.front();
      if (!r.valid || h.length > r.capacity) {
        auto status = r.valid ? wc_status::local_length_error
                              : wc_status::local_protection_error;
        auto why = r.valid ? "inbound message of " + std::to_string(h.length)
                                 + " bytes is larger than receive "
                                 + std::to_string(r.wr_id) + " ("
                                 + std::to_string(r.capacity) + " bytes)"
                           : "receive " + std::to_string(r.wr_id)
                                 + " has an invalid scatter/gather element";
        complete_locked(make_wc(r.wr_id, status, wc_opcode::recv));
        rq_.pop_front();
        fail_locked({why, wc_status::work_request_flushed,
                     wc_status::remote_operation_error});
        start_payload(rx_action::discard, h.length);
        return;
      }
      target_ = r.ranges;
      target_idx_ = 0;
      target_off_ = 0;
      start_payload(rx_action::recv, h.length);
      return;
    }
    case wire::frame_type::write: {
      if (!resolve_remote(h, access::remote_write, target_)) {
        fail_locked(outside_registration(h));
        start_payload(rx_action::discard, h.length);
        return;
      }
      target_idx_ = 0;
      target_off_ = 0;
      start_payload(rx_action::write, h.length);
      return;
    }
    case wire::frame_type::read:
      rx_phase_ = rx_phase::header;
      execute_read_locked(h, now);
      return;
    default:
      violation_locked("a response was treated as a request");
      return;
  }
}

void soft_queue_pair::start_payload(rx_action action, uint64_t len) noexcept {
  action_ = action;
  remaining_ = len;
  rx_phase_ = rx_phase::payload; // a zero-length payload finishes at once
}

void soft_queue_pair::finish_payload() {
  auto action = action_;
  action_ = rx_action::none;
  rx_phase_ = rx_phase::header;
  target_ = range_list{};
  target_idx_ = 0;
  target_off_ = 0;
  const auto h = cur_;
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running) {
    buffer_ = {};
    return;
  }
  auto now = clock_type::now();
  wire::header ack;
  ack.type = wire::frame_type::ack;
  ack.length = 1; // a WRITE's, plus the ACKs owed before it
  switch (action) {
    case rx_action::recv: {
      if (rq_.empty()) {
        violation_locked("internal: the receive in use disappeared");
        return;
      }
      auto r = std::move(rq_.front());
      rq_.pop_front();
      auto imm = h.has_imm ? std::optional<uint32_t>{h.imm} : std::nullopt;
      complete_locked(
          make_wc(r.wr_id, wc_status::success, wc_opcode::recv, h.length, imm));
      owe_ack_locked(now);
      return;
    }
    case rx_action::write: {
      if (h.has_imm && !complete_write_imm_locked(h))
        return;
      respond_locked(ack, {}, now);
      return;
    }
    case rx_action::read_response: {
      if (outstanding_.empty() || transmitted_ == 0) {
        violation_locked("internal: the READ in progress disappeared");
        return;
      }
      auto done = std::move(outstanding_.front());
      outstanding_.pop_front();
      --transmitted_;
      unreaped_ = 0; // a READ or an atomic is always signaled
      complete_locked(
          make_wc(done.wr_id, wc_status::success, done.opcode, done.byte_len));
      settle_front_locked();
      return;
    }
    case rx_action::buffer:
      pending_.push_back(inbound_request{h, std::move(buffer_)});
      buffer_ = {};
      drain_pending_locked(now);
      return;
    case rx_action::none:
    case rx_action::discard:
      return;
  }
}

void soft_queue_pair::on_target_invalid(rx_action action) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running)
    return;
  switch (action) {
    case rx_action::recv:
      if (!rq_.empty()) {
        complete_locked(make_wc(rq_.front().wr_id,
                                wc_status::local_protection_error,
                                wc_opcode::recv));
        rq_.pop_front();
      }
      fail_locked({"a receive buffer was deregistered while a message "
                   "arrived in it",
                   wc_status::work_request_flushed,
                   wc_status::remote_operation_error});
      return;
    case rx_action::write:
      fail_locked({"the target of an inbound RDMA WRITE was deregistered "
                   "during the write",
                   wc_status::work_request_flushed,
                   wc_status::remote_access_error});
      return;
    case rx_action::read_response:
      fail_locked({"the destination of an RDMA READ or atomic was "
                   "deregistered while the data arrived",
                   wc_status::local_protection_error});
      return;
    default:
      return;
  }
}

void soft_queue_pair::on_socket_end(io_status st, int err) {
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running) {
    finish_locked();
    return;
  }
  if (st == io_status::eof) // how every connection ends: no news
    fail_locked({"the peer closed the connection",
                 wc_status::work_request_flushed, std::nullopt, true});
  else
    fail_locked({std::string{"the connection failed: "} + std::strerror(err)});
}

void soft_queue_pair::violation(const std::string& what) {
  std::lock_guard<std::mutex> guard{mutex_};
  violation_locked(what);
}

} // namespace rdmactor::transport::soft
