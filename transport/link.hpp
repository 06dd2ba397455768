#pragma once

// The data path of one connection without actors: the queue pair, the
// credit rules, the receive pool, the send queue, the operations in flight
// and which of them are signaled.  Its owner (the agent, or the transport
// actor for a raw link; scheduling/link_driver.hpp decides when to `poll`
// and when to `arm`) calls it from its activations.  Unit tests
// drive a link directly on a fake queue pair (test/transport/link_test.cpp).

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include "common/ring_deque.hpp"
#include "rdmactor/local_mr.hpp"
#include "rdmactor/mr_token.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "transport/credit_ledger.hpp"

namespace rdmactor::transport {

namespace detail {
struct recv_pool;
} // namespace detail

/// What a link posts.
enum class op_kind : uint8_t { send, write, read, fetch_add, compare_swap };

/// True for the atomic kinds.
constexpr bool is_atomic(op_kind k) noexcept {
  return k == op_kind::fetch_add || k == op_kind::compare_swap;
}

/// "send", "RDMA write", "RDMA read", "atomic fetch-and-add" or "atomic
/// compare-and-swap", for error messages.
const char* to_string(op_kind k);

/// Receives what a link reports.  Every call happens on the owner's
/// thread, from inside a call into the link (`submit`, `poll`, `reclaim`,
/// `arm`, `fail`); an observer may call the link again only through
/// `submit` (it is reentrant) and `pause`, and must not destroy it.
class link_observer {
public:
  virtual ~link_observer() = default;

  /// The operation submitted with `cookie` (never 0) finished: the bytes it
  /// moved (header plus payload; an atomic: the word's old value), or why
  /// it failed.  Exactly once per
  /// cookie, also when the link goes down (`work_request_flushed`).
  virtual void on_done(uint64_t cookie, caf::expected<uint64_t> result) = 0;

  /// A message arrived.  `msg` views its receive buffer, which is reposted
  /// once the last handle of it is gone (on whichever thread drops it).
  virtual void on_message(local_mr msg) = 0;

  /// An RDMA WRITE with immediate data from the peer finished: `imm` is the
  /// peer's value, `bytes` the length of the write (its data is in place).
  /// It came in order with the messages (`on_message`) around it.  Its
  /// receive was reposted already.  The default drops it.
  virtual void on_imm(uint32_t imm, uint32_t bytes) {
    static_cast<void>(imm);
    static_cast<void>(bytes);
  }

  /// The link is down with `cause`; once, after every outstanding cookie
  /// was answered.
  virtual void on_down(const caf::error& cause) = 0;
};

/// The data path of one reliable connected queue pair.
///
/// Single-threaded: one owner calls every member function (the transport
/// actor, or a test), except that receive buffers are released from any
/// thread (see `set_wake`).  The link keeps every operation it posted, and
/// the memory the operation names registered, until its completion or
/// until the link is destroyed; destroying it closes the queue pair.
///
/// Credits: a message needs one of the peer's receive buffers.  The
/// `credit_ledger` counts them; returned credits ride on the immediate
/// value of a SEND, or on a credit-only SEND when nothing else goes.  An
/// RDMA WRITE with immediate data consumes a receive too, so it takes a
/// credit like a data SEND (it carries the application's value, not
/// credits); the receiving link tells them apart by the completion's
/// opcode and reposts its receive at once.
/// Signaling: only every `signal_every()`-th operation, the last of a
/// batch and every READ ask for a completion; completions come in posting
/// order, so one finishes every unsignaled operation before it.
class link {
public:
  /// Opens the data path of `qp`: registers and posts every receive buffer
  /// (so the peer's first messages find one) and the send-header slots.
  /// Called once, on any thread, before anything is submitted.  Fails when
  /// the negotiated receive depth is below `min_recv_depth` or the
  /// registration fails.
  static caf::expected<std::unique_ptr<link>>
  open(device_ptr dev, std::shared_ptr<queue_pair> qp);

  /// Closes the queue pair.  Operations still in flight complete no more;
  /// their memory is released with the link.
  ~link();

  link(const link&) = delete;
  link& operator=(const link&) = delete;

  /// Sets who hears of completions, messages and the failure.  Before the
  /// first `poll`; `obs` outlives the link.
  void set_observer(link_observer* obs) noexcept {
    observer_ = obs;
  }

