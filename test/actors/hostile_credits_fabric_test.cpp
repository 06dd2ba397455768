#include <boost/test/unit_test.hpp>

// The suite `credits_contract`: a raw peer that ignores credits is cut
// off and other clients are served, on a real fabric (soft, and verbs in
// hostile_test_verbs); the same contract on the scripted peer of the
// deterministic harness: test/actors/connection/hostile_credits_test.cpp.

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "test/actors/hostile_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// -- credits are a contract
// ----------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(credits_contract, system_holder)

// A raw peer sends Pings into every receive the node has posted and never
// returns a credit (immediate value 0 on every send, its receives never
// reposted): every Pong waits in the node's link for a credit.  The node
// counts the receives it granted; once the peer consumed more, the
// connection ends with `quota_exceeded` ("it ignores credits") at the
// first Ping past a grant of under three times the receive depth, so the
// replies it queued stay bounded.  Another client is served all along.
BOOST_AUTO_TEST_CASE(a_peer_that_ignores_credits_is_cut_off_and_others_served) {
  auto opts = test_options();
  opts.recv_depth = 8;
  auto server = node::open(sys, opts);
  BOOST_REQUIRE(server);
  caf::scoped_actor acceptor{sys};
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  auto port
      = (*server)->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
  BOOST_REQUIRE(port);
  auto d = transport::open_device(opts);
  BOOST_REQUIRE(d);
  auto dev = *d;
  auto qp
      = dev->connect(host, *port, {opts.max_message_len_bytes, opts.recv_depth},
                     std::chrono::milliseconds(3000));
  BOOST_REQUIRE_MESSAGE(qp, render(qp));
  auto& raw = **qp;
  connection_actor conn;
  acceptor->receive([&](accepted_atom, connection_actor& c) { conn = c; },
                    caf::after(std::chrono::seconds(5)) >> [] {});
  BOOST_REQUIRE(conn);
  acceptor->monitor(conn);
  auto depth = raw.params().recv_depth;
  auto slot = raw.params().max_message_len_bytes;
  // Receives for what the node may send with the credits it starts with;
  // never reposted.
  std::vector<uint8_t> rx(size_t{slot} * depth);
  auto rx_reg = dev->register_memory(rx.data(), rx.size(),
                                     transport::access::local_write);
  BOOST_REQUIRE(rx_reg);
  constexpr uint64_t recv_bit = uint64_t{1} << 63;
  for (uint32_t i = 0; i < depth; ++i) {
    transport::sge sg{reinterpret_cast<uint64_t>(rx.data() + size_t{i} * slot),
                      slot, (*rx_reg)->lkey()};
    BOOST_REQUIRE(!raw.post_recv(recv_bit | i, &sg, 1));
  }
  auto ping = pb::make_ping(1);
  std::vector<uint8_t> frame(pb::frame_header_len + ping.ByteSizeLong());
  auto enc = pb::encode(ping, frame.data(), frame.size(), slot);
  BOOST_REQUIRE(enc.code == errc::none);
  auto tx_reg = dev->register_memory(frame.data(), enc.header_len, 0);
  BOOST_REQUIRE(tx_reg);
  transport::sge tx{reinterpret_cast<uint64_t>(frame.data()),
                    static_cast<uint32_t>(enc.header_len), (*tx_reg)->lkey()};
  // One Ping at a time: a send completes once the node placed it.
  size_t placed = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  bool failed = false;
  for (uint64_t wr = 1; !failed && std::chrono::steady_clock::now() < deadline;
       ++wr) {
    if (raw.post_send(wr, &tx, 1, uint32_t{0}, true)) {
      failed = true;
      break;
    }
    for (bool done = false; !done && !failed;) {
      transport::work_completion wcs[16];
      auto n = raw.poll_cq(wcs, 16);
      for (size_t i = 0; i < n; ++i) {
        if (wcs[i].wr_id & recv_bit)
          continue; // a Pong or a credit message: taken, never reposted
        if (wcs[i].status != transport::wc_status::success)
          failed = true;
        else if (wcs[i].wr_id == wr) {
          ++placed;
          done = true;
        }
      }
      if (n == 0) {
        if (raw.in_error() || std::chrono::steady_clock::now() > deadline)
          failed = true;
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
    }
  }
  BOOST_TEST(failed);
  // The peer is granted fewer than three times the depth and cut off at
  // the first Ping past its grant.  On verbs a send completes when the
  // node's device takes it into a posted receive, before the node's link
  // sees it, so a few more (at most the receives posted: the depth) may be
  // placed until the link has failed.
  // With shared receives (verbs) the peer takes any posted receive of the
  // node's shared queue until the link saw the one past its grant: at most
  // what its receive CQ holds (recv-depth plus a headroom of 64,
  // verbs_queue_pair.cpp) beyond the link's last poll.
  auto bound = 4u * depth;
  if (opts.fabric == "verbs" && opts.shared_receive_queue)
    bound += 2 * (depth + 64);
  BOOST_TEST(placed < bound, placed << " Pings placed");
  // The node ended that connection for the reason named.
  caf::error reason;
  acceptor->receive([&](caf::down_msg& dm) { reason = dm.reason; },
                    caf::after(std::chrono::seconds(10)) >> [] {});
  // The connection reports the peer gone, naming the link's failure.  On
  // verbs with shared receives the peer is not held back by a receive
  // queue of its own: it may overflow the receive CQ before the link polled
  // the receive past its grant, which ends it too (a CQ error).
  BOOST_TEST(code_of(reason) == errc::peer_gone, render(reason));
  bool cq_overflow = opts.fabric == "verbs" && opts.shared_receive_queue
                     && render(reason).find("qp_error") != std::string::npos;
  if (!cq_overflow) {
    BOOST_TEST(render(reason).find("quota_exceeded") != std::string::npos,
               render(reason));
    BOOST_TEST(render(reason).find("ignores credits") != std::string::npos,
               render(reason));
  }
  // Another client is served.
  auto other = node::open(sys, opts);
  BOOST_REQUIRE(other);
  auto good = (*other)->connect(host + ":" + std::to_string(*port));
  BOOST_REQUIRE(good);
  auto rmr = call<remote_mr>(sys, *good, request_remote_mr_atom::value,
                             uint64_t{1000}, uint64_t{8});
  BOOST_TEST(render(rmr) == "ok");
  (*other)->close();
  (*server)->close();
}

BOOST_AUTO_TEST_SUITE_END()
