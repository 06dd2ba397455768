#include "transport/verbs/verbs_queue_pair.hpp"

#include <algorithm>
#include <cerrno>

#include <arpa/inet.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "rdmactor/error.hpp"
#include "transport/verbs/cm.hpp"
#include "transport/verbs/verbs_device.hpp"
#include "transport/verbs/verbs_srq.hpp"

namespace rdmactor::transport::verbs {

namespace {

/// Inline data we ask the QP for; small sends and writes skip the DMA read.
constexpr uint32_t wanted_inline_bytes = 128;

/// Send-queue slots beyond the receive depth (writes and reads).
constexpr uint32_t extra_send_slots = 64;

/// Receive-CQ entries beyond the receive depth of a queue pair on a shared
/// receive queue (see `init`).
constexpr uint32_t srq_cq_headroom = 64;

/// Completions taken from a CQ per ibv_poll_cq call.
constexpr int poll_batch = 16;

wc_status map_status(ibv_wc_status x) noexcept {
  switch (x) {
    case IBV_WC_SUCCESS:
      return wc_status::success;
    case IBV_WC_LOC_LEN_ERR:
      return wc_status::local_length_error;
    case IBV_WC_LOC_PROT_ERR:
      return wc_status::local_protection_error;
    case IBV_WC_REM_ACCESS_ERR:
      return wc_status::remote_access_error;
    case IBV_WC_REM_OP_ERR:
      return wc_status::remote_operation_error;
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return wc_status::rnr_retry_exceeded;
    case IBV_WC_RETRY_EXC_ERR:
      return wc_status::transport_retry_exceeded;
    case IBV_WC_WR_FLUSH_ERR:
      return wc_status::work_request_flushed;
    default:
      return wc_status::general_error;
  }
}

uint64_t total_length(const sge* sg, size_t n) noexcept {
  uint64_t sum = 0;
  for (size_t i = 0; i < n; ++i)
    sum += sg[i].length;
  return sum;
}

} // namespace

int to_ibv_sges(const sge* sg, size_t n, ibv_sge* out) noexcept {
  int count = 0;
  for (size_t i = 0; i < n; ++i)
    if (sg[i].length > 0)
      out[count++] = ibv_sge{sg[i].addr, sg[i].length, sg[i].lkey};
  return count;
}

verbs_queue_pair::verbs_queue_pair(std::shared_ptr<verbs_device> dev,
                                   cm_id_ptr id)
    : dev_(std::move(dev)), id_(std::move(id)) {}

verbs_queue_pair::~verbs_queue_pair() {
  if (qp_)
    close();
  if (registered_)
    dev_->remove(this);
  // On the completion engine's thread (inside a notify function), the last
  // reference to the device must not go here: its destructor joins that
  // thread.  Release everything but the device first, in the order of
  // members (the shared receive queue holds the device too), then let the
  // engine release the device.
  if (dev_->engine().on_engine_thread()) {
    qp_.reset();
    srq_.reset();
    recv_cq_.reset();
    send_cq_.reset();
    notify_.reset();
    cq_event_fd_.reset();
    id_.reset();
    auto& engine = dev_->engine();
    engine.release(std::move(dev_));
  }
  // Members release the QP, shared receive queue, CQs, notify registration,
  // eventfd, cm id and device reference in reverse order of acquisition.
}

// -- set-up --------------------------------------------------------------

caf::error verbs_queue_pair::init(const conn_params& offer) {
  auto& attr = dev_->attr();
  auto fail = [&](const std::string& what, int err) {
    return make_error(errc::connect_failed,
                      what + " failed: " + errno_text(err));
  };
  // Everything lives on the device's own context (the PD's); check_id made
  // sure that rdma_cm resolved the peer to that same device and port.
  auto ctx = dev_->context();
  // Notifications: the eventfd behind cq_fd(), then the registration that
  // signals it (replaced by set_cq_notify), then the CQs that name it.
  cq_event_fd_ = unique_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (!cq_event_fd_)
    return fail("eventfd", errno);
  notify_ = dev_->engine().add([fd = cq_event_fd_.get()] {
    uint64_t one = 1;
    // EAGAIN only when the counter is full: readable anyway.
    if (::write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
      log().error("verbs: cannot signal a CQ eventfd: {}", errno_text(errno));
  });
  auto channel = dev_->engine().channel();
  auto send_depth = std::min<uint32_t>({offer.recv_depth * 2 + extra_send_slots,
                                        static_cast<uint32_t>(attr.max_qp_wr),
                                        static_cast<uint32_t>(attr.max_cqe)});
  auto recv_depth = offer.recv_depth; // checked against the limits
  // With a shared receive queue, a peer that ignores its credits is not
  // stopped by a receive queue of recv_depth: its receive CQ gets room to
  // spare (the link ends such a peer at its first receive past the grant;
  // a CQ that overflows first ends it too, with a CQ error).
  auto recv_cq_depth = recv_depth;
  if (auto shared = dev_->srq();
      shared && offer.max_message_len_bytes <= shared->receive_bytes())
    recv_cq_depth = std::min<uint32_t>(
        std::max(2 * recv_depth, recv_depth + srq_cq_headroom),
        static_cast<uint32_t>(attr.max_cqe));
  send_cq_.reset(ibv_create_cq(ctx, static_cast<int>(send_depth),
                               notify_.cq_context(), channel, 0));
  if (!send_cq_)
    return fail("ibv_create_cq (send, " + std::to_string(send_depth) + ")",
                errno);
  recv_cq_.reset(ibv_create_cq(ctx, static_cast<int>(recv_cq_depth),
                               notify_.cq_context(), channel, 0));
  if (!recv_cq_)
    return fail("ibv_create_cq (receive, " + std::to_string(recv_cq_depth)
                    + ")",
                errno);
  // Receives from the device's shared receive queue, if it shares one:
  // then the QP has no receive queue (the receive CQ still takes the
  // completions; credits bound them to recv_depth as before).
  if (auto shared = dev_->srq();
      shared && offer.max_message_len_bytes <= shared->receive_bytes()) {
    srq_ = std::dynamic_pointer_cast<verbs_srq>(shared);
    if (!srq_ || !srq_->made_by(dev_.get()))
      return make_error(errc::invalid_argument,
                        "the shared receive queue that " + dev_->name()
                            + " shares was made by another device; share "
                              "one that this device's create_srq made");
  }
  ibv_qp_init_attr init{};
  init.send_cq = send_cq_.get();
  init.recv_cq = recv_cq_.get();
  init.srq = srq_ ? srq_->get() : nullptr;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = send_depth;
  init.cap.max_recv_wr = srq_ ? 0 : recv_depth;
  init.cap.max_send_sge = static_cast<uint32_t>(max_sge);
  init.cap.max_recv_sge = srq_ ? 0 : static_cast<uint32_t>(max_sge);
  init.cap.max_inline_data = wanted_inline_bytes;
  qp_.reset(ibv_create_qp(dev_->pd(), &init));
  if (!qp_) {
    // Some devices support no inline data: retry without.
    init.cap.max_inline_data = 0;
    qp_.reset(ibv_create_qp(dev_->pd(), &init));
  }
  if (!qp_)
    return fail("ibv_create_qp (send " + std::to_string(send_depth)
                    + (srq_ ? std::string{", shared receive queue"}
                            : ", receive " + std::to_string(recv_depth))
                    + ")",
                errno);
  max_inline_ = init.cap.max_inline_data;
  send_depth_ = send_depth;
  // INIT: port and P_Key from rdma_cm, access rights ours.
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_INIT;
  if (rdma_init_qp_attr(id_.get(), &qa, &mask) != 0)
    return fail("rdma_init_qp_attr (INIT)", errno);
  qa.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
                       | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
  mask |= IBV_QP_ACCESS_FLAGS;
  if (auto rc = ibv_modify_qp(qp_.get(), &qa, mask))
    return fail("ibv_modify_qp (INIT)", rc);
  return {};
}

caf::error verbs_queue_pair::ready(uint8_t responder_resources,
                                   uint8_t initiator_depth) {
  auto& opts = dev_->opts();
  auto fail = [&](const std::string& what, int err) {
    return make_error(errc::connect_failed,
                      what + " failed: " + errno_text(err));
  };
  // RTR: path from rdma_cm; MTU, GID, RNR timer and read depth ours.
  ibv_qp_attr qa{};
  int mask = 0;
  qa.qp_state = IBV_QPS_RTR;
  if (rdma_init_qp_attr(id_.get(), &qa, &mask) != 0)
    return fail("rdma_init_qp_attr (RTR)", errno);
  qa.path_mtu = std::min(qa.path_mtu, dev_->mtu());
  if (qa.ah_attr.is_global)
    qa.ah_attr.grh.sgid_index = dev_->sgid_index(qa.ah_attr.grh.sgid_index);
  qa.min_rnr_timer = dev_->min_rnr_timer();
  qa.max_dest_rd_atomic = std::min({qa.max_dest_rd_atomic, responder_resources,
                                    dev_->max_responder_resources()});
  mask |= IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER | IBV_QP_MAX_DEST_RD_ATOMIC;
  if (auto rc = ibv_modify_qp(qp_.get(), &qa, mask))
    return fail("ibv_modify_qp (RTR)", rc);
  // RTS: timeouts and retries ours.
  qa = ibv_qp_attr{};
  mask = 0;
  qa.qp_state = IBV_QPS_RTS;
  if (rdma_init_qp_attr(id_.get(), &qa, &mask) != 0)
    return fail("rdma_init_qp_attr (RTS)", errno);
  qa.timeout = static_cast<uint8_t>(opts.verbs_timeout_exp);
  qa.retry_cnt = static_cast<uint8_t>(opts.verbs_retry_count);
  qa.rnr_retry = dev_->rnr_retry();
  qa.max_rd_atomic = std::min(
      {qa.max_rd_atomic, initiator_depth, dev_->max_initiator_depth()});
  mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
          | IBV_QP_MAX_QP_RD_ATOMIC;
  if (auto rc = ibv_modify_qp(qp_.get(), &qa, mask))
    return fail("ibv_modify_qp (RTS)", rc);
  return {};
}

caf::error verbs_queue_pair::establish(const conn_params& negotiated) {
  params_ = negotiated;
  peer_ = to_string(rdma_get_peer_addr(id_.get()));
  // Register first: a DISCONNECTED that arrives right after the migration
  // must find this QP.
  registered_ = true;
  dev_->add(this);
  if (rdma_migrate_id(id_.get(), dev_->cm_channel()) != 0)
    return make_error(errc::connect_failed,
                      "rdma_migrate_id failed: " + errno_text(errno));
  log().debug("verbs: connected to {} (QP {}, max message {} B, recv depth "
              "{}, inline {} B)",
              peer_, qp_->qp_num, params_.max_message_len_bytes,
              params_.recv_depth, max_inline_);
  return {};
}

// -- events --------------------------------------------------------------

void verbs_queue_pair::on_cm_event(rdma_cm_event_type type, int status) {
  switch (type) {
    case RDMA_CM_EVENT_DISCONNECTED:
      if (!closed_)
        log_within("connections", spdlog::level::info,
                   "verbs: " + peer_ + " disconnected");
      error_ = true;
      to_error();
      disconnect(); // answers the peer's disconnect request
      break;
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      fail("the RDMA device was removed");
      break;
    case RDMA_CM_EVENT_ESTABLISHED:
    case RDMA_CM_EVENT_TIMEWAIT_EXIT:
      break;
    default:
      log().debug("verbs: {}: {} (status {})", peer_, rdma_event_str(type),
                  status);
  }
}

void verbs_queue_pair::fail(const std::string& why) {
  if (!error_.exchange(true))
    warn_within("connections",
                "verbs: connection to " + peer_ + " failed: " + why);
  to_error();
  disconnect();
}

void verbs_queue_pair::to_error() noexcept {
  if (!qp_ || flushed_.exchange(true))
    return;
  ibv_qp_attr qa{};
  qa.qp_state = IBV_QPS_ERR;
  if (auto rc = ibv_modify_qp(qp_.get(), &qa, IBV_QP_STATE))
    log().warn("verbs: cannot move the QP to {} to the error state: {}", peer_,
               errno_text(rc));
  if (srq_) {
    // No receive of ours flushes to say so: `poll_cq` completes
    // srq_error_wr_id, and the owner hears of it as of a completion.
    srq_error_due_ = true;
    try {
      notify_.notify_soon();
    } catch (const std::exception&) {
      // Out of memory: the owner learns it at its next poll.
    }
  }
}

void verbs_queue_pair::disconnect() noexcept {
  if (!registered_ || disconnected_.exchange(true))
    return;
  // EINVAL when the connection is already gone: nothing to do then.
  if (rdma_disconnect(id_.get()) != 0 && errno != EINVAL)
    log().debug("verbs: rdma_disconnect {}: {}", peer_, errno_text(errno));
}

// -- queue_pair interface ------------------------------------------------

const conn_params& verbs_queue_pair::params() const noexcept {
  return params_;
}

std::string verbs_queue_pair::peer_name() const {
  return peer_;
}

caf::error verbs_queue_pair::check_post(const sge* sg, size_t n,
                                        size_t limit) const {
  if (error_)
    return make_error(errc::qp_error,
                      "the connection to " + peer_
                          + " is in the error state; create a new one");
  if (n > limit)
    return make_error(errc::invalid_argument,
                      "a work request takes at most " + std::to_string(limit)
                          + " scatter/gather elements (got " + std::to_string(n)
                          + ")");
  if (n > 0 && sg == nullptr)
    return make_error(errc::invalid_argument, "null scatter/gather list");
  return {};
}

caf::error verbs_queue_pair::post_recv(uint64_t wr_id, const sge* sg,
                                       size_t n) {
  if (srq_)
    return make_error(errc::unsupported,
                      "the queue pair to " + peer_
                          + " takes its receives from a shared receive "
                            "queue; post them there");
  if (auto err = check_post(sg, n, max_sge))
    return err;
  ibv_sge list[max_sge];
  ibv_recv_wr wr{};
  wr.wr_id = wr_id;
  wr.sg_list = list;
  wr.num_sge = to_ibv_sges(sg, n, list);
  if (doorbell_held_) {
    auto& h = held_recvs_.emplace_back();
    h.wr = wr;
    std::copy(list, list + wr.num_sge, h.sges.begin());
    h.wr.sg_list = nullptr; // linked at `ring_doorbell`
    return {};
  }
  ibv_recv_wr* bad = nullptr;
  if (auto rc = ibv_post_recv(qp_.get(), &wr, &bad))
    return make_error(
        rc == ENOMEM ? errc::quota_exceeded : errc::qp_error,
        "ibv_post_recv to " + peer_ + " failed: " + errno_text(rc)
            + (rc == ENOMEM ? "; the receive queue is full" : ""));
  return {};
}

std::shared_ptr<shared_receive_queue> verbs_queue_pair::srq() const {
  return srq_;
}

bool verbs_queue_pair::uses_srq(const ibv_srq* srq) const noexcept {
  return srq_ && srq != nullptr && srq_->get() == srq;
}

caf::error verbs_queue_pair::post_sq(ibv_send_wr& wr, const sge* sg, size_t n,
                                     wc_opcode opcode, size_t limit) {
  if (auto err = check_post(sg, n, limit))
    return err;
  auto bytes = total_length(sg, n);
  if (opcode == wc_opcode::send && bytes > params_.max_message_len_bytes)
    return make_error(errc::invalid_argument,
                      "SEND of " + std::to_string(bytes)
                          + " bytes exceeds the negotiated max message length "
                            "of "
                          + std::to_string(params_.max_message_len_bytes)
                          + " bytes");
  if (bytes > dev_->max_msg_bytes())
    return make_error(errc::invalid_argument,
                      "one work request moves at most "
                          + std::to_string(dev_->max_msg_bytes())
                          + " bytes on this device (got "
                          + std::to_string(bytes) + ")");
  ibv_sge list[max_sge];
  wr.sg_list = list;
  wr.num_sge = to_ibv_sges(sg, n, list);
  bool fetches = opcode == wc_opcode::rdma_read
                 || opcode == wc_opcode::atomic_fetch_add
                 || opcode == wc_opcode::atomic_comp_swap;
  if (!fetches && wr.num_sge > 0 && bytes <= max_inline_)
    wr.send_flags |= IBV_SEND_INLINE;
  if (doorbell_held_) {
    // Inline data is copied when the chain goes: the link keeps every
    // gathered byte until completion anyway.
    auto& h = held_.emplace_back();
    h.wr = wr;
    std::copy(list, list + wr.num_sge, h.sges.begin());
    h.wr.sg_list = nullptr; // linked at `ring_doorbell`
    h.wr.next = nullptr;
    track_sq(wr.wr_id, opcode, bytes);
    return {};
  }
  ibv_send_wr* bad = nullptr;
  if (auto rc = ibv_post_send(qp_.get(), &wr, &bad))
    return make_error(rc == ENOMEM ? errc::quota_exceeded : errc::qp_error,
                      "ibv_post_send to " + peer_ + " failed: " + errno_text(rc)
                          + (rc == ENOMEM
                                 ? "; the send queue is full (signal a work "
                                   "request now and then and poll the CQ)"
                                 : ""));
  track_sq(wr.wr_id, opcode, bytes);
  return {};
}

void verbs_queue_pair::track_sq(uint64_t wr_id, wc_opcode opcode,
                                uint64_t bytes) {
  // Devices that free the slots of unsignaled work requests on their own
  // never report them; only the newest send_depth_ can be outstanding.
  if (sq_.size() >= send_depth_)
    sq_.pop_front();
  sq_.push_back(sq_entry{wr_id, opcode, static_cast<uint32_t>(bytes)});
}

void verbs_queue_pair::hold_doorbell() {
  doorbell_held_ = true;
}

namespace {

/// A send-queue work request of `opcode`: its id, the immediate value when
/// given (network byte order) and whether it completes with a signal.
ibv_send_wr send_wr(uint64_t wr_id, ibv_wr_opcode opcode,
                    std::optional<uint32_t> imm, bool signaled) {
  ibv_send_wr wr{};
  wr.wr_id = wr_id;
  wr.opcode = opcode;
  if (imm)
    wr.imm_data = htonl(*imm);
  wr.send_flags = signaled ? IBV_SEND_SIGNALED : 0;
  return wr;
}

/// Links held work requests into one chain (their gather lists moved with
/// the vector, so they are set here) and returns its head.
template <class Held>
auto* chain(std::vector<Held>& held) noexcept {
  for (size_t i = 0; i < held.size(); ++i) {
    auto& h = held[i];
    h.wr.sg_list = h.wr.num_sge > 0 ? h.sges.data() : nullptr;
    h.wr.next = i + 1 < held.size() ? &held[i + 1].wr : nullptr;
  }
  return &held.front().wr;
}

/// The error of a chain the device refused.
caf::error chain_refused(const char* call, size_t count, const char* what,
                         const std::string& peer, int rc) {
  return make_error(rc == ENOMEM ? errc::quota_exceeded : errc::qp_error,
                    std::string{call} + " of a chain of "
                        + std::to_string(count) + " " + what + " to " + peer
                        + " failed: " + errno_text(rc)
                        + "; the connection fails with it");
}

} // namespace

caf::error verbs_queue_pair::ring_doorbell() {
  if (!doorbell_held_)
    return {};
  doorbell_held_ = false;
  // Receives first: the sends may provoke the peer's next messages.
  if (!held_recvs_.empty()) {
    auto count = held_recvs_.size();
    ibv_recv_wr* bad = nullptr;
    auto rc = ibv_post_recv(qp_.get(), chain(held_recvs_), &bad);
    held_recvs_.clear();
    if (rc != 0) {
      held_.clear();
      return chain_refused("ibv_post_recv", count, "receives", peer_, rc);
    }
  }
  if (held_.empty())
    return {};
  auto count = held_.size();
  ibv_send_wr* bad = nullptr;
  auto rc = ibv_post_send(qp_.get(), chain(held_), &bad);
  held_.clear();
  if (rc != 0)
    return chain_refused("ibv_post_send", count, "work requests", peer_, rc);
  return {};
}

caf::error verbs_queue_pair::post_send(uint64_t wr_id, const sge* sg, size_t n,
                                       std::optional<uint32_t> imm,
                                       bool signaled) {
  auto wr
      = send_wr(wr_id, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, imm, signaled);
  return post_sq(wr, sg, n, wc_opcode::send, max_sge);
}

caf::error verbs_queue_pair::post_write(uint64_t wr_id, const sge* sg, size_t n,
                                        uint64_t remote_addr, uint32_t rkey,
                                        std::optional<uint32_t> imm,
                                        bool signaled) {
  auto wr = send_wr(wr_id, imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                    imm, signaled);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  return post_sq(wr, sg, n, wc_opcode::rdma_write, max_sge);
}

caf::error verbs_queue_pair::post_read(uint64_t wr_id, const sge* sg, size_t n,
                                       uint64_t remote_addr, uint32_t rkey) {
  auto wr = send_wr(wr_id, IBV_WR_RDMA_READ, std::nullopt, true);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  auto limit = std::min<size_t>(
      max_sge, static_cast<size_t>(std::max(dev_->attr().max_sge_rd, 1)));
  return post_sq(wr, sg, n, wc_opcode::rdma_read, limit);
}

caf::error verbs_queue_pair::post_atomic(uint64_t wr_id, const sge& local,
                                         uint64_t remote_addr, uint32_t rkey,
                                         atomic_op op, uint64_t compare_add,
                                         uint64_t swap) {
  if (!dev_->supports_atomics())
    return make_error(errc::unsupported,
                      dev_->name()
                          + " has no atomic operations (atomic_cap is "
                            "IBV_ATOMIC_NONE); use another device");
  if (local.length != atomic_word_bytes)
    return make_error(errc::invalid_argument,
                      "an atomic's local buffer takes exactly 8 bytes, got "
                          + std::to_string(local.length));
  auto wr = send_wr(wr_id,
                    op == atomic_op::fetch_add ? IBV_WR_ATOMIC_FETCH_AND_ADD
                                               : IBV_WR_ATOMIC_CMP_AND_SWP,
                    std::nullopt, true);
  wr.wr.atomic.remote_addr = remote_addr;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  auto opcode = op == atomic_op::fetch_add ? wc_opcode::atomic_fetch_add
                                           : wc_opcode::atomic_comp_swap;
  return post_sq(wr, &local, 1, opcode, 1);
}

size_t verbs_queue_pair::poll_one_cq(ibv_cq* cq, bool send_queue,
                                     work_completion* out, size_t max) {
  size_t count = 0;
  ibv_wc wc[poll_batch];
  while (count < max) {
    auto want = static_cast<int>(std::min<size_t>(max - count, poll_batch));
    auto got = ibv_poll_cq(cq, want, wc);
    if (got <= 0) {
      if (got < 0 && !error_.exchange(true))
        log().error("verbs: ibv_poll_cq for {} failed", peer_);
      break;
    }
    for (int i = 0; i < got; ++i) {
      auto& in = wc[i];
      auto& x = out[count++];
      x = work_completion{};
      x.wr_id = in.wr_id;
      x.status = map_status(in.status);
      // rdma_rxe completes a receive that is too small for the inbound
      // message with LOC_QP_OP_ERR where IBA and hardware say LOC_LEN_ERR.
      if (!send_queue && in.status == IBV_WC_LOC_QP_OP_ERR
          && dev_->is_soft_roce())
        x.status = wc_status::local_length_error;
      if (x.status != wc_status::success && !error_.exchange(true)
          && x.status != wc_status::work_request_flushed) {
        // The QP is in the error state now; tell the peer at once so that
        // its QP flushes too.
        warn_within("connections",
                    "verbs: work request to " + peer_ + " failed: "
                        + ibv_wc_status_str(in.status) + " (vendor error "
                        + std::to_string(in.vendor_err) + ")");
        to_error();
        disconnect();
      }
      if (send_queue) {
        // Completions of one send queue arrive in posting order; earlier
        // unsignaled work requests completed silently.
        x.opcode = wc_opcode::send;
        while (!sq_.empty()) {
          auto entry = sq_.front();
          sq_.pop_front();
          if (entry.wr_id == in.wr_id) {
            x.opcode = entry.opcode;
            x.byte_len = entry.bytes;
            break;
          }
        }
        if (x.status == wc_status::success && in.opcode == IBV_WC_RDMA_READ)
          x.byte_len = in.byte_len;
      } else {
        x.opcode = wc_opcode::recv;
        if (x.status == wc_status::success) {
          x.byte_len = in.byte_len;
          if (in.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
            x.opcode = wc_opcode::recv_rdma_with_imm;
          if ((in.wc_flags & IBV_WC_WITH_IMM) != 0) {
            x.has_imm = true;
            x.imm_data = ntohl(in.imm_data);
          }
        }
      }
    }
    if (got < want)
      break;
  }
  return count;
}

size_t verbs_queue_pair::poll_cq(work_completion* out, size_t max) {
  if (out == nullptr || max == 0 || !qp_)
    return 0;
  auto n = poll_one_cq(send_cq_.get(), true, out, max);
  n += poll_one_cq(recv_cq_.get(), false, out + n, max - n);
  if (n < max && srq_error_due_.exchange(false)) {
    auto& x = out[n++];
    x = work_completion{};
    x.wr_id = srq_error_wr_id;
    x.status = wc_status::work_request_flushed;
    x.opcode = wc_opcode::recv;
  }
  return n;
}

int verbs_queue_pair::cq_fd() const noexcept {
  return cq_event_fd_.get();
}

caf::error verbs_queue_pair::do_arm_cq(cq_events which) {
  // Receives: the receive CQ alone.  A QP that fails flushes its posted
  // receives there, so failures still notify; one with a shared receive
  // queue, whose receives stay there, notifies through `to_error` (and
  // completes srq_error_wr_id) instead.
  auto* send_cq = which == cq_events::all ? send_cq_.get() : nullptr;
  for (auto cq : {send_cq, recv_cq_.get()}) {
    if (cq == nullptr)
      continue;
    if (auto rc = ibv_req_notify_cq(cq, 0))
      return make_error(errc::qp_error,
                        "ibv_req_notify_cq failed: " + errno_text(rc));
  }
  return {};
}

bool verbs_queue_pair::ack_cq_event() {
  // The engine acknowledged the CQ events already; drain the eventfd.
  uint64_t count = 0;
  return cq_event_fd_
         && ::read(cq_event_fd_.get(), &count, sizeof(count))
                == static_cast<ssize_t>(sizeof(count))
         && count > 0;
}

bool verbs_queue_pair::set_cq_notify(std::function<void()> fn) {
  if (!notify_)
    return false; // not initialized: no CQ to notify of
  notify_.set(std::move(fn));
  return true;
}

void verbs_queue_pair::close() {
  if (closed_.exchange(true))
    return;
  error_ = true;
  to_error();
  disconnect();
}

bool verbs_queue_pair::in_error() const noexcept {
  return error_;
}

} // namespace rdmactor::transport::verbs
