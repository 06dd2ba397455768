// The fixture of the link tests (link_test.cpp, link_signaling_test.cpp):
// a link on the fake queue pair of test/support/fake_fabric.hpp, with the test
// playing the peer and the owner.

#pragma once

#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "common/tuning.hpp"
#include "rdmactor/error.hpp"
#include "test/support/fake_fabric.hpp"
#include "transport/credit_ledger.hpp"
#include "transport/link.hpp"

using namespace rdmactor;
using namespace rdmactor::transport;
using rdmactor::fuzz::counting_queue_pair;
using rdmactor::fuzz::fake_device;
using rdmactor::fuzz::fake_link;
using rdmactor::fuzz::fake_queue_pair;

namespace {

constexpr uint32_t credit_only = credit_ledger::credit_only_bit;

/// Records what the link reports.
struct recorder : link_observer {
  struct done {
    uint64_t cookie;
    caf::expected<uint64_t> result;
  };

  void on_done(uint64_t cookie, caf::expected<uint64_t> result) override {
    dones.push_back(done{cookie, std::move(result)});
  }

  void on_message(local_mr msg) override {
    messages.push_back(std::move(msg));
  }

  void on_down(const caf::error& cause) override {
    downs.push_back(cause);
  }

  void on_imm(uint32_t imm, uint32_t bytes) override {
    imms.emplace_back(imm, bytes);
  }

  std::vector<std::pair<uint32_t, uint32_t>> imms;

  std::vector<done> dones;
  std::vector<local_mr> messages;
  std::vector<caf::error> downs;
};

/// Memory registered with the fake device, viewed as a `local_mr`.
struct buffer {
  buffer(fake_device& dev, size_t len, uint32_t access = access::local_write)
      : bytes(len) {
    std::iota(bytes.begin(), bytes.end(), uint8_t{1});
    reg = std::move(*dev.register_memory(bytes.data(), len, access));
  }

  local_mr view() {
    return local_mr{std::make_shared<mr_block>(bytes.data(), bytes.size(),
                                               reg->lkey(), reg->rkey(),
                                               mr_block::release_fn{})};
  }

  std::vector<uint8_t> bytes;
  std::unique_ptr<memory_region> reg;
};

struct fixture {
  explicit fixture(uint32_t recv_depth = 8, uint32_t max_len = 4096,
                   uint64_t max_wr_bytes = uint64_t{1} << 31) {
    dev->max_wr = max_wr_bytes;
    conn_params cp;
    cp.recv_depth = recv_depth;
    cp.max_message_len_bytes = max_len;
    peer = std::make_shared<fake_link>(dev->registry, cp);
    qp = std::make_shared<counting_queue_pair>(peer);
    auto opened = transport::link::open(dev, qp);
    BOOST_REQUIRE(opened);
    l = std::move(*opened);
    l->set_observer(&rec);
  }

  /// A SEND from the peer with `imm` and `len` bytes of payload.
  bool deliver(uint32_t imm, size_t len = 16) {
    std::vector<uint8_t> data(len, 0xab);
    return peer->deliver(data.data(), data.size(), imm);
  }

  /// Polls until the CQ stays empty (a completion may post more work,
  /// whose own completions the fake queues at once).
  void settle() {
    while (l->poll() > 0) {
    }
  }

  /// The peer reads our sends from index `seen` on: returns the credits
  /// their immediate values report and moves `seen` past them.
  uint64_t learn_credits(size_t& seen) {
    uint64_t credits = 0;
    for (; seen < peer->sent.size(); ++seen)
      credits += peer->sent[seen].imm.value_or(0) & credit_ledger::credit_mask;
    return credits;
  }

  /// The owner answers every message delivered so far with a SEND and lets
  /// their buffers go (the receives are reposted).
  void answer_all() {
    auto msgs = std::move(rec.messages);
    rec.messages.clear();
    for (size_t i = 0; i < msgs.size(); ++i)
      send(0);
    msgs.clear();
    l->reclaim();
  }

  /// Submits a SEND of a header of `header_len` bytes.
  void send(uint64_t cookie, size_t header_len = 8) {
    l->submit(op_kind::send, std::vector<uint8_t>(header_len, 7), local_mr{},
              mr_token{}, cookie);
  }

  std::shared_ptr<fake_device> dev = std::make_shared<fake_device>();
  std::shared_ptr<fake_link> peer;
  std::shared_ptr<counting_queue_pair> qp;
  std::unique_ptr<transport::link> l;
  recorder rec;
};

errc code(const caf::expected<uint64_t>& x) {
  return x ? errc::none : code_of(x.error());
}

} // namespace
