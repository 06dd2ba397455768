#include "transport/transport_actor.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <new>
#include <thread>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/error.hpp"
#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "transport/credit_ledger.hpp"
#include "transport/poller.hpp"

namespace rdmactor::transport {

namespace {

/// Receive work requests carry this bit in their wr_id.
constexpr uint64_t recv_wr_bit = uint64_t{1} << 63;

using tuning::cq_batch;
using tuning::max_queued_ops;
using tuning::slot_block_bytes;

static_assert(max_send_header_bytes % 64 == 0,
              "header slots stay cache-line aligned");

/// A bounded multi-producer, single-consumer queue of slot numbers
/// (Vyukov's array queue).  Producers: any thread dropping the last handle
/// of a received message; consumer: the transport actor.  It never holds
/// more than `capacity` items because a slot is released at most once per
/// posting and reposted only after the consumer took it.
class slot_ring {
public:
  explicit slot_ring(uint32_t min_capacity) {
    size_t cap = 1;
    while (cap < min_capacity)
      cap <<= 1;
    cells_.reset(new cell[cap]);
    for (size_t i = 0; i < cap; ++i)
      cells_[i].seq.store(i, std::memory_order_relaxed);
    mask_ = cap - 1;
  }

  /// Appends `value`.  Any thread.
  void push(uint32_t value) noexcept {
    auto pos = tail_.fetch_add(1, std::memory_order_relaxed);
    auto& c = cells_[pos & mask_];
    // The cell is free by construction (see above); wait out a consumer
    // that is just handing it back.
    while (c.seq.load(std::memory_order_acquire) != pos)
      std::this_thread::yield();
    c.value = value;
    c.seq.store(pos + 1, std::memory_order_release);
  }

  /// Takes the oldest item; false when empty.  The consumer only.
  bool pop(uint32_t& value) noexcept {
    auto& c = cells_[head_ & mask_];
    if (c.seq.load(std::memory_order_acquire) != head_ + 1)
      return false;
    value = c.value;
    c.seq.store(head_ + mask_ + 1, std::memory_order_release);
    ++head_;
    return true;
  }

private:
  struct cell {
    std::atomic<uint64_t> seq{0};
    uint32_t value = 0;
  };
  std::unique_ptr<cell[]> cells_;
  uint64_t mask_ = 0;
  alignas(64) std::atomic<uint64_t> tail_{0};
  alignas(64) uint64_t head_ = 0;
};

/// The registered receive buffers of one connection.  Shared by every
/// `local_mr` that views a received message, so the memory outlives the
/// transport actor when users keep such handles.
///
/// A received message is a `local_mr` whose block (and shared-pointer
/// control block) lives in storage preallocated for its slot: receiving
/// allocates nothing.  When the last handle goes, the slot goes into
/// `released`; the transport drains it and reposts.  A `repost_atom`
/// message wakes the transport only when it had drained the ring and asked
/// for a wake-up (`wake_armed`), not once per buffer.
struct recv_pool {
  struct alignas(64) block_storage {
    unsigned char bytes[slot_block_bytes];
  };

  std::unique_ptr<uint8_t[]> mem;
  std::unique_ptr<memory_region> reg;
  uint32_t slot_bytes = 0;
  uint32_t depth = 0;
  std::unique_ptr<block_storage[]> blocks;
  std::unique_ptr<slot_ring> released;
  std::atomic<bool> wake_armed{true};
  /// The transport actor; set before its first completion is polled (no
  /// slot is released before).
  caf::weak_actor_ptr owner;

  uint8_t* slot(uint32_t i) const {
    return mem.get() + size_t{i} * slot_bytes;
  }

  /// The scatter element that receives into slot `i`.
  sge slot_sge(uint32_t i) const {
    return sge{reinterpret_cast<uint64_t>(slot(i)), slot_bytes, reg->lkey()};
  }

