#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "rdmactor/errc.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor {
struct options;
} // namespace rdmactor

/// The fabric interface: a narrow, verbs-shaped view of an RDMA NIC.
///
/// Two implementations sit behind it with the same semantics: `soft` (a
/// user-space model of a reliable-connected QP over TCP, transport/soft/)
/// and `verbs` (rdma-core, transport/verbs/).  Everything above the transport
/// actor is written against this interface only.
///
/// Threading: unless a function says otherwise, an object may be used from
/// any thread, but the `post_*`, `poll_cq` and `arm_cq` functions of one
/// queue pair are called by one thread at a time (the transport actor), and
/// `ack_cq_event` by one other thread (a poller, for owners that wait on
/// `cq_fd()` instead of calling `set_cq_notify`).
namespace rdmactor::transport {

/// Access rights of a memory registration; values equal IBV_ACCESS_*.
namespace access {
constexpr uint32_t local_write = 1;
constexpr uint32_t remote_write = 2;
constexpr uint32_t remote_read = 4;
constexpr uint32_t remote_atomic = 8;
constexpr uint32_t all
    = local_write | remote_write | remote_read | remote_atomic;
} // namespace access

/// Status of a work completion; mirrors `ibv_wc_status`.
enum class wc_status : uint8_t {
  success,
  local_length_error,       ///< IBV_WC_LOC_LEN_ERR
  local_protection_error,   ///< IBV_WC_LOC_PROT_ERR
  remote_access_error,      ///< IBV_WC_REM_ACCESS_ERR
  remote_operation_error,   ///< IBV_WC_REM_OP_ERR
  rnr_retry_exceeded,       ///< IBV_WC_RNR_RETRY_EXC_ERR
  transport_retry_exceeded, ///< IBV_WC_RETRY_EXC_ERR
  work_request_flushed,     ///< IBV_WC_WR_FLUSH_ERR
  general_error,            ///< any other status
};

/// Returns the enumerator's name (inline: the soft fabric, which
/// rdmactor_transport links, names statuses too).
constexpr const char* to_string(wc_status x) noexcept {
  switch (x) {
    case wc_status::success:
      return "success";
    case wc_status::local_length_error:
      return "local_length_error";
    case wc_status::local_protection_error:
      return "local_protection_error";
    case wc_status::remote_access_error:
      return "remote_access_error";
    case wc_status::remote_operation_error:
      return "remote_operation_error";
    case wc_status::rnr_retry_exceeded:
      return "rnr_retry_exceeded";
    case wc_status::transport_retry_exceeded:
      return "transport_retry_exceeded";
    case wc_status::work_request_flushed:
      return "work_request_flushed";
    case wc_status::general_error:
      return "general_error";
  }
  return "unknown_wc_status";
}

/// Maps a completion status to the project error code.
errc to_errc(wc_status x) noexcept;

/// Which completions an armed CQ notifies (see `queue_pair::arm_cq`).
enum class cq_events : uint8_t {
  /// The next completion.
  all,
  /// The next receive completion or unsuccessful completion; successful
  /// send-queue completions are reaped at the next poll without waking
  /// anyone (like arming only the receive CQ of a QP with two CQs).
  receives,
};

/// Opcode of a work completion; mirrors `ibv_wc_opcode`.
enum class wc_opcode : uint8_t {
  send,
  rdma_write,
  rdma_read,
  recv,               ///< a SEND arrived in a posted receive
  recv_rdma_with_imm, ///< an RDMA WRITE with immediate consumed a receive
  atomic_fetch_add,   ///< IBV_WC_FETCH_ADD
  atomic_comp_swap,   ///< IBV_WC_COMP_SWAP
};

/// An atomic operation on one 8-byte word of peer memory (see
/// `queue_pair::post_atomic`).
enum class atomic_op : uint8_t {
  /// Adds `compare_add` to the word (wrapping); IBV_WR_ATOMIC_FETCH_AND_ADD.
  fetch_add,
  /// Stores `swap` if the word equals `compare_add`;
  /// IBV_WR_ATOMIC_CMP_AND_SWP.
  compare_swap,
};

/// Bytes of the word an atomic operation works on.
constexpr uint32_t atomic_word_bytes = 8;

/// One work completion, as `ibv_poll_cq` returns it.
struct work_completion {
  uint64_t wr_id = 0;
  wc_status status = wc_status::success;
  wc_opcode opcode = wc_opcode::send;
  /// Bytes received (recv opcodes) or transferred.
  uint32_t byte_len = 0;
  bool has_imm = false;
  uint32_t imm_data = 0;
};

/// One scatter/gather element: a range of registered local memory.
struct sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

/// Maximum number of scatter/gather elements per work request on every
/// fabric (the verbs fabric checks the device supports it).
constexpr size_t max_sge = 4;

/// Connection parameters.  Each side offers its own; the connection uses
/// the minimum of both for each field (the negotiated values).
struct conn_params {
  /// Largest SEND payload (sum of the gather list) the peer may send.
  uint32_t max_message_len_bytes = 64 * 1024;
  /// Receives the local side keeps posted (the peer's send credits).
  uint32_t recv_depth = 64;
};

/// A registration of local memory; deregisters on destruction.
///
/// Destroy it only when no posted work request refers to it.  Outlives
/// nothing: it keeps its device alive by itself.
class memory_region {
public:
  virtual ~memory_region() = default;