  /// Sets what asks the owner to call `reclaim` after a receive buffer was
  /// released on another thread.  Called on the releasing thread, at most
  /// once per `reclaim`; set before the first `poll`.
  void set_wake(std::function<void()> fn);

  /// Queues an operation and posts what credits and the send queue allow.
  /// `cookie` names it in `on_done`; 0 means nobody waits (a post): then a
  /// refusal fails the link, so that it cannot vanish.  A send carries
  /// `header` (copied into a registered slot) and then `local`; a write or
  /// read moves `local` to or from `remote`.  A write with `imm` is an
  /// RDMA WRITE with immediate data: it waits for a send credit like a
  /// send and is never split (at most `max_wr_bytes` of the device, else
  /// refused with `invalid_argument`).  On a link that is down the
  /// cookie is answered with the failure at once.  A send nobody waits
  /// for (cookie 0) while `tuning::max_queued_posts` of them wait fails
  /// the link with `quota_exceeded`: the peer returns too few credits.
  /// A `quiet` send (cookie 0) is upkeep: its completion is not counted by
  /// `poll` (see `mark_quiet`).
  void submit(op_kind kind, std::vector<uint8_t> header, local_mr local,
              mr_token remote, uint64_t cookie,
              std::optional<uint32_t> imm = std::nullopt, bool quiet = false);

  /// Packs sends from now on: the peer takes several frames in one message
  /// of at most `max_bytes` (its receive size), each but the last marked
  /// by `mark_more` (given the first byte of the send's header, at least 4
  /// bytes).  A run of sends nobody waits for (cookie 0, not quiet, no
  /// immediate value, header of 4 bytes or more, header and payload
  /// within `tuning::pack_frame_max_bytes`) that queue up back to back
  /// are copied into one registered buffer and go as one signaled SEND:
  /// one receive and one credit of the peer's for the run.  While posts
  /// are held such sends wait in the queue for the rest of the burst
  /// (`flush_posts`, `ring_held`, or a full buffer post them); a lone one
  /// goes as before, zero copy.
  void pack_sends(size_t max_bytes, void (*mark_more)(uint8_t*));

  /// Messages that went packed, and the sends they carried (for tests and
  /// statistics).
  uint64_t packed_messages() const noexcept {
    return packed_messages_;
  }
  uint64_t packed_sends() const noexcept {
    return packed_sends_;
  }

  /// An empty buffer for the next send's `header`: one whose bytes an
  /// earlier send copied into its registered slot (capacity kept), so that
  /// a steady stream of sends allocates no headers; a new one while none
  /// is spare.  At most `tuning::spare_header_buffers` are kept.
  std::vector<uint8_t> take_header_buffer();

  /// Received messages whose buffers are still held: handles alive (a
  /// user's zero-copy chunk, the message being handled), not yet released
  /// for reposting.  Any thread may release one meanwhile: a snapshot.
  uint32_t receive_buffers_held() const noexcept;

  /// Queues an atomic `kind` (fetch_add or compare_swap) on the 8-byte word
  /// `remote` names (len 8, addr 8-byte aligned: the caller checked; a
  /// violation is refused with `misaligned` / `out_of_bounds`).  The old
  /// value lands in a registered slot of the link and answers `cookie`
  /// (never 0).  A device without atomics is refused with `unsupported`.
  /// Like a READ, an atomic is always signaled; pending ones are flushed
  /// like every other operation when the link goes down.
  void submit_atomic(op_kind kind, mr_token remote, uint64_t compare_add,
                     uint64_t swap, uint64_t cookie);

  /// Handles every completion the CQ holds; returns how many, less the
  /// quiet ones (see `mark_quiet`).  While the owner polls (`set_polled`),
  /// it first lets the fabric make progress on this thread
  /// (`queue_pair::progress`).  Called from inside a running
  /// poll (a completion's handler that posts and polls, e.g. event mode's
  /// `link_driver::requested`), it handles nothing and returns 0: the
  /// running poll looks at the CQ once more before it ends.
  size_t poll();
  /// Says that the message being handled (called by the observer, from
  /// `on_message`) is upkeep, not traffic: a keepalive Ping or Pong.
  /// `poll` does not count it, so its owner does not keep polling for it
  /// (link_driver.hpp: an idle connection's keepalive starts no adaptive
  /// polling tail).  Sends of upkeep: `submit(..., quiet)`.
  void mark_quiet() noexcept {
    if (polling_)
      ++quiet_;
  }

