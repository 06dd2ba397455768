// Soft-fabric-only tests: the soft fabric's documented choices.

#include <boost/test/unit_test.hpp>

#include "test/transport/soft_fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Waits until `qp` holds `n` inbound requests for want of a posted
/// receive (they reached it: receiver not ready).
bool wait_waiting_for_receive(transport::queue_pair& qp, size_t n,
                              std::chrono::milliseconds t = 10s) {
  auto deadline = std::chrono::steady_clock::now() + t;
  while (soft::waiting_for_receive(qp) < n) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

} // namespace

// -- documented soft-fabric choices
// ---------------------------------------------

BOOST_AUTO_TEST_SUITE(semantics)

BOOST_AUTO_TEST_CASE(arm_with_queued_completions_signals_at_once) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  auto dst = make_buffer(*dev, 64, local_write);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  p.server->close(); // flushes the receive at once, in this thread
  BOOST_REQUIRE(!p.server->arm_cq());
  pollfd pfd{p.server->cq_fd(), POLLIN, 0};
  BOOST_TEST(::poll(&pfd, 1, 0) == 1);
  BOOST_TEST(p.server->ack_cq_event());
  work_completion wc;
  BOOST_TEST(p.server->poll_cq(&wc, 1) == 1u);
  BOOST_TEST(wc.status == wc_status::work_request_flushed);
}

BOOST_AUTO_TEST_CASE(close_right_after_a_receive_still_acknowledges_it) {
  // A NIC acknowledges a SEND no later than it shows the receive's
  // completion; a receiver that closes the moment it sees the completion
  // must not turn the sender's SEND into work_request_flushed (issue 19).
  auto dev = open_soft(soft_options());
  for (int i = 0; i < 200; ++i) {
    BOOST_TEST_CONTEXT("round " << i) {
      auto p = connect_pair(*dev);
      auto src = make_buffer(*dev, 64, 0);
      auto dst = make_buffer(*dev, 64, local_write);
      auto rsg = dst.whole();
      BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
      auto ssg = src.whole();
      BOOST_REQUIRE(!p.client->post_send(2, &ssg, 1));
      work_completion wc;
      auto deadline = std::chrono::steady_clock::now() + 10s;
      while (p.server->poll_cq(&wc, 1) == 0
             && std::chrono::steady_clock::now() < deadline) {
      }
      BOOST_REQUIRE(wc.wr_id == 1u);
      BOOST_REQUIRE(wc.status == wc_status::success);
      p.server->close();
      auto wcs = wait_completions(*p.client, 1, 10s);
      BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
      BOOST_REQUIRE(wcs[0].wr_id == 2u);
      BOOST_REQUIRE(wcs[0].status == wc_status::success);
    }
  }
}

BOOST_AUTO_TEST_CASE(too_long_message_is_remote_operation_error) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  auto src = make_buffer(*dev, 200, 0);
  auto dst = make_buffer(*dev, 100, local_write, 0x66);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(2, &sg, 1));
  auto swcs = wait_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(swcs.size(), 1u);
  BOOST_TEST(swcs[0].status == wc_status::remote_operation_error);
  BOOST_TEST(all_bytes(dst.data(), 100, 0x66));
}

BOOST_AUTO_TEST_CASE(bad_local_sge_is_local_protection_error) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  auto src = make_buffer(*dev, 100, 0);
  auto dst = make_buffer(*dev, 300, local_write);
  for (uint64_t i = 0; i < 3; ++i) {
    auto rsg = dst.sge_of(i * 100, 100);
    BOOST_REQUIRE(!p.server->post_recv(i, &rsg, 1));
  }
  auto good = src.whole();
  auto bad = src.whole();
  bad.lkey ^= 0x1234u;
  auto outside = src.sge_of(50, 100);
  BOOST_REQUIRE(!p.client->post_send(1, &good, 1));
  BOOST_REQUIRE(!p.client->post_send(2, &bad, 1)); // fails at completion
  // Fails at completion too, or at once when 2 already failed the QP.
  auto err3 = p.client->post_send(3, &outside, 1);
  BOOST_TEST((!err3 || code_of(err3) == errc::qp_error));
  size_t expected = err3 ? 2 : 3;
  auto swcs = wait_completions(*p.client, expected);
  BOOST_REQUIRE_EQUAL(swcs.size(), expected);
  BOOST_TEST(swcs[0].wr_id == 1u);
  BOOST_TEST(swcs[0].status == wc_status::success);
  BOOST_TEST(swcs[1].wr_id == 2u);
  BOOST_TEST(swcs[1].status == wc_status::local_protection_error);
  if (expected == 3)
    BOOST_TEST(swcs[2].status == wc_status::work_request_flushed);
  BOOST_TEST(p.client->in_error());
  auto rwcs = wait_completions(*p.server, 3);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 3u);
  BOOST_TEST(rwcs[0].status == wc_status::success);
  BOOST_TEST(count_status(rwcs, wc_status::work_request_flushed) == 2u);
}

