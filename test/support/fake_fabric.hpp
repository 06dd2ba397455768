#pragma once

// A deterministic in-memory fabric for the agent fuzz target: a device whose
// registrations are bookkeeping only and a queue pair that the fuzzer plays
// the peer of.  Everything runs on the fuzzer's thread; the CQ's fd never
// becomes readable (the harness wakes the transport actor itself).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <sys/eventfd.h>
#include <unistd.h>

#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::fuzz {

/// Registered ranges of the fake device, by key.
class fake_registry {
public:
  /// One registration.
  struct entry {
    uintptr_t addr = 0;
    size_t length = 0;
    uint32_t access = 0;
  };

  uint32_t add(void* addr, size_t length, uint32_t access) {
    std::lock_guard<std::mutex> guard{mtx_};
    auto key = next_key_++;
    entries_.emplace(key,
                     entry{reinterpret_cast<uintptr_t>(addr), length, access});
    return key;
  }

  void remove(uint32_t key) {
    std::lock_guard<std::mutex> guard{mtx_};
    entries_.erase(key);
  }

  /// Returns true when [addr, addr + len) lies in the registration `key`
  /// and that registration grants every bit of `needed`.
  bool covers(uint32_t key, uint64_t addr, uint64_t len,
              uint32_t needed) const {
    std::lock_guard<std::mutex> guard{mtx_};
    auto i = entries_.find(key);
    if (i == entries_.end() || (i->second.access & needed) != needed)
      return false;
    auto& e = i->second;
    return addr >= e.addr && len <= e.length && addr - e.addr <= e.length - len;
  }

  size_t size() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return entries_.size();
  }

  /// The key the next registration gets.
  uint32_t next_key() const {
    std::lock_guard<std::mutex> guard{mtx_};
    return next_key_;
  }

  /// Makes `key` the next key handed out, so that a run that starts from
  /// the same registrations sees the same keys (the fuzz target calls it
  /// before every input).  Returns false, changing nothing, when a live
  /// registration has `key` or a later one.
  bool rewind(uint32_t key) {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!entries_.empty() && entries_.rbegin()->first >= key)
      return false;
    next_key_ = key;
    return true;
  }

private:
  mutable std::mutex mtx_;
  uint32_t next_key_ = 0x100;
  std::map<uint32_t, entry> entries_;
};

/// A registration of the fake device: lkey == rkey == its registry key.
class fake_region : public transport::memory_region {
public:
  fake_region(std::shared_ptr<fake_registry> reg, void* addr, size_t length,
              uint32_t access)
      : fake_region(reg, reg->add(addr, length, access), addr, length, access) {
  }

  ~fake_region() override {
    reg_->remove(lkey());
  }

private:
  fake_region(std::shared_ptr<fake_registry> reg, uint32_t key, void* addr,
              size_t length, uint32_t access)
      : memory_region(addr, length, key, key, access), reg_(std::move(reg)) {}

  std::shared_ptr<fake_registry> reg_;
};

/// A device that registers memory in a `fake_registry` and cannot connect.
class fake_device : public transport::device {
public:
  const char* kind() const noexcept override {
    return "fake";
  }

  std::string name() const override {
    return "fake0";
  }

  caf::expected<std::unique_ptr<transport::memory_region>>
  register_memory(void* addr, size_t length, uint32_t access) override {
    if (addr == nullptr && length > 0)
      return make_error(errc::registration_failed, "null address");
    return std::unique_ptr<transport::memory_region>{
        new fake_region(registry, addr, length, access)};
  }

  caf::expected<std::unique_ptr<transport::listener>>
  listen(const std::string&, uint16_t, const transport::conn_params&) override {
    return make_error(errc::fabric_unavailable,
                      "the fake fabric cannot listen");
  }

  caf::expected<transport::queue_pair_ptr>
  connect(const std::string&, uint16_t, const transport::conn_params&,
          std::chrono::milliseconds) override {
    return make_error(errc::fabric_unavailable,
                      "the fake fabric cannot connect");
  }

  uint64_t max_wr_bytes() const noexcept override {
    return max_wr;
  }

  std::shared_ptr<fake_registry> registry = std::make_shared<fake_registry>();
  /// What `max_wr_bytes` reports (2 GiB, as the soft fabric).
  uint64_t max_wr = uint64_t{1} << 31;
};