  /// Ends the running `poll` after the completion being handled (called
  /// by the observer, from inside it): the owner's turn ends, e.g. to let
  /// the actors that took delivered messages run.  Completions the CQ
  /// already gave up wait in the link and come first at the next `poll`;
  /// `paused` tells the owner to poll again instead of arming.
  void pause() noexcept {
    paused_ = true;
  }
  /// The last `poll` ended early (`pause`).
  bool paused() const noexcept {
    return paused_;
  }

  /// The owner polls from now on (true) or waits for the CQ's notification
  /// (false); passed to the queue pair (`queue_pair::set_polled`).  Switch
  /// off before arming's last poll.
  void set_polled(bool on);

  /// Holds what this link posts from now on (submits, credit-only sends,
  /// what `poll`'s completions let go) in the queue pair until `flush_posts`,
  /// which hands it to the device at once: a burst costs one doorbell (one
  /// `sendmsg` on the soft fabric), not one per operation.  The owner holds
  /// them while it handles a burst (an activation) and flushes before it
  /// waits for anything or hands the link over; `poll` holds and flushes
  /// on its own when the owner holds nothing.  Every
  /// `tuning::doorbell_batch` posts ring it on their own (and hold again),
  /// so that the peer starts on a long burst early.  Idempotent.
  void hold_posts();

  /// Hands what was posted since `hold_posts` to the device; posts go out
  /// at once again.  Idempotent.
  void flush_posts();

  /// Hands what was posted since `hold_posts` to the device now and keeps
  /// holding: for a requester that arms the CQ and polls once, whose
  /// operation must be on the device before that poll (a completion that
  /// came before the arming would not notify).  Nothing while not held.
  void ring_held();

  /// Posts are held (`hold_posts`).
  bool posts_held() const noexcept {
    return posts_held_;
  }

  /// Reposts the receive buffers released since the last call (and sends
  /// the credits they free when due); returns how many.  Before it returns
  /// it asks for a wake-up (`set_wake`) for when enough buffers are
  /// released for their credits to be due, i.e. for a credit-only message
  /// (`credit_ledger::credit_only_due`); sends carry fewer on their own.
  uint32_t reclaim();

  /// Arms the CQ's notification unless it is armed as needed (a system
  /// call on some fabrics, so never twice).  While nothing waits for a
  /// send-queue completion (no requester's operation in flight, nothing
  /// queued) it arms for receives only: completions of posts nobody waits
  /// for then wake nobody and are reaped at the next poll.  Call it again
  /// after a `submit` with a cookie when the owner will not poll on its own
  /// (it widens the arming then), and poll once after it: a completion that
  /// came before the arming does not notify.  A failure to arm fails the
  /// link.
  void arm();

  /// The armed notification fired (and so is no longer armed).
  void notified() noexcept {
    armed_ = armed_for::none;
  }

  /// Goes down with `cause`: answers every queued and posted operation
  /// with `work_request_flushed`, then tells the observer.  Idempotent.
  void fail(caf::error cause);

  /// The owner closes the connection gracefully (it posted the agent's
  /// Goodbye and waits for the peer to close its side): a failure from now
  /// on is the expected end, logged at debug level, not a warning.
  void set_closing() noexcept {
    closing_ = true;
  }

  // -- state, for the owner and for tests -------------------------------

  bool down() const noexcept {
    return down_;
  }

  /// Why the link is down; empty while it is up.
  const caf::error& failure() const noexcept {
    return failure_;
  }

  const link_params& params() const noexcept {
    return params_;
  }

  queue_pair& qp() noexcept {
    return *qp_;
  }

  /// Operations posted and not completed.
  size_t in_flight() const noexcept {
    return inflight_.size();
  }

  /// Operations posted and not completed, less the quiet ones (upkeep:
  /// `submit`'s `quiet`): the traffic a polling owner waits for.
  size_t traffic_in_flight() const noexcept {
    return inflight_.size() - quiet_in_flight_;
  }

  /// Operations waiting for a credit or a send-queue entry.
  size_t queued() const noexcept {
    return queue_.size();
  }

  /// Sends nobody waits for among them (posts: the agent's requests,
  /// replies and actor messages).
  size_t queued_posts() const noexcept {
    return queued_posts_;
  }

  /// What the CQ is armed for.
  enum class armed_for : uint8_t { none, receives, all };

  armed_for armed() const noexcept {
    return armed_;
  }

  /// Operations in flight whose requester waits for their completion.
  size_t waited() const noexcept {
    return waited_;
  }