BOOST_AUTO_TEST_CASE(read_into_memory_without_local_write) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  auto remote = make_buffer(*dev, 100, local_write | remote_read);
  auto readonly = make_buffer(*dev, 100, 0, 0x77);
  auto sg = readonly.whole();
  BOOST_REQUIRE(
      !p.client->post_read(1, &sg, 1, remote.addr(), remote.mr->rkey()));
  auto wcs = wait_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].status == wc_status::local_protection_error);
  BOOST_TEST(all_bytes(readonly.data(), 100, 0x77));
}

BOOST_AUTO_TEST_CASE(receive_without_local_write_fails_when_used) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  auto src = make_buffer(*dev, 50, 0);
  auto readonly = make_buffer(*dev, 100, 0, 0x77);
  auto rsg = readonly.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(2, &sg, 1));
  auto rwcs = wait_completions(*p.server, 1);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 1u);
  BOOST_TEST(rwcs[0].status == wc_status::local_protection_error);
  auto swcs = wait_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(swcs.size(), 1u);
  BOOST_TEST(swcs[0].status == wc_status::remote_operation_error);
  BOOST_TEST(all_bytes(readonly.data(), 100, 0x77));
}

BOOST_AUTO_TEST_CASE(lkey_is_no_rkey_and_zero_length_needs_no_rkey) {
  auto dev = open_soft(soft_options());
  auto src = make_buffer(*dev, 64, 0);
  auto rw = make_buffer(*dev, 64, local_write | remote_write, 0x12);
  {
    auto p = connect_pair(*dev);
    auto sg = src.sge_of(0, 0);
    BOOST_REQUIRE(!p.client->post_write(1, &sg, 1, 12345, 0xBADu));
    auto wcs = wait_completions(*p.client, 1);
    BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
    BOOST_TEST(wcs[0].status == wc_status::success);
    BOOST_REQUIRE(!p.client->post_read(2, &sg, 1, 12345, 0xBADu));
    wcs = wait_completions(*p.client, 1);
    BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
    BOOST_TEST(wcs[0].status == wc_status::success);
  }
  auto p = connect_pair(*dev);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_write(3, &sg, 1, rw.addr(), rw.mr->lkey()));
  auto wcs = wait_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].status == wc_status::remote_access_error);
  BOOST_TEST(all_bytes(rw.data(), 64, 0x12));
}

BOOST_AUTO_TEST_CASE(write_waits_behind_a_send_without_receive) {
  auto dev = open_soft(soft_options(5000));
  auto p = connect_pair(*dev);
  auto src = make_buffer(*dev, 4096, 0);
  fill_pattern(src.data(), 4096, 21);
  auto target = make_buffer(*dev, 4096, local_write | remote_write, 0);
  auto inbox = make_buffer(*dev, 4096, local_write);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(1, &sg, 1));
  BOOST_REQUIRE(
      !p.client->post_write(2, &sg, 1, target.addr(), target.mr->rkey()));
  BOOST_REQUIRE(wait_waiting_for_receive(*p.server, 2));
  // In order: the write has not run, the send waits for a receive.
  BOOST_TEST(all_bytes(target.data(), 4096, 0));
  BOOST_TEST(wait_completions(*p.client, 1, 10ms).empty());
  auto rsg = inbox.whole();
  BOOST_REQUIRE(!p.server->post_recv(3, &rsg, 1));
  auto swcs = wait_completions(*p.client, 2);
  BOOST_REQUIRE_EQUAL(swcs.size(), 2u);
  BOOST_TEST(swcs[0].wr_id == 1u);
  BOOST_TEST(swcs[1].wr_id == 2u);
  BOOST_TEST(count_status(swcs, wc_status::success) == 2u);
  BOOST_TEST(has_pattern(target.data(), 4096, 21));
  BOOST_TEST(has_pattern(inbox.data(), 4096, 21));
}

BOOST_AUTO_TEST_CASE(message_above_the_pending_budget_waits_for_a_receive) {
  auto dev = open_soft(soft_options(5000));
  conn_params offer{8u << 20, 4};
  auto p = connect_pair(*dev, offer);
  constexpr size_t n = 6u << 20;
  auto src = make_buffer(*dev, n, 0);
  fill_pattern(src.data(), n, 31);
  auto dst = make_buffer(*dev, n, local_write);
  auto small = make_buffer(*dev, 64, local_write);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(1, &sg, 1));
  auto ssg = src.sge_of(0, 64);
  BOOST_REQUIRE(!p.client->post_send(2, &ssg, 1));
  // The big one waits at the server, unbuffered: the loop stopped reading.
  BOOST_REQUIRE(wait_waiting_for_receive(*p.server, 1));
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(10, &rsg, 1));
  auto rsg2 = small.whole();
  BOOST_REQUIRE(!p.server->post_recv(11, &rsg2, 1));
  auto rwcs = wait_completions(*p.server, 2, 20s);
  BOOST_REQUIRE_EQUAL(rwcs.size(), 2u);
  BOOST_TEST(rwcs[0].wr_id == 10u);
  BOOST_TEST(rwcs[0].byte_len == n);
  BOOST_TEST(rwcs[1].wr_id == 11u);
  BOOST_TEST(count_status(rwcs, wc_status::success) == 2u);
  BOOST_TEST(has_pattern(dst.data(), n, 31));
  BOOST_TEST(std::memcmp(small.data(), src.data(), 64) == 0);
  BOOST_TEST(wait_completions(*p.client, 2, 10s).size() == 2u);
}

