#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/ring_deque.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/completion_queue.hpp"
#include "transport/soft/deadline.hpp"
#include "transport/soft/event_loop.hpp"
#include "transport/soft/faults.hpp"
#include "transport/soft/outbound_stream.hpp"
#include "transport/soft/rx_buffer.hpp"
#include "transport/soft/soft_srq.hpp"
#include "transport/soft/unique_fd.hpp"
#include "transport/soft/work_requests.hpp"

namespace rdmactor::transport::soft {

class soft_device;

/// A soft queue pair: a user-space model of a reliable-connected queue pair
/// over one TCP connection, with its own completion queue.
///
/// Threads.  The owner calls `post_*`, `poll_cq` and `arm_cq` (one thread
/// at a time), a poller thread calls `ack_cq_event`, anyone may call
/// `close`.  The device's event loop (`event_loop`, one thread shared by
/// many queue pairs) plays the NIC: in `service` it reads frames, places
/// inbound data into registered memory, answers requests and completes our
/// requests when the peer answers.  `post_*` write their frame to the
/// socket directly (non-blocking, zero copy from the gather list); what the
/// socket does not take at once the loop writes later.  No thread ever
/// blocks on the socket while holding a lock.
///
/// Requester.  SEND, WRITE and READ go out in post order and the peer
/// executes them in that order.  Each completes when the peer's answer
/// arrives, i.e. after the peer placed the data (SEND, WRITE) or when the
/// data arrived (READ).  A successful unsignaled SEND or WRITE completes
/// silently; errors always complete.  As on hardware, an unsignaled request
/// keeps its send-queue entry (it counts against `limits::max_send_wr`)
/// until a later signaled request of this queue pair completed.  A local sge
/// that is not registered, lies outside its registration or (READ destination)
/// lacks local_write does not fail the post: when the request reaches the front
/// of the send queue it completes with `local_protection_error` and the queue
/// pair enters the error state, as on hardware.
///
/// Responder.  An inbound SEND (or WRITE with immediate) consumes the
/// oldest posted receive.  Without one the loop keeps reading (it buffers
/// up to `limits::pending_budget_bytes` of later requests, in order) and
/// waits up to the RNR timeout for a receive; then it answers
/// `rnr_retry_exceeded` and both sides enter the error state.  A message
/// larger than the receive completes that receive with
/// `local_length_error`, the sender gets `remote_operation_error` (verbs
/// reports IBV_WC_REM_INV_REQ_ERR there) and both sides enter the error
/// state.  Inbound WRITE and READ are checked against the registration of
/// the rkey (bounds, remote_write / remote_read); a violation touches no
/// memory, the requester gets `remote_access_error` and both sides enter
/// the error state.  Zero-length WRITE and READ skip the rkey check, as in
/// InfiniBand.  An inbound atomic (fetch_add, compare_swap) waits behind
/// earlier requests like any other, then runs in the device's
/// `atomic_unit` (atomics.hpp: atomic across every queue pair of the
/// device), which checks rkey, bounds, remote_atomic and alignment; a
/// violation answers a NAK and both sides enter the error state.
///
/// Error state.  Entered on `close()`, peer disconnect or death, a protocol
/// violation, a NAK (either direction), the RNR timer, the transport timer
/// (requests outstanding and no byte from the peer for the transport
/// timeout), a CQ overrun, or a fault.  Every outstanding request and
/// every posted receive then completes, at once, with
/// `work_request_flushed` (the request that caused the error with its own
/// status); later `post_*` fail with `qp_error`; memory of flushed work is
/// never touched again.  After sending a NAK the queue pair keeps the
/// socket open until the peer closes it or `limits::linger_ms` pass, so
/// the NAK arrives.
class soft_queue_pair final : public queue_pair {
public:
  /// What a queue pair needs besides its socket.
  struct config {
    conn_params params;
    std::string peer;
    /// How long an inbound SEND waits for a posted receive.
    std::chrono::milliseconds rnr_timeout{2000};
    /// How long requests may stay outstanding without a byte from the peer.
    std::chrono::milliseconds transport_timeout{12000};
    fault_plan faults;
    /// Where receives come from; null: `post_recv`.
    std::shared_ptr<soft_srq> srq;
  };

