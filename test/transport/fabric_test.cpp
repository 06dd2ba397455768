// Fabric-generic tests: written only against rdmactor/transport/fabric.hpp and
// transport::open_device, so the same suite runs on every fabric.
//
//   RDMACTOR_TEST_FABRIC  soft (default) or verbs
//   RDMACTOR_TEST_HOST    address to listen and connect on (127.0.0.1)
//   RDMACTOR_TEST_ROUNDTRIPS  round trips of the stress case (100000)

#define BOOST_TEST_MODULE fabric_test
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstring>
#include <thread>

#include "common/logging.hpp"
#include "test/transport/fabric_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_FIXTURE_TEST_SUITE(fabric, fabric_fixture)

BOOST_AUTO_TEST_CASE(device_identity_and_registration) {
  auto& d = open();
  BOOST_TEST(std::string{d.kind()} == opts.fabric);
  BOOST_TEST(!d.name().empty());
  auto a = make_buffer(d, 4096, local_write | remote_write | remote_read);
  auto b = make_buffer(d, 4096, local_write);
  BOOST_TEST(a.mr->addr() == static_cast<void*>(a.data()));
  BOOST_TEST(a.mr->length() == 4096u);
  BOOST_TEST(a.mr->access_flags()
             == (local_write | remote_write | remote_read));
  BOOST_TEST(a.mr->rkey() != b.mr->rkey());
  BOOST_TEST(a.mr->lkey() != b.mr->lkey());
  // The device counts what is registered on it (the scale bench reads it).
  auto bytes = d.registered_bytes();
  auto regs = d.registrations();
  BOOST_TEST(bytes >= 8192u);
  {
    auto c = make_buffer(d, 12288, local_write);
    BOOST_TEST(d.registered_bytes() == bytes + 12288);
    BOOST_TEST(d.registrations() == regs + 1);
  }
  BOOST_TEST(d.registered_bytes() == bytes);
  BOOST_TEST(d.registrations() == regs);
}

BOOST_AUTO_TEST_CASE(listen_on_port_zero_and_negotiate) {
  auto& d = open();
  conn_params small{8192, 16};
  conn_params big{65536, 64};
  auto p = connect_pair(d, small, big);
  BOOST_TEST(p.lst->port() != 0);
  BOOST_TEST(p.client->params().max_message_len_bytes == 8192u);
  BOOST_TEST(p.client->params().recv_depth == 16u);
  BOOST_TEST(p.server->params().max_message_len_bytes == 8192u);
  BOOST_TEST(p.server->params().recv_depth == 16u);
  BOOST_TEST(!p.client->peer_name().empty());
  BOOST_TEST(!p.server->peer_name().empty());
  BOOST_TEST(!p.client->in_error());
}

BOOST_AUTO_TEST_CASE(send_receive_sizes) {
  auto& d = open();
  conn_params offer{64 * 1024, 16};
  auto p = connect_pair(d, offer);
  auto src = make_buffer(d, offer.max_message_len_bytes, 0);
  auto dst = make_buffer(d, offer.max_message_len_bytes, local_write);
  uint64_t id = 1;
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096},
                      size_t{offer.max_message_len_bytes}}) {
    BOOST_TEST_CONTEXT("size " << size) {
      fill_pattern(src.data(), size, static_cast<uint32_t>(size));
      std::memset(dst.data(), 0xEE, dst.bytes.size());
      post_recv(*p.server, 100 + id, dst);
      auto sg = src.sge_of(0, size);
      BOOST_REQUIRE(!p.client->post_send(id, &sg, 1));
      auto rwc = one_completion(*p.server);
      BOOST_TEST(rwc.status == wc_status::success);
      BOOST_TEST(rwc.opcode == wc_opcode::recv);
      BOOST_TEST(rwc.wr_id == 100 + id);
      BOOST_TEST(rwc.byte_len == size);
      BOOST_TEST(!rwc.has_imm);
      BOOST_TEST(has_pattern(dst.data(), size, static_cast<uint32_t>(size)));
      BOOST_TEST(all_bytes(dst.data() + size, dst.bytes.size() - size, 0xEE));
      auto swc = one_completion(*p.client);
      BOOST_TEST(swc.status == wc_status::success);
      BOOST_TEST(swc.opcode == wc_opcode::send);
      BOOST_TEST(swc.wr_id == id);
      ++id;
    }
  }
}