/// One SEND the queue pair's owner posted, as the peer receives it.
struct sent_message {
  std::vector<uint8_t> bytes;
  std::optional<uint32_t> imm;
};

/// The state of a fake queue pair, shared between the queue pair (owned by
/// the transport actor) and the fuzzer, which plays the peer and outlives
/// the queue pair.
///
/// Posted SENDs, WRITEs and READs complete at once (READs fill their
/// destination with a pattern); their local gather lists are checked
/// against the registry like a NIC would (a violation completes with
/// `local_protection_error`, moves the QP to the error state and is
/// counted: the transport must never post unregistered memory).  `deliver`
/// places an inbound SEND in the oldest posted receive.
class fake_link {
public:
  fake_link(std::shared_ptr<fake_registry> reg, transport::conn_params params)
      : reg_(std::move(reg)), params_(params) {}

  // -- the queue pair's side -----------------------------------------------

  const transport::conn_params& params() const noexcept {
    return params_;
  }

  caf::error post_recv(uint64_t wr_id, const transport::sge* sg, size_t n) {
    if (auto err = check_post(n))
      return err;
    if (!local_ok(sg, n, transport::access::local_write)) {
      fail(wr_id, transport::wc_opcode::recv);
      return {};
    }
    recvs_.push_back(posted{wr_id, {sg, sg + n}});
    return {};
  }

  caf::error post_send(uint64_t wr_id, const transport::sge* sg, size_t n,
                       std::optional<uint32_t> imm, bool signaled) {
    if (auto err = check_post(n))
      return err;
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i)
      total += sg[i].length;
    if (total > params_.max_message_len_bytes)
      return make_error(errc::invalid_argument, "SEND over the maximum");
    if (!local_ok(sg, n, 0)) {
      fail(wr_id, transport::wc_opcode::send);
      return {};
    }
    sent_message msg;
    msg.imm = imm;
    for (size_t i = 0; i < n; ++i) {
      auto* p = reinterpret_cast<const uint8_t*>(sg[i].addr);
      msg.bytes.insert(msg.bytes.end(), p, p + sg[i].length);
    }
    sent.push_back(std::move(msg));
    if (signaled)
      complete(wr_id, transport::wc_opcode::send, total);
    return {};
  }

  caf::error post_write(uint64_t wr_id, const transport::sge* sg, size_t n,
                        bool signaled,
                        std::optional<uint32_t> imm = std::nullopt) {
    if (auto err = check_post(n))
      return err;
    if (imm)
      write_imms.push_back(*imm);
    if (!local_ok(sg, n, 0)) {
      fail(wr_id, transport::wc_opcode::rdma_write);
      return {};
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i)
      total += sg[i].length;
    one_sided_sizes.push_back(total);
    total = 0;
    for (size_t i = 0; i < n; ++i) {
      // Read the source like a NIC does.
      auto* p = reinterpret_cast<const uint8_t*>(sg[i].addr);
      for (uint32_t k = 0; k < sg[i].length; ++k)
        checksum_ += p[k];
      total += sg[i].length;
    }
    if (signaled)
      complete(wr_id, transport::wc_opcode::rdma_write, total);
    return {};
  }

  caf::error post_read(uint64_t wr_id, const transport::sge* sg, size_t n) {
    if (auto err = check_post(n))
      return err;
    if (!local_ok(sg, n, transport::access::local_write)) {
      fail(wr_id, transport::wc_opcode::rdma_read);
      return {};
    }
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      std::memset(reinterpret_cast<void*>(sg[i].addr), 0x5a, sg[i].length);
      total += sg[i].length;
    }
    one_sided_sizes.push_back(total);
    complete(wr_id, transport::wc_opcode::rdma_read, total);
    return {};
  }

  size_t poll_cq(transport::work_completion* out, size_t max) {
    ++polls;
    size_t n = 0;
    while (n < max && !cq_.empty()) {
      out[n++] = cq_.front();
      cq_.pop_front();
    }
    return n;
  }

  /// Enters the error state: every posted receive completes flushed.
  void close() {
    if (error_)
      return;
    error_ = true;
    for (auto& r : recvs_) {
      transport::work_completion wc;
      wc.wr_id = r.wr_id;
      wc.status = transport::wc_status::work_request_flushed;
      wc.opcode = transport::wc_opcode::recv;
      cq_.push_back(wc);
    }
    recvs_.clear();
  }

  bool in_error() const noexcept {
    return error_;
  }

  // -- the fuzzer's side ---------------------------------------------------

  /// Places `len` bytes in the oldest posted receive, with `imm`.  Returns
  /// false when no receive is posted (the SEND is dropped: the transport
  /// keeps the peer's credits honest, the fuzzer need not) or the QP is in
  /// the error state.  A message larger than the receive completes it with
  /// `local_length_error` and moves the QP to the error state.
  bool deliver(const uint8_t* data, size_t len, std::optional<uint32_t> imm) {
    if (error_ || recvs_.empty())
      return false;
    auto r = std::move(recvs_.front());
    recvs_.pop_front();
    size_t capacity = 0;
    for (auto& s : r.sges)
      capacity += s.length;
    transport::work_completion wc;
    wc.wr_id = r.wr_id;
    wc.opcode = transport::wc_opcode::recv;
    if (len > capacity) {
      wc.status = transport::wc_status::local_length_error;
      cq_.push_back(wc);
      close();
      return true;
    }
    size_t off = 0;
    for (auto& s : r.sges) {
      auto k = std::min<size_t>(s.length, len - off);
      if (k > 0)
        std::memcpy(reinterpret_cast<void*>(s.addr), data + off, k);
      off += k;
    }
    wc.byte_len = static_cast<uint32_t>(len);
    wc.has_imm = imm.has_value();
    wc.imm_data = imm.value_or(0);
    cq_.push_back(wc);
    return true;
  }

  /// The peer's RDMA WRITE with immediate `imm` of `len` bytes: consumes
  /// the oldest posted receive like a SEND (false when none is posted).
  bool deliver_write_imm(uint32_t imm, uint32_t len) {
    if (error_ || recvs_.empty())
      return false;
    auto r = std::move(recvs_.front());
    recvs_.pop_front();
    transport::work_completion wc;
    wc.wr_id = r.wr_id;
    wc.opcode = transport::wc_opcode::recv_rdma_with_imm;
    wc.byte_len = len;
    wc.has_imm = true;
    wc.imm_data = imm;
    cq_.push_back(wc);
    return true;
  }

  /// Completes `wr_id` with `remote_access_error` and enters the error
  /// state: what a NIC reports when the peer's registration does not
  /// cover a WRITE or READ (a harness that plays the peer's memory checks
  /// that itself).
  void fail_remote(uint64_t wr_id, transport::wc_opcode op) {
    transport::work_completion wc;
    wc.wr_id = wr_id;
    wc.opcode = op;
    wc.status = transport::wc_status::remote_access_error;
    cq_.push_back(wc);
    close();
  }

  bool has_completions() const noexcept {
    return !cq_.empty();
  }

  /// SENDs posted since the fuzzer last took them.
  std::vector<sent_message> sent;
  /// Bytes of each RDMA WRITE and READ posted, in order.
  std::vector<uint64_t> one_sided_sizes;
  /// Immediate data of each RDMA WRITE with immediate posted, in order.
  std::vector<uint32_t> write_imms;

  /// Work requests whose local memory was not registered as needed.
  uint64_t protection_errors = 0;

  /// Calls of `poll_cq` so far.
  uint64_t polls = 0;