  /// Starts a queue pair on the connected, handshaken socket `sock`, served
  /// by `loop` (which must outlive it: the device owns both).  Fails with
  /// `fabric_unavailable` when the eventfd cannot be created or the loop
  /// cannot watch the socket.
  static caf::expected<queue_pair_ptr> make(std::shared_ptr<soft_device> dev,
                                            event_loop& loop, unique_fd sock,
                                            config cfg);

  /// Closes, waits until the event loop let go of it (bounded by
  /// `limits::linger_ms`) and discards unpolled completions.  Never call it
  /// on the event loop's thread.
  ~soft_queue_pair() override;

  const conn_params& params() const noexcept override {
    return params_;
  }

  std::string peer_name() const override {
    return peer_;
  }

  caf::error post_recv(uint64_t wr_id, const sge* sg, size_t n) override;

  std::shared_ptr<shared_receive_queue> srq() const override {
    return srq_;
  }

  /// The shared receive queue got a receive: a request waiting for one
  /// runs now.  Returns false when none waits (the queue wakes another).
  /// Caller: the queue (see soft_srq).
  bool on_shared_receive();

  caf::error post_send(uint64_t wr_id, const sge* sg, size_t n,
                       std::optional<uint32_t> imm, bool signaled) override;

  caf::error post_write(uint64_t wr_id, const sge* sg, size_t n,
                        uint64_t remote_addr, uint32_t rkey,
                        std::optional<uint32_t> imm, bool signaled) override;

  caf::error post_read(uint64_t wr_id, const sge* sg, size_t n,
                       uint64_t remote_addr, uint32_t rkey) override;

  caf::error post_atomic(uint64_t wr_id, const sge& local, uint64_t remote_addr,
                         uint32_t rkey, atomic_op op, uint64_t compare_add,
                         uint64_t swap) override;

  size_t poll_cq(work_completion* out, size_t max) override;

  int cq_fd() const noexcept override {
    return cq_.fd();
  }

  /// Requests one notification; signals at once when completions are
  /// already queued.  Never fails.
protected:
  caf::error do_arm_cq(cq_events which) override;

public:
  bool ack_cq_event() override;

  /// The loop thread (or the owner, in `arm_cq`) calls `fn` instead of
  /// signalling the CQ's eventfd.  Always succeeds.
  bool set_cq_notify(std::function<void()> fn) override;

  void close() override;

  std::string failure_reason() const override;

  bool in_error() const noexcept override {
    return phase_.load() != phase::running;
  }

  /// Replaces the fault plan (see faults.hpp).  Any thread.
  void set_faults(const fault_plan& plan);

  /// How many inbound requests wait for a posted receive (receiver not
  /// ready): the ones buffered, plus the one the loop stopped reading at.
  /// Any thread (see faults.hpp).
  size_t waiting_for_receive() const {
    std::lock_guard<std::mutex> guard{mutex_};
    return pending_.size() + (stalled_.load() ? 1 : 0);
  }

  /// Inbound frames the owner read in `progress` (see faults.hpp).  Any
  /// thread.
  uint64_t frames_read_by_owner() const noexcept {
    return owner_frames_.load(std::memory_order_relaxed);
  }

  /// `sendmsg` calls that wrote frames (see faults.hpp).  Any thread.
  uint64_t socket_writes() const noexcept {
    return socket_writes_.load(std::memory_order_relaxed);
  }

  /// Reads of the socket that found nothing (see faults.hpp).  Any thread.
  uint64_t empty_socket_reads() const noexcept {
    return empty_reads_.load(std::memory_order_relaxed);
  }