BOOST_AUTO_TEST_CASE(send_receive_several_mebibytes) {
  auto& d = open();
  conn_params offer{8u << 20, 4};
  auto p = connect_pair(d, offer);
  auto src = make_buffer(d, offer.max_message_len_bytes, 0);
  auto dst = make_buffer(d, offer.max_message_len_bytes, local_write);
  uint64_t id = 1;
  for (size_t size : {size_t{3} << 20, size_t{offer.max_message_len_bytes}}) {
    BOOST_TEST_CONTEXT("size " << size) {
      fill_pattern(src.data(), size, static_cast<uint32_t>(id));
      post_recv(*p.server, 100 + id, dst);
      auto sg = src.sge_of(0, size);
      BOOST_REQUIRE(!p.client->post_send(id, &sg, 1));
      auto rwc = one_completion(*p.server, 30s);
      BOOST_TEST(rwc.status == wc_status::success);
      BOOST_TEST(rwc.byte_len == size);
      BOOST_TEST(has_pattern(dst.data(), size, static_cast<uint32_t>(id)));
      BOOST_TEST(one_completion(*p.client, 30s).status == wc_status::success);
      ++id;
    }
  }
}

BOOST_AUTO_TEST_CASE(gather_and_scatter_lists) {
  auto& d = open();
  auto p = connect_pair(d);
  auto header = make_buffer(d, 64, 0);
  auto payload = make_buffer(d, 8192, 0);
  fill_pattern(header.data(), 64, 1);
  fill_pattern(payload.data(), 8192, 2);
  // One receive buffer.
  auto dst = make_buffer(d, 16384, local_write);
  post_recv(*p.server, 10, dst);
  sge gather[2] = {header.sge_of(0, 48), payload.sge_of(100, 5000)};
  BOOST_REQUIRE(!p.client->post_send(1, gather, 2));
  auto rwc = one_completion(*p.server);
  BOOST_TEST(rwc.status == wc_status::success);
  BOOST_TEST(rwc.byte_len == 5048u);
  BOOST_TEST(std::memcmp(dst.data(), header.data(), 48) == 0);
  BOOST_TEST(std::memcmp(dst.data() + 48, payload.data() + 100, 5000) == 0);
  BOOST_TEST(one_completion(*p.client).status == wc_status::success);
  // A scatter list on the receiving side: the message spans both.
  auto part1 = make_buffer(d, 100, local_write, 0);
  auto part2 = make_buffer(d, 8192, local_write, 0);
  sge scatter[2] = {part1.whole(), part2.whole()};
  BOOST_REQUIRE(!p.server->post_recv(11, scatter, 2));
  sge three[3]
      = {header.sge_of(0, 64), payload.sge_of(0, 4000), header.sge_of(0, 16)};
  BOOST_REQUIRE(!p.client->post_send(2, three, 3));
  rwc = one_completion(*p.server);
  BOOST_TEST(rwc.status == wc_status::success);
  BOOST_TEST(rwc.byte_len == 4080u);
  std::vector<uint8_t> got(part1.bytes);
  got.insert(got.end(), part2.bytes.begin(), part2.bytes.begin() + 3980);
  std::vector<uint8_t> want(header.bytes.begin(), header.bytes.end());
  want.insert(want.end(), payload.bytes.begin(), payload.bytes.begin() + 4000);
  want.insert(want.end(), header.bytes.begin(), header.bytes.begin() + 16);
  BOOST_TEST(got == want);
  BOOST_TEST(one_completion(*p.client).status == wc_status::success);
}