  void* addr() const noexcept {
    return addr_;
  }
  size_t length() const noexcept {
    return length_;
  }
  uint32_t lkey() const noexcept {
    return lkey_;
  }
  uint32_t rkey() const noexcept {
    return rkey_;
  }
  uint32_t access_flags() const noexcept {
    return access_;
  }

protected:
  memory_region(void* addr, size_t length, uint32_t lkey, uint32_t rkey,
                uint32_t access)
      : addr_(addr), length_(length), lkey_(lkey), rkey_(rkey),
        access_(access) {}

private:
  void* addr_;
  size_t length_;
  uint32_t lkey_;
  uint32_t rkey_;
  uint32_t access_;
};

class shared_receive_queue;

/// A connected reliable queue pair with its own completion queue.
///
/// Lifecycle: created connected by `device::connect` or `listener::accept`.
/// It enters the error state when the peer disconnects or dies, on a
/// transport error (RNR retry exceeded, ...) or on `close()`.  In the error
/// state every outstanding work request (sends, writes, reads and posted
/// receives) completes with `work_request_flushed` (or the error that moved
/// it there), and later `post_*` calls fail with `errc::qp_error`.  The
/// destructor closes and releases every resource; completions not polled
/// by then are discarded.  Nothing blocks forever: the fabric bounds every
/// wait by the options it was opened with.
class queue_pair {
public:
  virtual ~queue_pair() = default;

  /// Returns the negotiated parameters.  Any thread.
  virtual const conn_params& params() const noexcept = 0;

  /// Returns a printable name of the peer ("10.0.0.2:7471").  Any thread.
  virtual std::string peer_name() const = 0;

  /// Posts a receive with scatter list `sg[0..n)`.  The oldest posted
  /// receive takes the next inbound SEND.  Caller: the owner (transport
  /// actor).  Fails with `qp_error` in the error state, `invalid_argument`
  /// for n > max_sge, `unsupported` on a queue pair that takes its
  /// receives from a shared receive queue (post them there).
  virtual caf::error post_recv(uint64_t wr_id, const sge* sg, size_t n) = 0;

  /// The shared receive queue this queue pair takes its receives from
  /// (see `device::share_receives`); null when it has its own.  Any
  /// thread.
  virtual std::shared_ptr<shared_receive_queue> srq() const {
    return nullptr;
  }

  /// Posts a SEND of the gather list `sg[0..n)` (zero copy: the memory must
  /// stay valid until completion).  With `signaled == false` a successful
  /// send produces no completion (errors always do); as on a reliable
  /// connection, completions come in posting order, so the completion of a
  /// later signaled request says every earlier one finished.  An unsignaled
  /// request keeps its send-queue entry until such a completion was
  /// polled: signal one now and then.  Caller: the owner.
  virtual caf::error post_send(uint64_t wr_id, const sge* sg, size_t n,
                               std::optional<uint32_t> imm = std::nullopt,
                               bool signaled = true)
      = 0;