  /// The owner polls the CQ from now on (true) or waits for notifications
  /// (false).  While it polls, `progress` reads the socket on the owner's
  /// thread and the event loop stops watching it for input (at its next
  /// round), so a completion costs no thread hand-off.  Switching off
  /// wakes the loop, which reads again from then on (also what arrived in
  /// between: its epoll set is level-triggered).  Caller: the owner.
  void set_polled(bool on) override;

  /// While polled: reads and executes what the peer sent (up to one
  /// service call's worth), runs the timers and writes the answers.
  /// Returns at once when the loop is reading (a broken connection, or an
  /// owner that made no progress for `limits::owner_stall_ms`) or the QP
  /// is not polled.  Caller: the owner, before `poll_cq`.
  void progress() override;
  void hold_doorbell() override;
  caf::error ring_doorbell() override;

  // -- event loop interface (loop thread only) -------------------------------

  /// Does everything due: timers, writing queued frames, reading and
  /// executing inbound frames (when `revents`, the socket's epoll events,
  /// or buffered input say so).  Returns what the loop must watch next.
  service_result service(uint32_t revents);

  /// The loop's bookkeeping for this queue pair.
  loop_hook& hook() noexcept {
    return hook_;
  }

private:
  /// Life cycle: running; draining (error state, a final NAK still goes
  /// out); closed (socket shut down, the event loop lets go).
  enum class phase : uint8_t { running, draining, closed };

  /// What the loop is reading.
  enum class rx_phase : uint8_t { header, payload, stalled };

  /// Where the payload being read goes.
  enum class rx_action : uint8_t {
    none,
    recv,          ///< into the oldest posted receive (inbound SEND)
    write,         ///< into the target of an inbound WRITE
    read_response, ///< into the destination of our oldest READ
    buffer,        ///< into a buffer (receiver not ready)
    discard,       ///< nowhere (error state)
  };

  /// Why and how the queue pair enters the error state.
  struct failure {
    failure(std::string why, wc_status front = wc_status::work_request_flushed,
            std::optional<wc_status> nak_status = std::nullopt,
            bool quiet_log = false)
        : reason(std::move(why)), front_status(front), nak(nak_status),
          quiet(quiet_log) {}

    std::string reason;
    /// Status of the oldest outstanding request (the others flush).
    wc_status front_status;
    /// NAK to send to the peer before closing.
    std::optional<wc_status> nak;
    /// Log at debug level (a local close, the peer's orderly close)
    /// instead of info.
    bool quiet;
    /// Send the answers already owed to the peer (the ACKs of SENDs whose
    /// receive completions the owner may have seen, held back or queued)
    /// before closing: a local close or the destructor.  Requests not yet
    /// sent are dropped either way; the ACKs they carried are kept.
    bool flush_answers = false;
  };

  soft_queue_pair(std::shared_ptr<soft_device> dev, event_loop& loop,
                  unique_fd sock, config cfg);

  /// Makes the event loop service this queue pair soon.  Any thread.
  void wake() {
    loop_->wake(this, hook_);
  }

  // -- posting (owner thread) ---------------------------------------------

  bool resolve_local(const sge* sg, size_t n, uint32_t needed,
                     range_list& out) const;

  caf::error post_request(uint64_t wr_id, wc_opcode opcode, bool signaled,
                          const wire::header& h, bool local_ok,
                          const range_list& payload,
                          const range_list& read_into,
                          const uint8_t* inline_bytes = nullptr);

  caf::error qp_error() const;

  // -- with mutex_ held (any thread) --------------------------------------