private:
  struct posted {
    uint64_t wr_id;
    std::vector<transport::sge> sges;
  };

  caf::error check_post(size_t n) const {
    if (error_)
      return make_error(errc::qp_error, "fake QP in the error state");
    if (n > transport::max_sge)
      return make_error(errc::invalid_argument, "too many sges");
    return {};
  }

  bool local_ok(const transport::sge* sg, size_t n, uint32_t needed) {
    for (size_t i = 0; i < n; ++i) {
      if (sg[i].length == 0)
        continue;
      if (!reg_->covers(sg[i].lkey, sg[i].addr, sg[i].length, needed)) {
        ++protection_errors;
        return false;
      }
    }
    return true;
  }

  void complete(uint64_t wr_id, transport::wc_opcode op, uint64_t len) {
    transport::work_completion wc;
    wc.wr_id = wr_id;
    wc.opcode = op;
    wc.byte_len = static_cast<uint32_t>(len);
    cq_.push_back(wc);
  }

  void fail(uint64_t wr_id, transport::wc_opcode op) {
    transport::work_completion wc;
    wc.wr_id = wr_id;
    wc.opcode = op;
    wc.status = transport::wc_status::local_protection_error;
    cq_.push_back(wc);
    close();
  }

  std::shared_ptr<fake_registry> reg_;
  transport::conn_params params_;
  bool error_ = false;
  std::deque<posted> recvs_;
  std::deque<transport::work_completion> cq_;
  uint64_t checksum_ = 0;
};