  /// Hands slot `i` back for reposting.  Any thread.
  void release(uint32_t i) noexcept {
    released->push(i);
    if (wake_armed.exchange(false, std::memory_order_acq_rel))
      if (auto strong = owner.lock())
        caf::anon_send(caf::actor_cast<transport_actor>(strong),
                       repost_atom::value, i);
  }
};

/// Allocates the block of a received message in its slot's storage and
/// releases the slot when that storage is given back: after the last
/// handle went and the block was destroyed, so a reposted slot never meets
/// a block still being torn down.  Holds the pool alive until then.
template <class T>
struct slot_allocator {
  using value_type = T;

  std::shared_ptr<recv_pool> pool;
  uint32_t slot = 0;

  slot_allocator(std::shared_ptr<recv_pool> p, uint32_t i) noexcept
      : pool(std::move(p)), slot(i) {}

  template <class U>
  slot_allocator(const slot_allocator<U>& other) noexcept
      : pool(other.pool), slot(other.slot) {}

  T* allocate(size_t n) {
    if (n * sizeof(T) <= slot_block_bytes
        && alignof(T) <= alignof(recv_pool::block_storage))
      return reinterpret_cast<T*>(pool->blocks[slot].bytes);
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, size_t) noexcept {
    if (reinterpret_cast<unsigned char*>(p) != pool->blocks[slot].bytes)
      ::operator delete(p);
    pool->release(slot);
  }

  template <class U>
  bool operator==(const slot_allocator<U>& other) const noexcept {
    return pool == other.pool && slot == other.slot;
  }

  template <class U>
  bool operator!=(const slot_allocator<U>& other) const noexcept {
    return !(*this == other);
  }
};

enum class op_kind : uint8_t { send, write, read };

/// An operation waiting for a send credit or a free send-queue entry.
struct queued_op {
  op_kind kind;
  std::vector<uint8_t> header;
  local_mr local;
  mr_token remote;
  caf::typed_response_promise<uint64_t> rp;
};

/// An operation posted to the QP, waiting for its completion (or for the
/// completion of a later signaled one).
struct inflight_op {
  uint64_t wr_id;
  op_kind kind;
  uint64_t bytes;
  local_mr keep_alive; // payload must stay registered until completion
  int32_t header_slot; // -1: none
  caf::typed_response_promise<uint64_t> rp;
};

const char* to_string(op_kind k) {
  switch (k) {
    case op_kind::send:
      return "send";
    case op_kind::write:
      return "RDMA write";
    case op_kind::read:
      return "RDMA read";
  }
  return "operation";
}

struct transport_state {
  device_ptr dev;
  std::shared_ptr<queue_pair> qp;
  std::shared_ptr<recv_pool> pool;
  std::vector<uint8_t> header_mem;
  std::unique_ptr<memory_region> header_reg;
  std::vector<int32_t> free_header_slots;
  /// Only when the fabric cannot notify the actor itself (verbs).
  std::unique_ptr<cq_poller> poller;

  link_params params;
  uint32_t send_queue_depth = 0; // max posted sends/writes/reads
  credit_ledger credits; // the credit rules (transport/credit_ledger.hpp)
  uint64_t next_wr_id = 1;
  /// Posted operations in posting order (= completion order).
  std::deque<inflight_op> inflight;
  /// Signal at least every this many send-queue operations.
  uint32_t signal_every = 1;
  /// Unsignaled operations posted since the last signaled one.
  uint32_t unsignaled_run = 0;
  std::deque<queued_op> queue;

  /// How completions are awaited (see completion_mode.hpp).
  polling how;
  /// adaptive: the last completion or post; polling goes on for
  /// poll_budget_us after it.
  std::chrono::steady_clock::time_point last_activity;
  /// A `poll_atom` to ourselves is in the mailbox.
  bool poll_pending = false;
  /// The CQ is armed and its notification has not arrived yet.
  bool armed = false;

  /// The subscriber: held strongly, or weakly (`subscribe_weak_atom`).
  transport_subscriber subscriber;
  caf::weak_actor_ptr weak_subscriber;
  std::deque<local_mr> early; // arrived before anyone subscribed
  caf::error failure;
  bool down = false;

  static inline const char* name = "rdmactor.transport";

