#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdmactor/transport/fabric.hpp"
#include "transport/verbs/completion_engine.hpp"
#include "transport/verbs/raii.hpp"

namespace rdmactor::transport::verbs {

class verbs_device;
class verbs_srq;

/// Copies the non-empty elements of `sg[0..n)` (n <= max_sge) into `out`;
/// returns how many.  Zero-length elements are dropped: some devices read
/// a length of 0 as 2 GiB.
int to_ibv_sges(const sge* sg, size_t n, ibv_sge* out) noexcept;

/// A reliable-connected queue pair on a verbs device (internal).
///
/// The QP is created by this class with `ibv_create_qp` (not attached to
/// the rdma_cm id) and moved through INIT, RTR and RTS with the attributes
/// `rdma_init_qp_attr` returns plus the configured MTU, GID index, ACK
/// timeout, retry counts and RNR timer.  Sends, writes and reads complete on
/// a send CQ, receives on a receive CQ.  Knowing the queue of every
/// completion lets `poll_cq` report an opcode and a length for error
/// completions, which `ibv_wc` leaves undefined.
///
/// Notifications: a QP has no completion channel of its own.  Both CQs are
/// created on the device's shared channel with the id of this QP's
/// registration in the device's `completion_engine` as `cq_context`, and
/// `arm_cq` arms both (`ibv_req_notify_cq`), or for `cq_events::receives`
/// the receive CQ alone.  The engine thread takes and
/// acknowledges the events and calls the registered function:
///   - by default one that signals an eventfd of this QP, which is
///     `cq_fd()`; `ack_cq_event` drains it (owners with a poller thread,
///     the fabric tests);
///   - after `set_cq_notify(fn)`, `fn` itself (the transport actor: no
///     thread per connection); `cq_fd()` then stays silent.
/// The destructor deregisters before it returns and waits for a call of
/// `fn` that is running, so `fn` is never called afterwards.  It may run
/// on the engine thread (inside `fn`, when `fn` dropped the last reference
/// to the QP's owner): then it does not wait for that call, its caller.
///
/// Shared receives: a QP that `init` finds its device sharing a receive
/// queue (`device::srq`) is created with that queue and no receive queue
/// of its own (`post_recv` refuses) and holds it until the QP is gone.  Its
/// receive completions still come on its receive CQ, but a QP that fails
/// flushes no receives there: they stay in the shared queue.
///
/// Set-up sequence (connect or accept): construct with the cm id, `init`,
/// `ready` (RTR, RTS), then `establish` once rdma_cm reports the connection
/// (registers with the device and moves the id to the device's channel).
class verbs_queue_pair final : public queue_pair {
public:
  verbs_queue_pair(std::shared_ptr<verbs_device> dev, cm_id_ptr id);

  ~verbs_queue_pair() override;

  verbs_queue_pair(const verbs_queue_pair&) = delete;
  verbs_queue_pair& operator=(const verbs_queue_pair&) = delete;

  // -- set-up ---------------------------------------------------------------

  /// Registers with the completion engine, creates the CQs (on the device's
  /// completion channel) and the QP sized for `offer` (with the device's
  /// shared receive queue, if it shares one), and moves the QP to INIT.
  caf::error init(const conn_params& offer);

  /// Moves the QP to RTR and RTS.  `responder_resources` and
  /// `initiator_depth` cap the RDMA READ depths rdma_cm negotiated.
  caf::error ready(uint8_t responder_resources, uint8_t initiator_depth);

  /// Completes the set-up: stores the negotiated parameters and the peer's
  /// name, registers with the device and migrates the cm id to the device's
  /// event channel.
  caf::error establish(const conn_params& negotiated);

  rdma_cm_id* id() const noexcept {
    return id_.get();
  }
  uint32_t qp_num() const noexcept {
    return qp_ ? qp_->qp_num : 0;
  }
  ibv_qp* qp() const noexcept {
    return qp_.get();
  }
  bool owns_cq(const ibv_cq* cq) const noexcept {
    return cq != nullptr && (cq == send_cq_.get() || cq == recv_cq_.get());
  }
  /// Whether this QP takes its receives from `srq`.
  bool uses_srq(const ibv_srq* srq) const noexcept;

  // -- events (device event thread, under the registry lock) ----------------

  /// Handles an rdma_cm event for this QP's id.
  void on_cm_event(rdma_cm_event_type type, int status);

  /// Moves the QP to the error state because of `why` and disconnects.
  void fail(const std::string& why);

  // -- queue_pair interface -------------------------------------------------