BOOST_AUTO_TEST_CASE(send_with_immediate_and_write_with_immediate) {
  auto& d = open();
  auto p = connect_pair(d);
  auto src = make_buffer(d, 4096, 0);
  fill_pattern(src.data(), 4096, 7);
  auto dst = make_buffer(d, 4096, local_write);
  auto target = make_buffer(d, 8192, local_write | remote_write, 0);
  // SEND with immediate.
  post_recv(*p.server, 1, dst);
  auto sg = src.sge_of(0, 100);
  BOOST_REQUIRE(!p.client->post_send(11, &sg, 1, 0xC0FFEEu));
  auto rwc = one_completion(*p.server);
  BOOST_TEST(rwc.status == wc_status::success);
  BOOST_TEST(rwc.opcode == wc_opcode::recv);
  BOOST_TEST(rwc.has_imm);
  BOOST_TEST(rwc.imm_data == 0xC0FFEEu);
  BOOST_TEST(rwc.byte_len == 100u);
  BOOST_TEST(std::memcmp(dst.data(), src.data(), 100) == 0);
  BOOST_TEST(one_completion(*p.client).status == wc_status::success);
  // WRITE with immediate consumes a receive and reports the written length.
  post_recv(*p.server, 2, dst);
  sg = src.sge_of(0, 4096);
  BOOST_REQUIRE(!p.client->post_write(12, &sg, 1, target.addr(1000),
                                      target.mr->rkey(), 42u));
  rwc = one_completion(*p.server);
  BOOST_TEST(rwc.status == wc_status::success);
  BOOST_TEST(rwc.opcode == wc_opcode::recv_rdma_with_imm);
  BOOST_TEST(rwc.wr_id == 2u);
  BOOST_TEST(rwc.has_imm);
  BOOST_TEST(rwc.imm_data == 42u);
  BOOST_TEST(rwc.byte_len == 4096u);
  BOOST_TEST(std::memcmp(target.data() + 1000, src.data(), 4096) == 0);
  BOOST_TEST(all_bytes(target.data(), 1000, 0));
  auto swc = one_completion(*p.client);
  BOOST_TEST(swc.status == wc_status::success);
  BOOST_TEST(swc.opcode == wc_opcode::rdma_write);
}

BOOST_AUTO_TEST_CASE(write_and_read_with_slices) {
  auto& d = open();
  auto p = connect_pair(d);
  constexpr size_t n = 256 * 1024;
  auto local = make_buffer(d, n, local_write);
  auto remote = make_buffer(d, n, local_write | remote_write | remote_read, 0);
  fill_pattern(local.data(), n, 99);
  // Whole-region write.
  auto sg = local.whole();
  BOOST_REQUIRE(
      !p.client->post_write(1, &sg, 1, remote.addr(), remote.mr->rkey()));
  auto wc = one_completion(*p.client);
  BOOST_TEST(wc.status == wc_status::success);
  BOOST_TEST(wc.opcode == wc_opcode::rdma_write);
  BOOST_TEST(wc.byte_len == n);
  BOOST_TEST(remote.bytes == local.bytes);
  // A slice of the local buffer to a slice of the remote one.
  std::vector<uint8_t> before(remote.bytes);
  fill_pattern(local.data() + 1111, 3333, 5);
  sg = local.sge_of(1111, 3333);
  BOOST_REQUIRE(
      !p.client->post_write(2, &sg, 1, remote.addr(70000), remote.mr->rkey()));
  BOOST_TEST(one_completion(*p.client).status == wc_status::success);
  std::memcpy(before.data() + 70000, local.data() + 1111, 3333);
  BOOST_TEST(remote.bytes == before);
  // Read a remote slice into another local slice (gather into two sges).
  auto into = make_buffer(d, 8192, local_write, 0xAB);
  sge two[2] = {into.sge_of(10, 1000), into.sge_of(4000, 2000)};
  BOOST_REQUIRE(
      !p.client->post_read(3, two, 2, remote.addr(69000), remote.mr->rkey()));
  wc = one_completion(*p.client);
  BOOST_TEST(wc.status == wc_status::success);
  BOOST_TEST(wc.opcode == wc_opcode::rdma_read);
  BOOST_TEST(wc.byte_len == 3000u);
  BOOST_TEST(std::memcmp(into.data() + 10, remote.data() + 69000, 1000) == 0);
  BOOST_TEST(std::memcmp(into.data() + 4000, remote.data() + 70000, 2000) == 0);
  BOOST_TEST(all_bytes(into.data(), 10, 0xAB));
  BOOST_TEST(all_bytes(into.data() + 1010, 2990, 0xAB));
  BOOST_TEST(all_bytes(into.data() + 6000, 2192, 0xAB));
  // The server reads from the client side too (both directions work).
  auto client_mem = make_buffer(d, 4096, local_write | remote_read);
  fill_pattern(client_mem.data(), 4096, 77);
  auto server_into = make_buffer(d, 4096, local_write);
  sg = server_into.whole();
  BOOST_REQUIRE(!p.server->post_read(4, &sg, 1, client_mem.addr(),
                                     client_mem.mr->rkey()));
  BOOST_TEST(one_completion(*p.server).status == wc_status::success);
  BOOST_TEST(server_into.bytes == client_mem.bytes);
}