  /// Posts an RDMA WRITE of `sg[0..n)` to `remote_addr` in the peer's
  /// registration `rkey`.  With `imm`, the write also consumes a receive on
  /// the peer (opcode recv_rdma_with_imm).  Caller: the owner.
  virtual caf::error post_write(uint64_t wr_id, const sge* sg, size_t n,
                                uint64_t remote_addr, uint32_t rkey,
                                std::optional<uint32_t> imm = std::nullopt,
                                bool signaled = true)
      = 0;

  /// Posts an RDMA READ from `remote_addr`/`rkey` into `sg[0..n)`.
  /// Caller: the owner.
  virtual caf::error post_read(uint64_t wr_id, const sge* sg, size_t n,
                               uint64_t remote_addr, uint32_t rkey)
      = 0;

  /// Posts an atomic `op` on the 8-byte word at `remote_addr` (8-byte
  /// aligned) in the peer's registration `rkey`, which needs
  /// `access::remote_atomic`; the word's value before the operation lands
  /// in `local` (8 bytes of memory registered with local_write), as verbs
  /// does, in host byte order.  The operation is atomic with respect to
  /// every other atomic that reaches the same word through the peer's
  /// device, not with respect to the peer's CPU or to RDMA WRITEs.  Always
  /// signaled.  A violation on the peer (rkey, bounds, access, alignment)
  /// completes it with `remote_access_error` (misalignment:
  /// `remote_operation_error`) and the queue pair enters the error state.
  /// Fails with `unsupported` where the device has no atomics (see
  /// `device::supports_atomics`), `invalid_argument` for a `local` that is
  /// not 8 bytes.  Caller: the owner.  The default implementation (fakes
  /// in tests) says `unsupported`.
  virtual caf::error post_atomic(uint64_t wr_id, const sge& local,
                                 uint64_t remote_addr, uint32_t rkey,
                                 atomic_op op, uint64_t compare_add,
                                 uint64_t swap) {
    static_cast<void>(wr_id);
    static_cast<void>(local);
    static_cast<void>(remote_addr);
    static_cast<void>(rkey);
    static_cast<void>(op);
    static_cast<void>(compare_add);
    static_cast<void>(swap);
    return make_error(errc::unsupported,
                      "this fabric's queue pairs have no atomic operations");
  }

  /// Moves up to `max` completions into `out`; returns how many.  Never
  /// blocks.  Caller: the owner.
  virtual size_t poll_cq(work_completion* out, size_t max) = 0;

  /// Returns a file descriptor that becomes readable when the CQ is armed
  /// and a completion arrives (completion channel / eventfd).  Any thread.
  virtual int cq_fd() const noexcept = 0;

  /// Requests one notification for the next completion of the kind
  /// `which` names (like `ibv_req_notify_cq`): `all`, or `receives` (a
  /// receive completion or any unsuccessful completion, not a successful
  /// send-queue one).  Arming for `all` while armed for `receives` widens
  /// the request.  After arming, poll once more: a completion that arrived
  /// before arming may not notify.  Caller: the owner.
  caf::error arm_cq(cq_events which = cq_events::all) {
    return do_arm_cq(which);
  }

  /// Consumes the notification that made `cq_fd()` readable (like
  /// `ibv_get_cq_event` + `ibv_ack_cq_events`).  Returns false when no
  /// notification was pending.  Caller: the poller thread.
  virtual bool ack_cq_event() = 0;

  /// Asks the fabric to call `fn` itself, on its own thread, for each
  /// notification of the armed CQ instead of making `cq_fd()` readable, so
  /// that the owner needs no poller thread between the CQ and itself.
  /// Both fabrics can: their shared per-device threads (soft: the event
  /// loops; verbs: the completion engine) call it.  Returns false when a
  /// fabric cannot (the owner then waits on `cq_fd()`).  `fn`
  /// must be quick and must not call into this queue pair (it may run with
  /// the fabric's locks held); it is never called after the destructor
  /// returned.  Call it once, before the first `arm_cq`.  Caller: the owner.
  virtual bool set_cq_notify(std::function<void()> fn) {
    static_cast<void>(fn);
    return false;
  }

