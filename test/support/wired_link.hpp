#pragma once

// The wire between two harnessed agents (agent_harness.hpp): what each
// side's fake link posted for the other, and a fake queue pair whose RDMA
// WRITEs and READs reach the peer's memory.

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <caf/error.hpp>

#include "rdmactor/transport/fabric.hpp"
#include "test/support/fake_fabric.hpp"

namespace rdmactor::test {

/// What one side of a wire posted for its peer, in posting order: a SEND
/// (`bytes`, `imm`) or the immediate value of an RDMA WRITE (`write_imm`).
struct wire_frame {
  std::vector<uint8_t> bytes;
  std::optional<uint32_t> imm;
  bool write_imm = false;
  uint32_t write_len = 0;
};

/// One end of a wire: its fake link, what it posted and the peer has not
/// received yet, and the registry that owns the memory it may reach.
struct wire_end {
  std::shared_ptr<fuzz::fake_link> link;
  std::deque<wire_frame> out;
  std::shared_ptr<fuzz::fake_registry> registry;
  /// The peer's end (set once both exist).
  wire_end* peer = nullptr;
  /// `link->polls` when the harness last woke the end's driver.
  uint64_t kicked_at = ~uint64_t{0};
  /// Whether completions arrived since the last wake-up.
  bool fresh = false;

  /// Moves the SENDs the link recorded to `out`, keeping posting order.
  void take_sent() {
    for (auto& m : link->sent)
      out.push_back(wire_frame{std::move(m.bytes), m.imm, false, 0});
    link->sent.clear();
  }
};

/// A fake queue pair whose RDMA WRITEs and READs reach the peer's memory
/// (one process: a token's address is a pointer), checked against the
/// peer's registry like a NIC would: a region that does not grant the
/// access completes the work request with `remote_access_error`.
class wired_queue_pair : public fuzz::fake_queue_pair {
public:
  wired_queue_pair(std::shared_ptr<wire_end> end, std::string peer)
      : fake_queue_pair(end->link), end_(std::move(end)),
        peer_(std::move(peer)) {}

  std::string peer_name() const override {
    return peer_;
  }

  caf::error post_write(uint64_t wr_id, const transport::sge* sg, size_t n,
                        uint64_t addr, uint32_t rkey,
                        std::optional<uint32_t> imm, bool signaled) override {
    auto& link = *end_->link;
    auto total = gathered(sg, n);
    if (!link.in_error()
        && !remote_ok(addr, rkey, total, transport::access::remote_write)) {
      link.fail_remote(wr_id, transport::wc_opcode::rdma_write);
      return {};
    }
    if (auto err = link.post_write(wr_id, sg, n, signaled, imm))
      return err;
    if (link.in_error())
      return {}; // the local gather list was refused
    auto* dst = reinterpret_cast<uint8_t*>(addr);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(dst, reinterpret_cast<const void*>(sg[i].addr), sg[i].length);
      dst += sg[i].length;
    }
    if (imm) {
      end_->take_sent();
      end_->out.push_back(
          wire_frame{{}, imm, true, static_cast<uint32_t>(total)});
    }
    return {};
  }

  caf::error post_read(uint64_t wr_id, const transport::sge* sg, size_t n,
                       uint64_t addr, uint32_t rkey) override {
    auto& link = *end_->link;
    auto total = gathered(sg, n);
    if (!link.in_error()
        && !remote_ok(addr, rkey, total, transport::access::remote_read)) {
      link.fail_remote(wr_id, transport::wc_opcode::rdma_read);
      return {};
    }
    if (auto err = link.post_read(wr_id, sg, n))
      return err;
    if (link.in_error())
      return {};
    auto* src = reinterpret_cast<const uint8_t*>(addr);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(reinterpret_cast<void*>(sg[i].addr), src, sg[i].length);
      src += sg[i].length;
    }
    return {};
  }

private:
  static uint64_t gathered(const transport::sge* sg, size_t n) {
    uint64_t total = 0;
    for (size_t i = 0; i < n; ++i)
      total += sg[i].length;
    return total;
  }

  bool remote_ok(uint64_t addr, uint32_t rkey, uint64_t len,
                 uint32_t needed) const {
    auto* peer = end_->peer;
    return peer != nullptr && peer->registry->covers(rkey, addr, len, needed);
  }

  std::shared_ptr<wire_end> end_;
  std::string peer_;
};

} // namespace rdmactor::test
