// The responder's half of the soft queue pair: what it does with the
// requests the peer sent (a SEND into a posted receive, an RDMA WRITE or
// READ on a registration, an atomic), in order, behind receives that are
// not posted yet (RNR).  Runs with mutex_ held, on the event loop's
// thread.  The rest of soft_queue_pair is in soft_queue_pair.cpp and
// soft_queue_pair_loop.cpp.

#include <array>
#include <cstring>
#include <shared_mutex>

#include "transport/soft/soft_device.hpp"
#include "transport/soft/soft_queue_pair.hpp"

namespace rdmactor::transport::soft {

namespace {

/// Copies `src[0..n)` across `dst` under the registrations' locks; false
/// when a registration is gone.
bool scatter_copy(const range_list& dst, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < dst.size && n > 0; ++i) {
    auto& r = dst.items[i];
    auto k = std::min(n, r.len);
    std::shared_lock<std::shared_mutex> guard{r.reg->mtx};
    if (!r.reg->valid)
      return false;
    std::memcpy(r.ptr, src, k);
    src += k;
    n -= k;
  }
  return n == 0;
}

} // namespace

// -- with mutex_ held ------------------------------------------------------

bool soft_queue_pair::resolve_remote(const wire::header& h, uint32_t needed,
                                     range_list& out) const {
  out = range_list{};
  if (h.length == 0)
    return true; // InfiniBand checks no rkey for zero-length operations
  auto reg = dev_->pd().find_remote(h.rkey, h.addr, h.length, needed);
  if (!reg)
    return false;
  auto& r = out.items[0];
  auto offset = h.addr - reinterpret_cast<uintptr_t>(reg->base);
  r.ptr = reg->base + offset;
  r.len = h.length;
  r.reg = std::move(reg);
  out.size = 1;
  return true;
}

void soft_queue_pair::execute_read_locked(const wire::header& h,
                                          time_point now) {
  range_list source;
  if (!resolve_remote(h, access::remote_read, source)) {
    fail_locked(outside_registration(h));
    return;
  }
  wire::header resp;
  resp.type = wire::frame_type::read_response;
  resp.length = h.length;
  respond_locked(resp, source, now);
}

soft_queue_pair::failure
soft_queue_pair::outside_registration(const wire::header& h) {
  bool write = h.type == wire::frame_type::write;
  return {std::string{"inbound RDMA "} + (write ? "WRITE" : "READ") + " of "
              + std::to_string(h.length) + " bytes " + (write ? "to " : "from ")
              + std::to_string(h.addr) + " is outside any registration of rkey "
              + std::to_string(h.rkey) + " with "
              + (write ? "remote_write" : "remote_read"),
          wc_status::work_request_flushed, wc_status::remote_access_error};
}

bool soft_queue_pair::complete_write_imm_locked(const wire::header& h) {
  if (rq_.empty()) {
    violation_locked("internal: the receive in use disappeared");
    return false;
  }
  auto r = std::move(rq_.front());
  rq_.pop_front();
  complete_locked(make_wc(r.wr_id, wc_status::success,
                          wc_opcode::recv_rdma_with_imm, h.length, h.imm));
  return true;
}

void soft_queue_pair::drain_pending_locked(time_point now) {
  while (phase_.load() == phase::running && !pending_.empty()) {
    auto& head = pending_.front();
    if (consumes_receive(head.hdr) && !have_recv_locked()) {
      if (!rnr_deadline_) {
        rnr_deadline_ = now + rnr_timeout_;
        wake(); // the loop recomputes its timeout
      }
      return;
    }
    auto req = std::move(head);
    pending_.pop_front();
    pending_bytes_ -= wire::payload_bytes(req.hdr);
    rnr_deadline_.reset();
    execute_buffered_locked(req, now);
  }
  if (stalled_.load())
    wake();
}

bool soft_queue_pair::have_recv_locked() {
  if (!rq_.empty())
    return true;
  if (!srq_)
    return false;
  posted_recv r;
  if (!srq_->take(r, srq_waiter_))
    return false;
  rq_.push_back(std::move(r));
  return true;
}