/// The queue pair the transport actor owns: a shell around a `fake_link`.
/// Its CQ never notifies: it accepts the owner's notify callback (so that
/// the transport starts no poller thread, which would cost a thread per
/// input and make runs depend on timing) and never calls it, and its CQ fd
/// (an eventfd) never becomes readable; the harness drives every poll.
class fake_queue_pair : public transport::queue_pair {
public:
  explicit fake_queue_pair(std::shared_ptr<fake_link> link)
      : link_(std::move(link)),
        cq_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

  ~fake_queue_pair() override {
    link_->close();
    if (cq_fd_ >= 0)
      ::close(cq_fd_);
  }

  const transport::conn_params& params() const noexcept override {
    return link_->params();
  }

  std::string peer_name() const override {
    return "fuzzer";
  }

  caf::error post_recv(uint64_t wr_id, const transport::sge* sg,
                       size_t n) override {
    return link_->post_recv(wr_id, sg, n);
  }

  caf::error post_send(uint64_t wr_id, const transport::sge* sg, size_t n,
                       std::optional<uint32_t> imm, bool signaled) override {
    return link_->post_send(wr_id, sg, n, imm, signaled);
  }

  caf::error post_write(uint64_t wr_id, const transport::sge* sg, size_t n,
                        uint64_t, uint32_t, std::optional<uint32_t> imm,
                        bool signaled) override {
    return link_->post_write(wr_id, sg, n, signaled, imm);
  }

  caf::error post_read(uint64_t wr_id, const transport::sge* sg, size_t n,
                       uint64_t, uint32_t) override {
    return link_->post_read(wr_id, sg, n);
  }

  size_t poll_cq(transport::work_completion* out, size_t max) override {
    return link_->poll_cq(out, max);
  }

  int cq_fd() const noexcept override {
    return cq_fd_;
  }

  bool set_cq_notify(std::function<void()>) override {
    return true;
  }

protected:
  caf::error do_arm_cq(transport::cq_events) override {
    return {};
  }

public:
  bool ack_cq_event() override {
    return false;
  }

  void close() override {
    link_->close();
  }

  bool in_error() const noexcept override {
    return link_->in_error();
  }

private:
  std::shared_ptr<fake_link> link_;
  int cq_fd_;
};

/// A fake queue pair that records each arming of its CQ, and for what, and
/// its doorbell (unit tests of the link and its driver).  Posts still go
/// to the fake peer at once.
class counting_queue_pair : public fake_queue_pair {
public:
  using fake_queue_pair::fake_queue_pair;

  std::vector<transport::cq_events> arms;
  /// `hold_doorbell` and `ring_doorbell` calls.
  size_t holds = 0;
  size_t rings = 0;
  /// `rings` when each arming came (beside `arms`).
  std::vector<size_t> rings_at_arm;
  /// Sends, writes and reads posted while the doorbell was held.
  size_t posted_while_held = 0;

  void hold_doorbell() override {
    ++holds;
    held_ = true;
  }

  caf::error ring_doorbell() override {
    ++rings;
    held_ = false;
    return {};
  }

  caf::error post_send(uint64_t wr_id, const transport::sge* sg, size_t n,
                       std::optional<uint32_t> imm, bool signaled) override {
    count_post();
    return fake_queue_pair::post_send(wr_id, sg, n, imm, signaled);
  }

  caf::error post_write(uint64_t wr_id, const transport::sge* sg, size_t n,
                        uint64_t addr, uint32_t rkey,
                        std::optional<uint32_t> imm, bool signaled) override {
    count_post();
    return fake_queue_pair::post_write(wr_id, sg, n, addr, rkey, imm, signaled);
  }

  caf::error post_read(uint64_t wr_id, const transport::sge* sg, size_t n,
                       uint64_t addr, uint32_t rkey) override {
    count_post();
    return fake_queue_pair::post_read(wr_id, sg, n, addr, rkey);
  }

protected:
  caf::error do_arm_cq(transport::cq_events which) override {
    arms.push_back(which);
    rings_at_arm.push_back(rings);
    return {};
  }

private:
  void count_post() noexcept {
    if (held_)
      ++posted_while_held;
  }

  bool held_ = false;
};

} // namespace rdmactor::fuzz