  ~transport_state() {
    // Stop the poller before the QP it polls goes away.
    poller.reset();
    if (qp)
      qp->close();
  }
};

using self_ptr = transport_actor::stateful_pointer<transport_state>;

/// The subscriber, if there is one and it still lives.
transport_subscriber subscriber_of(const transport_state& st) {
  if (st.subscriber)
    return st.subscriber;
  if (auto strong = st.weak_subscriber.lock())
    return caf::actor_cast<transport_subscriber>(std::move(strong));
  return transport_subscriber{};
}

void post_recv_slot(self_ptr self, uint32_t slot);
void try_post(self_ptr self);
void fail(self_ptr self, caf::error cause);

/// Decides whether the operation about to be posted is signaled and counts
/// the run of unsignaled ones.  Signaling every `signal_every`-th keeps the
/// unsignaled entries far below the send-queue depth, so a completion that
/// frees them always comes.
bool next_signaled(transport_state& st, bool must) {
  bool signaled = must || st.unsignaled_run + 1 >= st.signal_every;
  st.unsignaled_run = signaled ? 0 : st.unsignaled_run + 1;
  return signaled;
}

/// Sends a credit-only message when enough receives were reposted since
/// the last report and nothing else is going to carry them.  Called after
/// every event that can make it true: a buffer reposted, a send completed,
/// credits arrived (a side that owed credits but had no credit to send them
/// with must report them once the peer's credits arrive, even with nothing
/// of its own queued: the peer may be waiting for exactly these).  The
/// message is unsignaled unless it ends a run of `signal_every`.
void maybe_return_credits(self_ptr self) {
  auto& st = self->state;
  if (st.down)
    return;
  // A queued send will carry the credits as soon as it can go.
  bool carried = !st.queue.empty() && st.queue.front().kind == op_kind::send
                 && st.credits.can_send_data();
  if (!st.credits.credit_only_due(carried,
                                  st.inflight.size() >= st.send_queue_depth))
    return;
  auto imm = st.credits.take_for_send(true);
  auto wr_id = st.next_wr_id++;
  auto signaled = next_signaled(st, false);
  if (auto err = st.qp->post_send(wr_id, nullptr, 0, imm, signaled)) {
    fail(self, std::move(err));
    return;
  }
  st.inflight.push_back(inflight_op{wr_id, op_kind::send, 0, local_mr{}, -1,
                                    caf::typed_response_promise<uint64_t>{}});
}

void post_recv_slot(self_ptr self, uint32_t slot) {
  auto& st = self->state;
  if (st.down)
    return;
  auto sg = st.pool->slot_sge(slot);
  if (auto err = st.qp->post_recv(recv_wr_bit | slot, &sg, 1))
    fail(self, std::move(err));
}

/// Reposts the receive buffers whose last handle went; returns how many.
uint32_t repost_released(self_ptr self) {
  auto& st = self->state;
  auto& pool = *st.pool;
  uint32_t n = 0;
  uint32_t slot = 0;
  auto drain = [&] {
    while (pool.released->pop(slot)) {
      if (slot >= pool.depth)
        continue; // cannot happen: slots come from our own blocks
      ++n;
      st.credits.on_reposted(true);
      post_recv_slot(self, slot);
    }
  };
  drain();
  // Ask for a wake-up, then look once more: a release between the last pop
  // and arming sent no message.  The exchange synchronizes with the
  // releasing thread's exchange, so its push is visible here.
  if (!pool.wake_armed.exchange(true, std::memory_order_acq_rel))
    drain();
  return n;
}

/// True when the operation after the queue's head could be posted right
/// after the head (so the head need not be signaled).
bool next_can_follow(const transport_state& st) {
  if (st.queue.size() < 2 || st.inflight.size() + 1 >= st.send_queue_depth)
    return false;
  const auto& head = st.queue[0];
  const auto& next = st.queue[1];
  if (next.kind != op_kind::send)
    return true;
  if (!st.credits.can_send_data(head.kind == op_kind::send ? 1 : 0))
    return false;
  auto slots_after
      = st.free_header_slots.size()
        - (head.kind == op_kind::send && !head.header.empty() ? 1 : 0);
  return next.header.empty() || slots_after > 0;
}

/// Posts the head of the queue while credits and send-queue entries last.
/// The last operation of a batch is signaled (its requester waits), the
/// ones before only every `signal_every`-th: one completion finishes every
/// operation posted before it.
void try_post(self_ptr self) {
  auto& st = self->state;
  while (!st.down && !st.queue.empty()
         && st.inflight.size() < st.send_queue_depth) {
    auto& op = st.queue.front();
    if (op.kind == op_kind::send) {
      // Keep one credit in reserve for credit-only messages.
      if (!st.credits.can_send_data()
          || (!op.header.empty() && st.free_header_slots.empty()))
        break;
    }
    auto signaled
        = next_signaled(st, op.kind == op_kind::read || !next_can_follow(st));
    auto wr_id = st.next_wr_id++;
    sge sg[2];
    size_t n = 0;
    int32_t slot = -1;
    caf::error err;
    if (op.kind == op_kind::send) {
      if (!op.header.empty()) {
        slot = st.free_header_slots.back();
        st.free_header_slots.pop_back();
        auto* dst = st.header_mem.data() + size_t(slot) * max_send_header_bytes;
        std::memcpy(dst, op.header.data(), op.header.size());
        sg[n++] = sge{reinterpret_cast<uint64_t>(dst),
                      static_cast<uint32_t>(op.header.size()),
                      st.header_reg->lkey()};
      }
      if (op.local.size() > 0)
        sg[n++] = op.local.to_sge();
      // A failed post fails the connection: the credit is not needed back.
      err = st.qp->post_send(wr_id, sg, n, st.credits.take_for_send(false),
                             signaled);
    } else {
      sg[n++] = op.local.to_sge();
      if (op.kind == op_kind::write)
        err = st.qp->post_write(wr_id, sg, n, op.remote.addr, op.remote.rkey,
                                std::nullopt, signaled);
      else
        err = st.qp->post_read(wr_id, sg, n, op.remote.addr, op.remote.rkey);
    }
    if (err) {
      if (slot >= 0)
        st.free_header_slots.push_back(slot);
      if (op.rp.pending())
        op.rp.deliver(err);
      st.queue.pop_front();
      fail(self, std::move(err));
      return;
    }
    uint64_t bytes = op.local.size() + op.header.size();
    st.inflight.push_back(inflight_op{
        wr_id, op.kind, bytes, std::move(op.local), slot, std::move(op.rp)});
    st.queue.pop_front();
  }
}

/// Answers every pending request with an error, tells the subscriber once
/// and quits.
void fail(self_ptr self, caf::error cause) {
  auto& st = self->state;
  if (st.down)
    return;
  st.down = true;
  st.failure = cause;
  if (code_of(cause) == errc::closed || cause.category() == caf::atom("exit"))
    log().debug("transport to {}: closed", st.params.peer);
  else
    log().warn("transport to {}: connection down: {}", st.params.peer,
               render(cause));
  auto flushed = make_error(errc::work_request_flushed,
                            "operation aborted: the connection to "
                                + st.params.peer + " failed: " + render(cause));
  // Answer now; the entries (and the memory they keep registered) stay
  // until the QP is closed with the state.
  for (auto& op : st.inflight)
    if (op.rp.pending())
      op.rp.deliver(flushed);
  for (auto& op : st.queue)
    if (op.rp.pending())
      op.rp.deliver(flushed);
  st.queue.clear();
  if (auto sub = subscriber_of(st))
    self->send(sub, qp_down_atom::value, cause);
  self->quit(cause);
}

void on_recv(self_ptr self, const work_completion& wc) {
  auto& st = self->state;
  auto slot = static_cast<uint32_t>(wc.wr_id & ~recv_wr_bit);
  if (slot >= st.pool->depth) {
    fail(self, make_error(errc::internal_error, "receive wr_id out of range"));
    return;
  }
  if (wc.has_imm && st.credits.on_received(wc.imm_data)) {
    // Credit-only: nothing to deliver; the receive goes back at once.
    st.credits.on_reposted(false);
    post_recv_slot(self, slot);
    try_post(self);
    // Credits that arrived may be what kept us from reporting ours.
    maybe_return_credits(self);
    return;
  }
  // View the receive buffer; its slot is released for reposting when the
  // last handle goes.  Block and control block live in the slot's storage.
  auto& pool = st.pool;
  auto len = std::min<uint32_t>(wc.byte_len, pool->slot_bytes);
  auto block = std::allocate_shared<mr_block>(
      slot_allocator<mr_block>{pool, slot}, pool->slot(slot), len,
      pool->reg->lkey(), pool->reg->rkey(), mr_block::release_fn{});
  local_mr msg{std::move(block)};
  if (!st.subscriber && !st.weak_subscriber)
    st.early.emplace_back(std::move(msg));
  else if (auto sub = subscriber_of(st))
    self->send(sub, recv_atom::value, std::move(msg));
  // else: the subscriber is gone; the buffer is reposted with `msg`.
  try_post(self);
  maybe_return_credits(self);
}

/// Finishes one posted operation with `status`.
void finish(self_ptr self, inflight_op& op, wc_status status) {
  auto& st = self->state;
  if (op.header_slot >= 0)
    st.free_header_slots.push_back(op.header_slot);
  if (status != wc_status::success) {
    auto err
        = make_error(to_errc(status), std::string{to_string(op.kind)} + " to "
                                          + st.params.peer + " completed with "
                                          + to_string(status));
    if (op.rp.pending())
      op.rp.deliver(err);
    fail(self, std::move(err));
    return;
  }
  if (op.rp.pending())
    op.rp.deliver(op.bytes);
}

void on_completion(self_ptr self, const work_completion& wc) {
  auto& st = self->state;
  if (wc.wr_id & recv_wr_bit) {
    if (wc.status != wc_status::success) {
      fail(self, make_error(to_errc(wc.status),
                            std::string{"receive completed with "}
                                + to_string(wc.status)
                                + " on the connection to " + st.params.peer));
      return;
    }
    on_recv(self, wc);
    return;
  }
  if (st.down)
    return; // answered already (failure path)
  // wr_ids are handed out in posting order without gaps while the
  // connection is up, so one in the deque's range is in the deque.
  if (st.inflight.empty() || wc.wr_id < st.inflight.front().wr_id
      || wc.wr_id > st.inflight.back().wr_id)
    return;
  // Completions come in posting order: every unsignaled operation posted
  // before this one finished successfully.
  while (st.inflight.front().wr_id != wc.wr_id) {
    auto op = std::move(st.inflight.front());
    st.inflight.pop_front();
    finish(self, op, wc_status::success);
  }
  auto op = std::move(st.inflight.front());
  st.inflight.pop_front();
  finish(self, op, wc.status);
  if (st.down)
    return;
  try_post(self);
  maybe_return_credits(self);
}

/// Polls the CQ until it is empty (or the connection failed); returns the
/// number of completions handled.
size_t poll_all(self_ptr self) {
  auto& st = self->state;
  work_completion wcs[cq_batch];
  size_t total = 0;
  while (!st.down) {
    auto n = st.qp->poll_cq(wcs, cq_batch);
    total += n;
    for (size_t i = 0; i < n && !st.down; ++i)
      on_completion(self, wcs[i]);
    if (n < cq_batch)
      break;
  }
  return total;
}

/// Sends ourselves the next poll unless one is in the mailbox already.
/// The message goes behind whatever else waits for this actor, and CAF
/// gives the worker to other actors after `scheduler.max-throughput`
/// messages, so polling never holds a worker for good.
void schedule_poll(self_ptr self) {
  auto& st = self->state;
  if (st.poll_pending || st.down)
    return;
  st.poll_pending = true;
  self->send(self, poll_atom::value);
}

/// Work was posted: in the polling modes, start polling now rather than
/// wait for the completion event (a thread hand-off, on verbs also a
/// system call to re-arm).
void on_posted(self_ptr self) {
  auto& st = self->state;
  if (st.how.mode == completion_mode::event || st.down)
    return;
  st.last_activity = std::chrono::steady_clock::now();
  schedule_poll(self);
}

/// True while the polling modes keep polling instead of arming the CQ.
bool keep_polling(const transport_state& st,
                  std::chrono::steady_clock::time_point now) {
  switch (st.how.mode) {
    case completion_mode::event:
      return false;
    case completion_mode::busy:
      return true;
    case completion_mode::adaptive:
      break;
  }
  return !st.inflight.empty()
         || now - st.last_activity
                < std::chrono::microseconds{st.how.poll_budget_us};
}

/// Handles every completion there is, then either polls again later (see
/// `keep_polling`) or arms the CQ so that the next completion wakes us.
void drain_cq(self_ptr self) {
  auto& st = self->state;
  if (!st.down && repost_released(self) > 0)
    maybe_return_credits(self);
  auto n = poll_all(self);
  if (st.down)
    return;
  if (st.how.mode != completion_mode::event) {
    auto now = std::chrono::steady_clock::now();
    if (n > 0)
      st.last_activity = now;
    if (keep_polling(st, now)) {
      // An empty poll offers the core to runnable threads (a fabric's own
      // thread, or workers when there are more threads than cores):
      // spinning past them is what makes polling slower than events on a
      // loaded machine.  On an idle core this returns at once.
      if (n == 0)
        std::this_thread::yield();
      schedule_poll(self);
      return;
    }
  }
  if (!st.armed) {
    if (auto err = st.qp->arm_cq()) {
      fail(self, std::move(err));
      return;
    }
    st.armed = true;
  }
  // Poll once more: a completion that arrived between the last poll and
  // arming would not notify.
  if (poll_all(self) > 0 && !st.down && st.how.mode != completion_mode::event) {
    st.last_activity = std::chrono::steady_clock::now();
    schedule_poll(self);
  }
}

/// Refuses an operation: answers its requester, or, for a post (no
/// requester), fails the connection, so that the refusal cannot vanish.
void refuse(self_ptr self, caf::typed_response_promise<uint64_t>& rp,
            caf::error err) {
  if (rp.pending()) {
    rp.deliver(std::move(err));
    return;
  }
  log().error("transport to {}: refused a post: {}", self->state.params.peer,
              render(err));
  fail(self, std::move(err));
}

/// Queues an operation and posts what it can.  `rp` is the requester's
/// promise, or empty for a post (nobody waits for the answer).
void enqueue(self_ptr self, caf::typed_response_promise<uint64_t> rp,
             op_kind kind, std::vector<uint8_t> header, local_mr local,
             mr_token remote) {
  auto& st = self->state;
  if (st.down) {
    if (rp.pending())
      rp.deliver(st.failure);
    return;
  }
  if (st.queue.size() >= max_queued_ops) {
    refuse(self, rp,
           make_error(errc::quota_exceeded,
                      "more than 2^20 operations wait for the connection "
                      "to "
                          + st.params.peer + "; wait for some to finish"));
    return;
  }
  auto limit = size_t{st.params.max_message_len_bytes};
  if (kind == op_kind::send) {
    if (header.size() > max_send_header_bytes) {
      refuse(self, rp,
             make_error(errc::invalid_argument,
                        "send header of " + std::to_string(header.size())
                            + " bytes exceeds max_send_header_bytes"));
      return;
    }
    if (header.size() + local.size() > limit) {
      refuse(self, rp,
             make_error(
                 errc::invalid_argument,
                 "message of " + std::to_string(header.size() + local.size())
                     + " bytes exceeds the negotiated max message length of "
                     + std::to_string(limit) + " bytes; split it or raise "
                     + "max-message-len-bytes on both sides"));
      return;
    }
  } else {
    if (!local.valid() || local.size() != remote.len) {
      refuse(self, rp,
             make_error(errc::length_mismatch,
                        std::string{to_string(kind)} + " of "
                            + std::to_string(local.size())
                            + " local bytes to a remote range of "
                            + std::to_string(remote.len) + " bytes"));
      return;
    }
    if (local.size() > (uint64_t{1} << 31)) {
      refuse(self, rp,
             make_error(errc::invalid_argument,
                        "one RDMA operation moves at most 2 GiB"));
      return;
    }
  }
  st.queue.push_back(
      queued_op{kind, std::move(header), std::move(local), remote, rp});
  try_post(self);
  on_posted(self);
}

/// Queues an operation for a requester and returns its promise.
caf::typed_response_promise<uint64_t> request_op(self_ptr self, op_kind kind,
                                                 std::vector<uint8_t> header,
                                                 local_mr local,
                                                 mr_token remote) {
  auto rp = self->make_response_promise<uint64_t>();
  enqueue(self, rp, kind, std::move(header), std::move(local), remote);
  return rp;
}

/// Flushes what arrived before the subscription to `sub` (already stored
/// in the state, strongly or weakly) and returns the link parameters.
link_params subscribe(self_ptr self, const transport_subscriber& sub) {
  auto& st = self->state;
  if (sub) {
    for (auto& msg : st.early)
      self->send(sub, recv_atom::value, std::move(msg));
    st.early.clear();
    if (st.down)
      self->send(sub, qp_down_atom::value, st.failure);
  }
  return st.params;
}

/// Creates the receive pool of `qp` and posts every receive, so that the
/// peer's first messages find buffers: called by `spawn_transport` on the
/// spawning thread, before the actor (and anything that lets our side
/// talk to the peer) exists.  The peer may send as soon as the connection
/// is established, slightly earlier; the RNR retries of the QP bridge that
/// gap, which is now only the time between `connect`/`accept` returning
/// and this call, not the time until a scheduler thread runs the actor.
caf::expected<std::shared_ptr<recv_pool>> make_recv_pool(device& dev,
                                                         queue_pair& qp) {
  const auto& cp = qp.params();
  if (cp.recv_depth < min_recv_depth)
    return make_error(
        errc::invalid_argument,
        "the connection to " + qp.peer_name() + " has a receive depth of "
            + std::to_string(cp.recv_depth) + "; rdmactor needs at least "
            + std::to_string(min_recv_depth)
            + " (set recv-depth >= 4 on both sides)");
  // recv_depth slots of max_message_len bytes, one registration, reposted
  // as consumers release them.
  auto pool = std::make_shared<recv_pool>();
  pool->slot_bytes = cp.max_message_len_bytes;
  pool->depth = cp.recv_depth;
  pool->mem.reset(new uint8_t[size_t{pool->slot_bytes} * pool->depth]);
  pool->blocks.reset(new recv_pool::block_storage[pool->depth]);
  pool->released = std::make_unique<slot_ring>(pool->depth);
  auto reg = dev.register_memory(pool->mem.get(),
                                 size_t{pool->slot_bytes} * pool->depth,
                                 access::local_write);
  if (!reg)
    return std::move(reg.error());
  pool->reg = std::move(*reg);
  for (uint32_t i = 0; i < pool->depth; ++i) {
    auto sg = pool->slot_sge(i);
    if (auto err = qp.post_recv(recv_wr_bit | i, &sg, 1))
      return err;
  }
  return pool;
}

transport_actor::behavior_type
transport_impl(self_ptr self, device_ptr dev, std::shared_ptr<queue_pair> qp,
               caf::expected<std::shared_ptr<recv_pool>> pool, polling how) {
  auto& st = self->state;
  st.how = how;
  if (how.mode != completion_mode::event
      && self->home_system().scheduler().max_throughput()
             == std::numeric_limits<size_t>::max()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log().warn("completion-mode={} needs a bounded scheduler.max-throughput "
                 "(a polling actor must give its worker back); it is "
                 "unbounded, so completions use completion-mode=event. Use "
                 "rdmactor::config or set scheduler.max-throughput (e.g. 8)",
                 to_string(how.mode));
    st.how.mode = completion_mode::event;
  }
  st.dev = std::move(dev);
  st.qp = std::move(qp);
  const auto& cp = st.qp->params();
  st.params = link_params_of(*st.qp);
  auto give_up = [&](const char* what, const caf::error& err) {
    log().error("transport to {}: cannot {}: {}", st.params.peer, what,
                render(err));
    st.down = true;
    self->quit(err);
    return transport_actor::behavior_type::make_empty_behavior();
  };
  if (!pool)
    return give_up("set up its receive buffers", pool.error());
  st.credits = credit_ledger{cp.recv_depth};
  st.send_queue_depth = tuning::send_queue_depth(cp.recv_depth);
  st.signal_every = tuning::signal_every(st.send_queue_depth);
  (*pool)->owner = caf::actor_cast<caf::weak_actor_ptr>(self);
  st.pool = std::move(*pool);
  // Header slots: one per send-queue entry.
  st.header_mem.resize(size_t{st.send_queue_depth} * max_send_header_bytes);
  auto hreg
      = st.dev->register_memory(st.header_mem.data(), st.header_mem.size(), 0);
  if (!hreg)
    return give_up("register its header buffers", hreg.error());
  st.header_reg = std::move(*hreg);
  for (auto i = static_cast<int32_t>(st.send_queue_depth); i > 0; --i)
    st.free_header_slots.push_back(i - 1);
  // Completion notifications: straight from the fabric's thread where it
  // can (soft: its event loop; verbs: the device's completion engine), else
  // a poller thread on the CQ's fd (a fabric without set_cq_notify).
  auto weak = caf::actor_cast<caf::weak_actor_ptr>(self);
  auto notify = [weak] {
    if (auto strong = weak.lock())
      caf::anon_send(caf::actor_cast<transport_actor>(strong),
                     cq_event_atom::value);
  };
  if (!st.qp->set_cq_notify(notify))
    st.poller = std::make_unique<cq_poller>(*st.qp, notify);
  // Arm now (busy: never); messages that arrived between posting the
  // receives (spawn_transport) and arming did not notify: look once.
  if (st.how.mode != completion_mode::busy) {
    if (auto err = st.qp->arm_cq())
      fail(self, std::move(err));
    else
      st.armed = true;
  }
  st.last_activity = std::chrono::steady_clock::now();
  schedule_poll(self);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    fail(self, msg.reason ? msg.reason
                          : make_error(errc::closed, "transport closed"));
  });
  return {
      [self](send_atom, std::vector<uint8_t>& header, local_mr& payload) {
        return request_op(self, op_kind::send, std::move(header),
                          std::move(payload), mr_token{});
      },
      [self](post_atom, std::vector<uint8_t>& header, local_mr& payload) {
        enqueue(self, caf::typed_response_promise<uint64_t>{}, op_kind::send,
                std::move(header), std::move(payload), mr_token{});
      },
      [self](write_atom, local_mr& src, mr_token dst) {
        return request_op(self, op_kind::write, {}, std::move(src), dst);
      },
      [self](read_atom, local_mr& dst, mr_token src) {
        return request_op(self, op_kind::read, {}, std::move(dst), src);
      },
      [self](subscribe_atom, transport_subscriber& sub) {
        self->state.weak_subscriber.reset();
        self->state.subscriber = sub;
        return subscribe(self, sub);
      },
      [self](subscribe_weak_atom, transport_subscriber& sub) {
        self->state.subscriber = transport_subscriber{};
        self->state.weak_subscriber = caf::actor_cast<caf::weak_actor_ptr>(sub);
        return subscribe(self, sub);
      },
      [self](cq_event_atom) {
        // The notification consumed the arming.
        self->state.armed = false;
        drain_cq(self);
      },
      [self](poll_atom) {
        self->state.poll_pending = false;
        drain_cq(self);
      },
      [self](repost_atom, uint32_t) {
        auto& st = self->state;
        if (st.down)
          return;
        if (repost_released(self) > 0)
          maybe_return_credits(self);
      },
  };
}

} // namespace

transport_actor spawn_transport(caf::actor_system& sys, device_ptr dev,
                                queue_pair_ptr qp, polling how) {
  std::shared_ptr<queue_pair> shared{std::move(qp)};
  auto pool = make_recv_pool(*dev, *shared);
  return sys.spawn(transport_impl, std::move(dev), std::move(shared),
                   std::move(pool), how);
}

} // namespace rdmactor::transport