bool soft_queue_pair::on_shared_receive() {
  std::lock_guard<std::mutex> guard{mutex_};
  if (phase_.load() != phase::running)
    return false;
  if (!pending_.empty()) {
    drain_pending_locked(clock_type::now());
    return true;
  }
  if (stalled_.load()) {
    wake(); // the loop takes it when it reads on
    return true;
  }
  return false;
}

void soft_queue_pair::execute_buffered_locked(inbound_request& req,
                                              time_point now) {
  auto& h = req.hdr;
  wire::header ack;
  ack.type = wire::frame_type::ack;
  ack.length = 1; // a WRITE's, plus the ACKs owed before it
  switch (h.type) {
    case wire::frame_type::send: {
      auto r = std::move(rq_.front());
      rq_.pop_front();
      if (!r.valid) {
        complete_locked(make_wc(r.wr_id, wc_status::local_protection_error,
                                wc_opcode::recv));
        fail_locked({"receive " + std::to_string(r.wr_id)
                         + " has an invalid scatter/gather element",
                     wc_status::work_request_flushed,
                     wc_status::remote_operation_error});
        return;
      }
      if (h.length > r.capacity) {
        complete_locked(
            make_wc(r.wr_id, wc_status::local_length_error, wc_opcode::recv));
        fail_locked({"inbound message of " + std::to_string(h.length)
                         + " bytes is larger than receive "
                         + std::to_string(r.wr_id) + " ("
                         + std::to_string(r.capacity) + " bytes)",
                     wc_status::work_request_flushed,
                     wc_status::remote_operation_error});
        return;
      }
      if (!scatter_copy(r.ranges, req.payload.data(), req.payload.size())) {
        complete_locked(make_wc(r.wr_id, wc_status::local_protection_error,
                                wc_opcode::recv));
        fail_locked({"receive buffer deregistered while posted",
                     wc_status::work_request_flushed,
                     wc_status::remote_operation_error});
        return;
      }
      auto imm = h.has_imm ? std::optional<uint32_t>{h.imm} : std::nullopt;
      complete_locked(
          make_wc(r.wr_id, wc_status::success, wc_opcode::recv, h.length, imm));
      owe_ack_locked(now);
      return;
    }
    case wire::frame_type::write: {
      range_list dst;
      if (!resolve_remote(h, access::remote_write, dst)) {
        fail_locked(outside_registration(h));
        return;
      }
      if (dst.size > 0
          && !scatter_copy(dst, req.payload.data(), req.payload.size())) {
        fail_locked({"RDMA WRITE target deregistered",
                     wc_status::work_request_flushed,
                     wc_status::remote_access_error});
        return;
      }
      if (h.has_imm && !complete_write_imm_locked(h))
        return;
      respond_locked(ack, {}, now);
      return;
    }
    case wire::frame_type::read:
      execute_read_locked(h, now);
      return;
    case wire::frame_type::fetch_add:
    case wire::frame_type::compare_swap:
      if (req.payload.size() != wire::atomic_operand_bytes) {
        violation_locked("internal: an atomic's operands are missing");
        return;
      }
      execute_atomic_locked(h, req.payload.data(), now);
      return;
    default:
      violation_locked("buffered a frame that is not a request");
      return;
  }
}

void soft_queue_pair::execute_atomic_locked(const wire::header& h,
                                            const uint8_t* operands,
                                            time_point now) {
  auto op = h.type == wire::frame_type::fetch_add ? atomic_op::fetch_add
                                                  : atomic_op::compare_swap;
  auto res = dev_->atomics().execute(dev_->pd(), op, h.rkey, h.addr,
                                     wire::get_u64(operands),
                                     wire::get_u64(operands + 8));
  if (res.status != wc_status::success) {
    fail_locked({std::string{"inbound atomic on "} + std::to_string(h.addr)
                     + " (rkey " + std::to_string(h.rkey)
                     + ") refused: " + res.why,
                 wc_status::work_request_flushed, res.status});
    return;
  }
  wire::header resp;
  resp.type = wire::frame_type::atomic_response;
  resp.length = wire::atomic_result_bytes;
  std::array<uint8_t, wire::atomic_result_bytes> old;
  wire::put_u64(old.data(), res.old_value);
  respond_locked(resp, {}, now, old.data());
}

} // namespace rdmactor::transport::soft