  const credit_ledger& credits() const noexcept {
    return credits_;
  }

  /// Operations posted at most at once.
  uint32_t send_queue_depth() const noexcept {
    return send_queue_depth_;
  }

  /// An operation is signaled at least this often.
  uint32_t signal_every() const noexcept {
    return signal_every_;
  }

private:
  /// An operation waiting for a send credit or a free send-queue entry.
  struct queued_op {
    op_kind kind;
    std::vector<uint8_t> header;
    local_mr local;
    mr_token remote;
    uint64_t cookie;
    /// Bytes of this operation already posted as pieces of their own (an
    /// RDMA operation over `max_wr_bytes_`); its answer reports them too.
    uint64_t posted_before = 0;
    /// Atomics: the operands.
    uint64_t compare_add = 0;
    uint64_t swap = 0;
    /// Immediate data of an RDMA WRITE with immediate.
    std::optional<uint32_t> imm = std::nullopt;
    /// Counted in `queued_posts_` (a send nobody waits for).
    bool post = false;
    /// Upkeep (see `submit`): its completion is not counted by `poll`.
    bool quiet = false;
    /// Header plus payload bytes at submit, what it adds to the packable
    /// tail's bytes: the posts move the header and payload out of the op
    /// before `pop_queued`, which takes them off again.
    size_t frame_bytes = 0;

    /// Whether it consumes one of the peer's receives (needs a credit).
    bool consumes_recv() const noexcept {
      return kind == op_kind::send || imm.has_value();
    }
  };

  /// An operation posted to the QP, waiting for its completion (or for the
  /// completion of a later signaled one).
  struct inflight_op {
    uint64_t wr_id;
    op_kind kind;
    uint64_t bytes;
    local_mr keep_alive; // payload must stay registered until completion
    int32_t header_slot; // -1: none
    uint64_t cookie;
    int32_t atomic_slot = -1; // where an atomic's old value lands
    bool quiet = false;       // upkeep: see `submit`
    int32_t pack_slot = -1;   // the packed buffer it sent (pack_sends)
  };

  link(device_ptr dev, std::shared_ptr<queue_pair> qp);

  caf::error refusal(op_kind kind, const std::vector<uint8_t>& header,
                     const local_mr& local, const mr_token& remote,
                     bool with_imm) const;
  void answer(uint64_t cookie, caf::expected<uint64_t> result);
  bool next_signaled(bool must);
  bool split_head();
  bool next_can_follow() const;
  void try_post();
  /// Packing (link_pack.cpp): whether `op` may share a message; whether
  /// the head waits for more sends to pack with; posts a run from the head.
  bool packable(const queued_op& op) const noexcept;
  bool head_waits_for_company() const noexcept;
  bool head_packs() const noexcept;
  bool pack_buffer_free() const noexcept;
  void post_packed();
  bool make_pack_buffers();
  void count_queued_tail();
  void pop_queued();
  void maybe_return_credits();
  void post_recv_slot(uint32_t slot);
  uint32_t repost_released();
  void on_completion(const work_completion& wc);
  /// Rings the held doorbell every `tuning::doorbell_batch` posts.
  void count_held_post();
  /// Rings the held doorbell and holds it again.
  void ring_doorbell_held();
  size_t poll_held();
  void on_recv(const work_completion& wc);
  /// Gives the shared slot a receive completion names back to the shared
  /// queue when nobody counted it (a failed receive, one left unpolled);
  /// nothing for a connection's own slots or srq_error_wr_id.
  void recycle_shared(uint64_t recv_wr_id) noexcept;
  void finish(inflight_op& op, wc_status status);

  device_ptr dev_;
  std::shared_ptr<queue_pair> qp_;
  std::shared_ptr<detail::recv_pool> pool_;
  /// Received messages handed out (`on_recv`) whose slots were not drained
  /// back (`repost_released`) yet; `receive_buffers_held` subtracts the
  /// releases waiting in the ring.
  uint32_t handed_out_ = 0;
  /// Header slots, up to one per send-queue entry, registered in chunks of
  /// `tuning::header_slot_chunk` as sends need them (an idle connection
  /// registers one chunk: 8 KiB, not 32).  Default-initialized (not
  /// zero-filled): untouched pages cost no RSS until headers are written.
  struct header_chunk {
    std::unique_ptr<uint8_t[]> mem;
    std::unique_ptr<memory_region> reg;
  };
  std::vector<header_chunk> header_chunks_;
  uint32_t header_slots_made_ = 0;
  std::vector<int32_t> free_header_slots_;