BOOST_AUTO_TEST_CASE(write_then_send_is_visible_on_arrival) {
  auto& d = open();
  auto p = connect_pair(d);
  constexpr size_t n = 1 << 20;
  auto src = make_buffer(d, n, 0);
  auto target = make_buffer(d, n, local_write | remote_write, 0);
  auto note = make_buffer(d, 64, 0);
  auto inbox = make_buffer(d, 64, local_write);
  for (uint32_t round = 1; round <= 5; ++round) {
    fill_pattern(src.data(), n, round);
    post_recv(*p.server, round, inbox);
    auto sg = src.whole();
    BOOST_REQUIRE(!p.client->post_write(100 + round, &sg, 1, target.addr(),
                                        target.mr->rkey(), std::nullopt,
                                        false));
    auto nsg = note.sge_of(0, 8);
    BOOST_REQUIRE(!p.client->post_send(200 + round, &nsg, 1));
    auto rwc = one_completion(*p.server);
    BOOST_TEST(rwc.status == wc_status::success);
    // The write is complete when the send that followed it arrives.
    BOOST_TEST(has_pattern(target.data(), n, round));
    auto swc = one_completion(*p.client);
    BOOST_TEST(swc.wr_id == 200 + round);
    BOOST_TEST(swc.status == wc_status::success);
  }
}

BOOST_AUTO_TEST_CASE(cq_notification_fd) {
  auto& d = open();
  auto p = connect_pair(d);
  auto src = make_buffer(d, 64, 0);
  auto dst = make_buffer(d, 64, local_write);
  auto fd = p.client->cq_fd();
  BOOST_REQUIRE(fd >= 0);
  BOOST_TEST(!p.client->ack_cq_event());
  BOOST_REQUIRE(!p.client->arm_cq());
  pollfd pfd{fd, POLLIN, 0};
  BOOST_TEST(::poll(&pfd, 1, 50) == 0);
  post_recv(*p.server, 1, dst);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(5, &sg, 1));
  pfd.revents = 0;
  BOOST_TEST(::poll(&pfd, 1, 5000) == 1);
  BOOST_TEST((pfd.revents & POLLIN) != 0);
  BOOST_TEST(p.client->ack_cq_event());
  BOOST_TEST(!p.client->ack_cq_event());
  work_completion wc[4];
  BOOST_REQUIRE_EQUAL(p.client->poll_cq(wc, 4), 1u);
  BOOST_TEST(wc[0].wr_id == 5u);
  BOOST_TEST(wc[0].status == wc_status::success);
  BOOST_TEST(one_completion(*p.server).wr_id == 1u);
  // Not armed: a completion does not make the fd readable.
  post_recv(*p.server, 2, dst);
  BOOST_REQUIRE(!p.client->post_send(6, &sg, 1));
  BOOST_TEST(one_completion(*p.server).wr_id == 2u);
  // Our completion arrives (polled, the CQ stays unarmed) and the fd stays
  // quiet.
  auto sent = poll_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(sent.size(), 1u);
  BOOST_TEST(sent[0].wr_id == 6u);
  pfd.revents = 0;
  BOOST_TEST(::poll(&pfd, 1, 0) == 0);
  BOOST_TEST(p.client->poll_cq(wc, 4) == 0u);
}