  const conn_params& params() const noexcept override;
  std::string peer_name() const override;
  /// `unsupported` on a QP with a shared receive queue.
  caf::error post_recv(uint64_t wr_id, const sge* sg, size_t n) override;
  std::shared_ptr<shared_receive_queue> srq() const override;
  caf::error post_send(uint64_t wr_id, const sge* sg, size_t n,
                       std::optional<uint32_t> imm, bool signaled) override;
  caf::error post_write(uint64_t wr_id, const sge* sg, size_t n,
                        uint64_t remote_addr, uint32_t rkey,
                        std::optional<uint32_t> imm, bool signaled) override;
  caf::error post_read(uint64_t wr_id, const sge* sg, size_t n,
                       uint64_t remote_addr, uint32_t rkey) override;
  /// IBV_WR_ATOMIC_FETCH_AND_ADD / IBV_WR_ATOMIC_CMP_AND_SWP; `unsupported`
  /// on a device whose atomic_cap is IBV_ATOMIC_NONE.  Uses the QP's
  /// max_rd_atomic (the negotiated initiator depth, as READs do).
  caf::error post_atomic(uint64_t wr_id, const sge& local, uint64_t remote_addr,
                         uint32_t rkey, atomic_op op, uint64_t compare_add,
                         uint64_t swap) override;
  size_t poll_cq(work_completion* out, size_t max) override;
  int cq_fd() const noexcept override;
  /// Work requests posted while held wait in `held_` and `held_recvs_`
  /// and go as one chain each (`ibv_post_recv`, then `ibv_post_send`) at
  /// `ring_doorbell`.
  void hold_doorbell() override;
  caf::error ring_doorbell() override;

protected:
  caf::error do_arm_cq(cq_events which) override;

public:
  bool ack_cq_event() override;
  bool set_cq_notify(std::function<void()> fn) override;
  void close() override;
  bool in_error() const noexcept override;

private:
  /// One posted send-queue work request, oldest first.
  struct sq_entry {
    uint64_t wr_id;
    wc_opcode opcode;
    uint32_t bytes;
  };

  /// A work request posted while the doorbell is held, with its gather
  /// list (linked when the chain goes).
  struct held_wr {
    ibv_send_wr wr;
    std::array<ibv_sge, max_sge> sges;
  };

  /// A receive posted while the doorbell is held.
  struct held_recv {
    ibv_recv_wr wr;
    std::array<ibv_sge, max_sge> sges;
  };

  /// Posts one send-queue work request (or holds it).
  caf::error post_sq(ibv_send_wr& wr, const sge* sg, size_t n, wc_opcode opcode,
                     size_t max_sge);

  /// Records a posted send-queue work request in `sq_`.
  void track_sq(uint64_t wr_id, wc_opcode opcode, uint64_t bytes);

  /// Checks the error state and the gather/scatter list.
  caf::error check_post(const sge* sg, size_t n, size_t max_sge) const;

  /// Moves the QP to IBV_QPS_ERR once (work requests flush).
  void to_error() noexcept;

  /// Calls rdma_disconnect once.
  void disconnect() noexcept;

  size_t poll_one_cq(ibv_cq* cq, bool send_queue, work_completion* out,
                     size_t max);

  // Members in order of acquisition; released in reverse.
  std::shared_ptr<verbs_device> dev_;
  cm_id_ptr id_;
  unique_fd cq_event_fd_; ///< `cq_fd()`, signaled until `set_cq_notify`
  completion_engine::registration notify_;
  cq_ptr send_cq_;
  cq_ptr recv_cq_;
  std::shared_ptr<verbs_srq> srq_; ///< null: the QP has its own receives
  qp_ptr qp_;
  uint32_t max_inline_ = 0;
  uint32_t send_depth_ = 0;
  conn_params params_;
  std::string peer_;
  bool registered_ = false;
  std::deque<sq_entry> sq_;           ///< owner thread only
  std::vector<held_wr> held_;         ///< owner thread only
  std::vector<held_recv> held_recvs_; ///< owner thread only
  bool doorbell_held_ = false;        ///< owner thread only
  std::atomic<bool> error_{false};
  std::atomic<bool> flushed_{false};
  /// With a shared receive queue: the error state is not reported yet
  /// (`poll_cq` completes `srq_error_wr_id` once).
  std::atomic<bool> srq_error_due_{false};
  std::atomic<bool> disconnected_{false};
  std::atomic<bool> closed_{false};
};

} // namespace rdmactor::transport::verbs