  void complete_locked(const work_completion& wc);
  void settle_front_locked();
  void pump_locked(time_point now);
  void respond_locked(wire::header h, const range_list& payload, time_point now,
                      const uint8_t* inline_bytes = nullptr);
  void execute_atomic_locked(const wire::header& h, const uint8_t* operands,
                             time_point now);
  void owe_ack_locked(time_point now);
  void flush_acks_locked(time_point now);
  uint8_t take_owed_acks_locked() noexcept;
  bool on_acks_locked(uint32_t n);
  void drain_pending_locked(time_point now);
  /// Whether a receive is at hand in `rq_`: posted there, or taken from
  /// the shared receive queue now (which wakes us when it gets one).
  bool have_recv_locked();
  void execute_buffered_locked(inbound_request& req, time_point now);
  /// The range the peer's WRITE or READ `h` names, in a registration that
  /// grants `needed` (empty for a zero-length one); false when none does.
  bool resolve_remote(const wire::header& h, uint32_t needed,
                      range_list& out) const;
  /// Answers the peer's READ `h` with the bytes it names, or fails the
  /// connection when no registration grants remote_read there.
  void execute_read_locked(const wire::header& h, time_point now);
  /// The failure of the peer's WRITE or READ `h` that no registration
  /// with the access it needs covers (both paths: streamed and buffered).
  static failure outside_registration(const wire::header& h);
  /// Completes the receive that the peer's WRITE with immediate data `h`
  /// consumed; false (a violation) when none is posted.
  bool complete_write_imm_locked(const wire::header& h);
  void fail_locked(failure f);
  void violation_locked(const std::string& what);
  void finish_locked();
  void check_timers_locked(time_point now);
  /// The earliest timer of the QP; sets `unwatched_` when an idle QP needs
  /// none.
  std::optional<time_point> next_deadline_locked(time_point now);

  // -- loop thread ----------------------------------------------------------

  bool buffered_work() const noexcept;
  /// Reads and executes one service call's worth of inbound frames with
  /// their answers batched (written by the caller afterwards); returns how
  /// many frames it read.  With rx_mutex_ held.
  uint32_t read_batch();
  void on_readable();
  void discard_input();
  bool step_header();
  bool step_payload();
  bool fill_rx();
  bool recv_direct();
  bool read_done(io_status st, int err, size_t asked, size_t got);
  void deliver(const uint8_t* src, size_t n);
  void advance(size_t n) noexcept;
  void on_frame(const wire::header& h);
  void on_response(const wire::header& h);
  void decide_request(time_point now);
  void execute_inline_locked(time_point now);
  void start_payload(rx_action action, uint64_t len) noexcept;
  void finish_payload();
  void on_target_invalid(rx_action action);
  void on_socket_end(io_status st, int err);
  void violation(const std::string& what);

  void note_progress(time_point now) noexcept;
  time_point last_progress() const noexcept;

  // -- immutable after construction ----------------------------------------

  std::shared_ptr<soft_device> dev_;
  event_loop* loop_;
  unique_fd sock_;
  completion_queue cq_;
  const conn_params params_;
  const std::string peer_;
  const std::chrono::milliseconds rnr_timeout_;
  const std::chrono::milliseconds transport_timeout_;
  /// ACKs held back at most (limits::max_owed_acks, or fewer for a small
  /// receive depth).
  const uint32_t owed_ack_limit_;
  /// Where receives come from instead of `post_recv`; may be null.
  const std::shared_ptr<soft_srq> srq_;
  /// Our mark in `srq_` while we wait for a receive.
  const std::shared_ptr<srq_waiter> srq_waiter_;

  // -- guarded by mutex_ ---------------------------------------------------