  /// Header slots free now or yet to be made.
  size_t header_slots_available() const noexcept {
    return free_header_slots_.size() + (send_queue_depth_ - header_slots_made_);
  }

  /// Registers the next chunk of header slots; an error when registering
  /// fails or every slot is made.
  caf::error add_header_slots();

  /// Makes and registers the slots for the old values of atomics.
  caf::error open_atomics();

  /// Takes a free header slot, making more when none is free; -1 (and
  /// `err` set) when that fails.
  int32_t take_header_slot(caf::error& err);

  uint8_t* header_slot_ptr(int32_t slot) const noexcept {
    auto i = static_cast<uint32_t>(slot);
    return header_chunks_[i / tuning::header_slot_chunk].mem.get()
           + size_t{i % tuning::header_slot_chunk} * max_send_header_bytes;
  }

  uint32_t header_slot_lkey(int32_t slot) const noexcept {
    return header_chunks_[static_cast<uint32_t>(slot)
                          / tuning::header_slot_chunk]
        .reg->lkey();
  }
  /// Header buffers whose bytes went into a slot (`take_header_buffer`).
  std::vector<std::vector<uint8_t>> spare_headers_;
  /// One 8-byte slot per send-queue entry for the old values of atomics,
  /// registered with local_write (the device writes them).
  /// Old values of atomics, one slot per send-queue entry: made and
  /// registered by the first atomic (`open_atomics`).
  std::vector<uint64_t> atomic_mem_;
  std::unique_ptr<memory_region> atomic_reg_;
  std::vector<int32_t> free_atomic_slots_;
  link_params params_;
  uint32_t send_queue_depth_ = 0;
  /// Bytes one work request moves at most on this device.
  uint64_t max_wr_bytes_ = 0;
  uint32_t signal_every_ = 1;
  /// Unsignaled operations posted since the last signaled one.
  uint32_t unsignaled_run_ = 0;
  credit_ledger credits_;
  uint64_t next_wr_id_ = 1;
  /// Posted operations in posting order (= completion order).
  ring_deque<inflight_op> inflight_;
  ring_deque<queued_op> queue_;
  /// Sends in `queue_` nobody waits for (`tuning::max_queued_posts`).
  size_t queued_posts_ = 0;
  link_observer* observer_ = nullptr;
  caf::error failure_;
  /// Operations in `inflight_` with a cookie (see `waited`).
  size_t waited_ = 0;
  /// Quiet operations in `inflight_` (see `traffic_in_flight`).
  size_t quiet_in_flight_ = 0;
  bool down_ = false;
  /// See `set_closing`.
  bool closing_ = false;
  armed_for armed_ = armed_for::none;
  /// See `set_polled`.
  bool polled_ = false;
  /// See `pause`.
  bool paused_ = false;
  /// A `poll` runs (its completions' handlers run); `repoll_`: one from
  /// inside it asked for another look at the CQ.
  bool polling_ = false;
  bool repoll_ = false;
  /// Quiet completions the running `poll` handled (see `mark_quiet`).
  size_t quiet_ = 0;
  /// `hold_posts` without `flush_posts` since.
  bool posts_held_ = false;
  /// Posted behind the held doorbell since it last rang.
  size_t held_posts_ = 0;
  /// `ring_held` or `flush_posts` runs: held sends go now, packed or not.
  bool flushing_ = false;
  /// Packing (`pack_sends`): bytes of one packed message (0: off), how a
  /// frame is marked, the buffers (made at the first pack) and their
  /// registration, the packable sends at the queue's tail (back to back)
  /// and their bytes.
  size_t pack_bytes_ = 0;
  void (*mark_more_)(uint8_t*) = nullptr;
  std::unique_ptr<uint8_t[]> pack_mem_;
  std::unique_ptr<memory_region> pack_reg_;
  std::vector<int32_t> free_pack_slots_;
  size_t packable_tail_ = 0;
  size_t packable_tail_bytes_ = 0;
  uint64_t packed_messages_ = 0;
  uint64_t packed_sends_ = 0;
  /// Completions taken from the CQ and not yet handled (a paused poll),
  /// from `held_pos_` on.
  std::vector<work_completion> held_;
  size_t held_pos_ = 0;
};

} // namespace rdmactor::transport