  /// Tells the fabric that the owner polls the CQ continuously from now on
  /// (true) or waits for notifications (false).  A fabric that plays the
  /// NIC on host threads (soft) then does its receive work in `progress`,
  /// on the owner's thread, instead of on its own thread.  Default:
  /// ignored (a NIC needs no host thread).  Caller: the owner.
  virtual void set_polled(bool on) {
    static_cast<void>(on);
  }

  /// Holds the doorbell: work requests posted from now on wait in the
  /// queue pair, in order, until `ring_doorbell` hands them to the device
  /// together (soft: one `sendmsg` for all their frames; verbs: one chain
  /// of receives and one of sends).  The owner holds it while it handles
  /// a burst (an activation of its actor, one poll of the CQ) and rings
  /// before it waits for anything: held work makes no progress.  (Soft:
  /// an answer the fabric owes the peer, an ACK or a READ response, goes
  /// out when due and takes the held requests queued before it along.)
  /// Default: posts go to the device at once.  Caller: the owner.
  virtual void hold_doorbell() {}

  /// Hands the work requests posted since `hold_doorbell` to the device and
  /// posts directly again.  Fails (`qp_error`, `quota_exceeded`) when the
  /// device refuses the batch; the work requests from the refused one on
  /// never complete then, and the owner fails the connection.  Default:
  /// nothing held.  Caller: the owner.
  virtual caf::error ring_doorbell() {
    return {};
  }

  /// While polled: moves the fabric's work forward on the caller's thread
  /// (soft: reads the socket, executes inbound frames, writes answers);
  /// completions then show in `poll_cq`.  Never blocks.  Default: nothing
  /// to do.  Caller: the owner, before polling.
  virtual void progress() {}

  /// Moves the QP to the error state and disconnects; outstanding work
  /// completes with `work_request_flushed`.  Idempotent.  Any thread.
  virtual void close() = 0;

  /// Returns true once the QP is in the error state.  Any thread.
  virtual bool in_error() const noexcept = 0;

  /// Why the QP entered the error state, in words ("the peer closed the
  /// connection", "connection reset by peer", ...), for the errors of the
  /// work it flushed; empty while it runs, or where the fabric cannot
  /// tell (the default).  Any thread.
  virtual std::string failure_reason() const {
    return {};
  }

protected:
  /// Implements `arm_cq`.
  virtual caf::error do_arm_cq(cq_events which) = 0;
};

using queue_pair_ptr = std::unique_ptr<queue_pair>;

/// The receive buffers of a shared receive queue, managed above the fabric
/// (transport/shared_receives.hpp; opaque here).
class shared_receives;

/// A shared receive queue (`ibv_create_srq`): receives that every queue
/// pair created with it consumes, the oldest first, whichever connection a
/// message arrives on.  Its receive completions show in the CQ of the queue
/// pair that consumed them, with the `wr_id` posted here.  When it is
/// empty, a SEND waits as for a queue pair without a posted receive
/// (receiver not ready: the sender retries, soft buffers and waits, both
/// up to the RNR timeout).  A queue pair that enters the error state
/// leaves the receives it did not consume here for the others and
/// completes `srq_error_wr_id` instead.
class shared_receive_queue {
public:
  virtual ~shared_receive_queue() = default;

  /// Posts a receive with scatter list `sg[0..n)`.  Any thread.  Fails
  /// with `invalid_argument` for n > max_sge, `quota_exceeded` when
  /// `max_wr()` receives are posted.
  virtual caf::error post_recv(uint64_t wr_id, const sge* sg, size_t n) = 0;

  /// The most receives it holds at once.
  virtual uint32_t max_wr() const noexcept = 0;