  mutable std::mutex mutex_;
  /// `fail_locked`'s reason (under mutex_).
  std::string failure_reason_;
  /// Written under mutex_ (and placement_mutex_ when leaving running).
  std::atomic<phase> phase_{phase::running};
  ring_deque<outstanding_request> outstanding_;
  /// Unsignaled requests that completed silently since the last signaled
  /// completion: their send-queue entries are not free yet.
  size_t unreaped_ = 0;
  /// Outstanding requests, from the front, whose frame is fully written.
  size_t transmitted_ = 0;
  /// A request with a bad local sge is queued: later ones stay off the wire.
  bool sq_blocked_ = false;
  /// The owner holds the doorbell (`hold_doorbell`): requests it posts are
  /// queued in `tx_` and written at `ring_doorbell`.  Guarded by `mutex_`.
  bool doorbell_held_ = false;
  /// Posted receives; with `srq_`, the one taken from it for the request
  /// being executed.
  ring_deque<posted_recv> rq_;
  ring_deque<inbound_request> pending_;
  uint64_t pending_bytes_ = 0;
  /// ACKs of executed SENDs not sent yet: the next frame we send carries
  /// them, or an ACK frame once `owed_ack_limit_` pile up or at
  /// `ack_deadline_` (see wire.hpp).
  uint32_t owed_acks_ = 0;
  std::optional<time_point> ack_deadline_;
  /// When the oldest inbound request waiting for a receive gives up.
  std::optional<time_point> rnr_deadline_;
  std::optional<time_point> linger_deadline_;
  /// Idle for half the transport timeout: the loop keeps no timer for the
  /// QP, and the post that gives it work again wakes the loop (which then
  /// runs its transport timer).  An idle QP costs the loop nothing.
  bool unwatched_ = false;
  bool write_shut_ = false;
  /// Writing failed (the peer reset or closed): stop writing, read what
  /// the peer sent before, then fail (at the latest at this deadline).
  std::optional<time_point> write_broken_deadline_;
  bool cq_overrun_ = false;
  bool destroying_ = false;
  /// The loop watches the socket for writability (it writes what is left
  /// in tx_ when the socket drains).
  bool loop_writes_ = false;
  outbound_stream tx_;
  /// The loop does not read: the current request can neither run nor be
  /// buffered.  Written by the loop under mutex_.
  std::atomic<bool> stalled_{false};

  // -- the reader: the loop, or the owner while it polls -------------------
  //
  // The receive state below belongs to whoever holds rx_mutex_: the loop
  // thread in `service`, or the owner in `progress` while it polls
  // (`set_polled`).  Placement also takes placement_mutex_.

  /// Held while reading and executing inbound frames (before mutex_).
  std::mutex rx_mutex_;
  /// The owner polls the CQ and reads the socket itself (`set_polled`);
  /// the loop then leaves the socket alone while the QP runs, unless the
  /// owner made no progress for `limits::owner_stall_ms`.
  std::atomic<bool> polled_{false};
  /// When the owner last called `progress` (or started polling).
  std::atomic<clock_type::rep> owner_progress_{0};
  /// Inbound frames the owner read (`frames_read_by_owner`).
  std::atomic<uint64_t> owner_frames_{0};
  /// `sendmsg` calls that wrote frames (`socket_writes`).
  std::atomic<uint64_t> socket_writes_{0};
  /// Reads that found the socket empty (`empty_socket_reads`).
  std::atomic<uint64_t> empty_reads_{0};

  /// Held by the loop while it touches memory of a posted work request, so
  /// that `fail_locked` never flushes work whose memory is being written.
  std::mutex placement_mutex_;
  rx_buffer rx_;
  rx_phase rx_phase_ = rx_phase::header;
  wire::header cur_;
  rx_action action_ = rx_action::none;
  range_list target_;
  size_t target_idx_ = 0;
  size_t target_off_ = 0;
  std::vector<uint8_t> buffer_;
  size_t buffer_off_ = 0;
  uint64_t remaining_ = 0;
  uint32_t rx_seq_ = 0;
  /// A read of this batch (`read_batch`) got less than it asked for: the
  /// socket had no more, so the batch ends without another `recv` that
  /// would only fail with EAGAIN.  The level-triggered epoll set (or the
  /// polling owner's next `progress`) reads again when more arrives.
  bool rx_drained_ = false;

  /// The loop thread's id.
  const std::thread::id loop_id_;
  /// The thread that is executing one read's worth of inbound frames (the
  /// loop or the polling owner): their answers wait in tx_ until it is
  /// done and writes them at once.  Default-constructed when none.
  std::atomic<std::thread::id> batching_thread_{};

  std::atomic<clock_type::rep> last_progress_{0};
  loop_hook hook_;
};

} // namespace rdmactor::transport::soft