BOOST_AUTO_TEST_CASE(cq_armed_for_receives_ignores_send_completions) {
  auto& d = open();
  auto p = connect_pair(d);
  auto src = make_buffer(d, 64, 0);
  auto dst = make_buffer(d, 64, local_write);
  auto fd = p.client->cq_fd();
  BOOST_REQUIRE(fd >= 0);
  BOOST_REQUIRE(!p.client->arm_cq(transport::cq_events::receives));
  // Our SEND completes: no notification.
  post_recv(*p.server, 1, dst);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(5, &sg, 1));
  BOOST_TEST(one_completion(*p.server).wr_id == 1u);
  auto sent = poll_completions(*p.client, 1); // polled: the arm stays
  BOOST_REQUIRE_EQUAL(sent.size(), 1u);
  BOOST_TEST(sent[0].wr_id == 5u);
  BOOST_TEST(sent[0].status == wc_status::success);
  pollfd pfd{fd, POLLIN, 0};
  BOOST_TEST(::poll(&pfd, 1, 0) == 0);
  // The peer's SEND lands in our receive: notified; its completion is in
  // the CQ.
  auto back = make_buffer(d, 64, local_write);
  post_recv(*p.client, 7, back);
  auto ssg = dst.whole();
  BOOST_REQUIRE(!p.server->post_send(9, &ssg, 1));
  pfd.revents = 0;
  BOOST_TEST(::poll(&pfd, 1, 5000) == 1);
  BOOST_TEST(p.client->ack_cq_event());
  auto wcs = wait_completions(*p.client, 1, 10s);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].wr_id == 7u);
  BOOST_TEST(wcs[0].status == wc_status::success);
  // Widening to every completion: a send completion notifies again.
  BOOST_REQUIRE(!p.client->arm_cq(transport::cq_events::receives));
  BOOST_REQUIRE(!p.client->arm_cq(transport::cq_events::all));
  post_recv(*p.server, 2, dst);
  BOOST_REQUIRE(!p.client->post_send(6, &sg, 1));
  pfd.revents = 0;
  BOOST_TEST(::poll(&pfd, 1, 5000) == 1);
  BOOST_TEST(p.client->ack_cq_event());
}

BOOST_AUTO_TEST_CASE(unsignaled_send_produces_no_completion) {
  auto& d = open();
  auto p = connect_pair(d);
  auto src = make_buffer(d, 64, 0);
  auto dst = make_buffer(d, 256, local_write);
  post_recv(*p.server, 1, dst, 0, 64);
  post_recv(*p.server, 2, dst, 64, 64);
  post_recv(*p.server, 3, dst, 128, 64);
  auto sg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(10, &sg, 1, std::nullopt, false));
  BOOST_REQUIRE(!p.client->post_send(11, &sg, 1, std::nullopt, false));
  BOOST_REQUIRE(!p.client->post_send(12, &sg, 1));
  BOOST_TEST(wait_completions(*p.server, 3).size() == 3u);
  auto wcs = wait_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].wr_id == 12u);
  BOOST_TEST(wait_completions(*p.client, 1, 100ms).empty());
  // An unsignaled write is silent too.
  auto target = make_buffer(d, 64, local_write | remote_write);
  BOOST_REQUIRE(!p.client->post_write(13, &sg, 1, target.addr(),
                                      target.mr->rkey(), std::nullopt, false));
  BOOST_REQUIRE(
      !p.client->post_write(14, &sg, 1, target.addr(), target.mr->rkey()));
  wcs = wait_completions(*p.client, 1);
  BOOST_REQUIRE_EQUAL(wcs.size(), 1u);
  BOOST_TEST(wcs[0].wr_id == 14u);
}

BOOST_AUTO_TEST_CASE(invalid_post_arguments) {
  auto& d = open();
  auto p = connect_pair(d);
  auto src = make_buffer(d, 64, 0);
  sge five[5]
      = {src.whole(), src.whole(), src.whole(), src.whole(), src.whole()};
  BOOST_TEST(code_of(p.client->post_send(1, five, 5))
             == errc::invalid_argument);
  BOOST_TEST(code_of(p.client->post_recv(1, five, 5))
             == errc::invalid_argument);
  auto big = make_buffer(d, p.client->params().max_message_len_bytes + 1, 0);
  auto sg = big.whole();
  BOOST_TEST(code_of(p.client->post_send(1, &sg, 1)) == errc::invalid_argument);
  BOOST_TEST(!p.client->in_error());
}