BOOST_AUTO_TEST_CASE(thousands_of_sends_wait_for_receives) {
  auto dev = open_soft(soft_options(10000));
  auto p = connect_pair(*dev);
  constexpr uint64_t n = 6000; // above the pending-request limit
  auto dst = make_buffer(*dev, n * 8, local_write);
  // Zero-length sends; the immediate data carries the sequence number.
  for (uint64_t i = 0; i < n; ++i)
    BOOST_REQUIRE(
        !p.client->post_send(i, nullptr, 0, static_cast<uint32_t>(i), false));
  // The server buffered as many as it may and stopped reading.
  BOOST_REQUIRE(wait_waiting_for_receive(
      *p.server, soft::limits::max_pending_requests + 1));
  for (uint64_t i = 0; i < n; ++i) {
    auto rsg = dst.sge_of(i * 8, 8);
    BOOST_REQUIRE(!p.server->post_recv(i, &rsg, 1));
  }
  auto rwcs = wait_completions(*p.server, n, 30s);
  BOOST_REQUIRE_EQUAL(rwcs.size(), n);
  bool in_order = true;
  for (uint64_t i = 0; i < n; ++i)
    in_order = in_order && rwcs[i].wr_id == i && rwcs[i].imm_data == i
               && rwcs[i].status == wc_status::success;
  BOOST_TEST(in_order);
  BOOST_TEST(!p.client->in_error());
}

BOOST_AUTO_TEST_CASE(deregistration_during_remote_writes_is_safe) {
  auto dev = open_soft(soft_options());
  auto p = connect_pair(*dev);
  constexpr size_t n = 1 << 20;
  auto src = make_buffer(*dev, n, 0);
  fill_pattern(src.data(), n, 2);
  auto target = std::make_unique<reg_buffer>(
      make_buffer(*dev, n, local_write | remote_write, 0));
  auto addr = target->addr();
  auto rkey = target->mr->rkey();
  auto sg = src.whole();
  constexpr uint64_t writes = 200;
  for (uint64_t i = 0; i < writes; ++i)
    BOOST_REQUIRE(!p.client->post_write(i, &sg, 1, addr, rkey, std::nullopt,
                                        i == 0 || i + 1 == writes));
  // Deregister and free while writes are landing: once the first landed.
  std::vector<work_completion> wcs;
  auto first = wait_for_wr(*p.client, 0, 20s, &wcs);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->status == wc_status::success);
  target.reset();
  if (wcs.empty())
    wcs = wait_completions(*p.client, 1, 20s);
  BOOST_REQUIRE(!wcs.empty());
  for (auto& wc : wcs)
    BOOST_TEST((wc.status == wc_status::success
                || wc.status == wc_status::remote_access_error
                || wc.status == wc_status::work_request_flushed));
}

BOOST_AUTO_TEST_CASE(fault_api_rejects_foreign_objects) {
  struct fake_device : transport::device {
    const char* kind() const noexcept override {
      return "fake";
    }
    std::string name() const override {
      return "fake0";
    }
    caf::expected<std::unique_ptr<transport::memory_region>>
    register_memory(void*, size_t, uint32_t) override {
      return make_error(errc::internal_error);
    }
    caf::expected<std::unique_ptr<transport::listener>>
    listen(const std::string&, uint16_t, const conn_params&) override {
      return make_error(errc::internal_error);
    }
    caf::expected<transport::queue_pair_ptr>
    connect(const std::string&, uint16_t, const conn_params&,
            std::chrono::milliseconds) override {
      return make_error(errc::internal_error);
    }
  };
  fake_device fake;
  BOOST_TEST(code_of(soft::set_faults(fake, soft::fault_plan{}))
             == errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(registration_rules) {
  auto dev = open_soft(soft_options());
  std::vector<uint8_t> mem(64);
  BOOST_TEST(!dev->register_memory(nullptr, 64, 0));
  BOOST_TEST(!dev->register_memory(mem.data(), 0, 0));
  BOOST_TEST(!dev->register_memory(mem.data(), 64, remote_write));
  BOOST_TEST(!dev->register_memory(mem.data(), 64, 0x100));
  BOOST_TEST(!!dev->register_memory(mem.data(), 64, 0));
  BOOST_TEST(std::string{dev->kind()} == "soft");
  BOOST_TEST(dev->name() == "soft0");
  auto bad = soft_options();
  bad.recv_depth = 0;
  BOOST_TEST(!soft::open_device(bad));
  BOOST_TEST(code_of(dev->listen("127.0.0.1", 0, conn_params{0, 16}).error())
             == errc::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