  /// Arms the low watermark (`ibv_modify_srq` with IBV_SRQ_LIMIT): once
  /// fewer than `limit` receives are posted, the fabric calls `fn` once
  /// (re-arm by calling again).  `fn` may run with the fabric's locks held
  /// on any of its threads: it must only signal.  Returns false where the
  /// fabric cannot tell (the default).  Any thread.
  virtual bool set_low_watermark(uint32_t limit, std::function<void()> fn) {
    static_cast<void>(limit);
    static_cast<void>(fn);
    return false;
  }

  /// Who posts the buffers, and the bytes each receive holds: set once by
  /// that owner before the queue is shared (`device::share_receives`),
  /// read by each connection's link.
  void set_buffers(std::weak_ptr<shared_receives> owner,
                   uint32_t receive_bytes) noexcept {
    buffers_ = std::move(owner);
    receive_bytes_ = receive_bytes;
  }

  /// The owner `set_buffers` named; null once it is gone.
  std::shared_ptr<shared_receives> buffers() const noexcept {
    return buffers_.lock();
  }

  /// The bytes every posted receive holds.  A connection whose negotiated
  /// max message length is larger takes receives of its own instead.
  uint32_t receive_bytes() const noexcept {
    return receive_bytes_;
  }

private:
  std::weak_ptr<shared_receives> buffers_;
  uint32_t receive_bytes_ = 0;
};

using srq_ptr = std::shared_ptr<shared_receive_queue>;

/// The wr_id of the one completion (status `work_request_flushed`) with
/// which a queue pair that takes its receives from a shared receive queue
/// says it entered the error state: it has no receives of its own whose
/// flushing would say so.  Reserved: never post work with it.
constexpr uint64_t srq_error_wr_id = ~uint64_t{0};

/// A passive endpoint accepting connections on host:port.
class listener {
public:
  virtual ~listener() = default;

  /// Returns the bound port (useful after listening on port 0).
  virtual uint16_t port() const noexcept = 0;

  /// Waits up to `timeout` for the next peer that completes the handshake
  /// and returns its connected QP.  Peers that fail the handshake (garbage,
  /// wrong version) are logged and dropped; the wait continues.  Returns
  /// `connect_timeout` when the time runs out and `closed` after `close()`.
  /// Caller: one thread at a time (the node's acceptor).
  virtual caf::expected<queue_pair_ptr>
  accept(std::chrono::milliseconds timeout) = 0;

  /// Stops listening and wakes a blocked `accept`.  Idempotent, any thread.
  virtual void close() = 0;
};

/// An opened RDMA device with its protection domain.
///
/// Memory regions, listeners and queue pairs keep the device alive; it
/// is released when the last of them and the last `shared_ptr` go.
class device : public std::enable_shared_from_this<device> {
public:
  virtual ~device() = default;

  /// Returns "soft" or "verbs".
  virtual const char* kind() const noexcept = 0;

  /// Returns the device name ("soft0", "rxe0", "mlx5_0").
  virtual std::string name() const = 0;

  /// Whether polling a CQ of this device beats waiting for its event:
  /// true when completions are produced without host threads that a
  /// polling actor would spin past (a NIC; rxe, whose kernel work preempts
  /// user threads; soft, whose polling owner does the receive work itself
  /// in `progress`).  A fabric whose completions come from its own threads
  /// only should say false.  The `adaptive` completion mode polls only
  /// where this is true (see `effective_polling`).
  virtual bool polling_pays() const noexcept {
    return true;
  }

  /// Bytes one work request may move at most (verbs: the port's
  /// `max_msg_sz`, 8 MiB on rxe; soft: 2 GiB).  `link` splits larger RDMA
  /// WRITEs and READs into several work requests.
  virtual uint64_t max_wr_bytes() const noexcept {
    return uint64_t{1} << 31;
  }

  /// Whether queue pairs of this device execute `post_atomic` (verbs:
  /// `ibv_device_attr::atomic_cap` is not IBV_ATOMIC_NONE; soft: always).
  /// Where false, verbs also refuses registrations with
  /// `access::remote_atomic` (the memory pool drops that flag there).
  virtual bool supports_atomics() const noexcept {
    return false;
  }