BOOST_AUTO_TEST_CASE(many_small_round_trips) {
  auto& d = open();
  conn_params offer{256, 16};
  auto p = connect_pair(d, offer);
  const uint64_t total = env_number("RDMACTOR_TEST_ROUNDTRIPS", 100000);
  constexpr uint64_t window = 8;
  constexpr uint64_t pool = 16;
  constexpr size_t msg = 32;
  auto client_rx = make_buffer(d, pool * msg, local_write);
  auto server_rx = make_buffer(d, pool * msg, local_write);
  auto client_tx = make_buffer(d, msg, 0);
  auto server_tx = make_buffer(d, msg, 0);
  for (uint64_t i = 0; i < pool; ++i) {
    post_recv(*p.client, i, client_rx, i * msg, msg);
    post_recv(*p.server, i, server_rx, i * msg, msg);
  }
  uint64_t sent = 0;
  uint64_t echoed = 0;
  uint64_t server_sent = 0;
  bool failed = false;
  auto post_ping = [&] {
    std::memcpy(client_tx.data(), &sent, sizeof(sent));
    auto sg = client_tx.sge_of(0, msg);
    bool signaled = (sent % 64) == 63;
    if (p.client->post_send(1000000 + sent, &sg, 1, std::nullopt, signaled))
      failed = true;
    ++sent;
  };
  auto start = std::chrono::steady_clock::now();
  while (sent < std::min(window, total))
    post_ping();
  work_completion wc[32];
  bool armed = false;
  auto deadline = start + 120s;
  while (echoed < total && !failed) {
    bool progress = false;
    for (size_t n; (n = p.server->poll_cq(wc, 32)) > 0;) {
      progress = true;
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].status != wc_status::success) {
          failed = true;
          continue;
        }
        if (wc[i].opcode != wc_opcode::recv)
          continue;
        auto slot = wc[i].wr_id;
        uint64_t seq = 0;
        std::memcpy(&seq, server_rx.data() + slot * msg, sizeof(seq));
        auto sg = server_rx.sge_of(slot * msg, msg);
        if (p.server->post_recv(slot, &sg, 1))
          failed = true;
        std::memcpy(server_tx.data(), &seq, sizeof(seq));
        auto tsg = server_tx.sge_of(0, msg);
        bool signaled = (server_sent % 64) == 63;
        if (p.server->post_send(2000000 + server_sent, &tsg, 1, std::nullopt,
                                signaled))
          failed = true;
        ++server_sent;
      }
    }
    for (size_t n; (n = p.client->poll_cq(wc, 32)) > 0;) {
      progress = true;
      for (size_t i = 0; i < n; ++i) {
        if (wc[i].status != wc_status::success) {
          failed = true;
          continue;
        }
        if (wc[i].opcode != wc_opcode::recv)
          continue;
        auto slot = wc[i].wr_id;
        uint64_t seq = 0;
        std::memcpy(&seq, client_rx.data() + slot * msg, sizeof(seq));
        if (seq != echoed)
          failed = true;
        ++echoed;
        auto sg = client_rx.sge_of(slot * msg, msg);
        if (p.client->post_recv(slot, &sg, 1))
          failed = true;
        if (sent < total)
          post_ping();
      }
    }
    if (progress) {
      armed = false;
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline)
      break;
    if (!armed) {
      // Arm, then poll both CQs once more before sleeping.
      p.client->arm_cq();
      p.server->arm_cq();
      armed = true;
      continue;
    }
    pollfd fds[2]
        = {{p.client->cq_fd(), POLLIN, 0}, {p.server->cq_fd(), POLLIN, 0}};
    ::poll(fds, 2, 100);
    p.client->ack_cq_event();
    p.server->ack_cq_event();
    armed = false;
  }
  auto elapsed = ms_since(start);
  BOOST_TEST_MESSAGE(total << " round trips in " << elapsed << " ms");
  BOOST_TEST(!failed);
  BOOST_TEST(echoed == total);
  BOOST_TEST(!p.client->in_error());
  BOOST_TEST(!p.server->in_error());
}

BOOST_AUTO_TEST_SUITE_END()