  /// Registers `[addr, addr + length)` with `access` flags (see
  /// `rdmactor::transport::access`).  Any thread.
  virtual caf::expected<std::unique_ptr<memory_region>>
  register_memory(void* addr, size_t length, uint32_t access) = 0;

  /// Listens on `host:port` (port 0: any free port).  `offer` is what this
  /// side offers to every peer.
  virtual caf::expected<std::unique_ptr<listener>>
  listen(const std::string& host, uint16_t port, const conn_params& offer) = 0;

  /// Connects to `host:port` within `timeout`; blocks the calling thread.
  virtual caf::expected<queue_pair_ptr>
  connect(const std::string& host, uint16_t port, const conn_params& offer,
          std::chrono::milliseconds timeout)
      = 0;

  /// Creates a shared receive queue that holds up to `max_wr` receives.
  /// Fails with `unsupported` where the device has none (the default).
  /// Any thread.
  virtual caf::expected<srq_ptr> create_srq(uint32_t max_wr) {
    static_cast<void>(max_wr);
    return make_error(errc::unsupported,
                      std::string{"the "} + kind()
                          + " fabric has no shared receive queue; set "
                            "shared-receive-queue=false");
  }

  /// Queue pairs this device makes from now on (`connect`, `accept`) take
  /// their receives from `srq` (null: each its own again), unless their
  /// negotiated max message length exceeds its `receive_bytes()`.  The device
  /// holds it weakly: its owner (`shared_receives`) and the queue pairs
  /// made with it keep it.  Any thread.
  void share_receives(const srq_ptr& srq) {
    std::lock_guard<std::mutex> guard{shared_mtx_};
    srq_ = srq;
  }

  /// The shared receive queue new queue pairs take their receives from;
  /// null when each has its own.  Any thread.
  srq_ptr srq() const {
    std::lock_guard<std::mutex> guard{shared_mtx_};
    return srq_.lock();
  }

  /// Returns the bytes registered on this device right now: the sum of the
  /// lengths of its live memory regions (the node's arenas, every
  /// connection's receive buffers and header slots).  Any thread.
  uint64_t registered_bytes() const noexcept {
    return registered_bytes_.load(std::memory_order_relaxed);
  }

  /// Returns the number of live memory regions.  Any thread.
  uint64_t registrations() const noexcept {
    return registrations_.load(std::memory_order_relaxed);
  }

  /// Counts a memory region of `length` bytes in (`+1`) or out (`-1`).
  /// Caller: the fabric, when it makes a region and in the region's
  /// destructor; nobody else.
  void count_registration(size_t length, int sign) noexcept {
    if (sign > 0) {
      registered_bytes_.fetch_add(length, std::memory_order_relaxed);
      registrations_.fetch_add(1, std::memory_order_relaxed);
    } else {
      registered_bytes_.fetch_sub(length, std::memory_order_relaxed);
      registrations_.fetch_sub(1, std::memory_order_relaxed);
    }
  }

private:
  std::atomic<uint64_t> registered_bytes_{0};
  std::atomic<uint64_t> registrations_{0};
  mutable std::mutex shared_mtx_;
  std::weak_ptr<shared_receive_queue> srq_;
};

using device_ptr = std::shared_ptr<device>;

/// Opens the fabric that `opts.fabric` names ("soft", "verbs", or "auto":
/// verbs when an RDMA device is present, else soft).
caf::expected<device_ptr> open_device(const options& opts);

/// Gives `dev` a shared receive queue whose buffers (of
/// `receive_buffer_bytes(opts)`, `opts.srq_chunk_receives` registered at a
/// time, up to `opts.srq_max_receives`) every queue pair it makes from now
/// on takes its receives from.  Hold the result while the device makes
/// connections (the device holds the queue weakly).  Fails where the
/// device has no shared receive queue or registering fails.
caf::expected<std::shared_ptr<shared_receives>>
share_receives(const device_ptr& dev, const options& opts);

/// Splits "HOST:PORT" (IPv6 as "[::1]:7471"); `invalid_address` otherwise.
caf::expected<std::pair<std::string, uint16_t>>
parse_address(const std::string& host_port);

} // namespace rdmactor::transport
