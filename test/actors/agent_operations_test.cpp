#include <boost/test/unit_test.hpp>

// The agent suite `operations`: memory, send_data, subscriptions and
// requests over one connection.

#include <algorithm>
#include <cstring>
#include <vector>

#include <caf/event_based_actor.hpp>

#include "test/actors/agent_helpers.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(operations)

BOOST_AUTO_TEST_CASE(alloc_local_mr_rejects_invalid_layouts) {
  two_nodes t;
  auto zero = call<local_mr>(t.sys, t.client_conn, alloc_local_mr_atom::value,
                             uint64_t{64}, uint64_t{0});
  BOOST_REQUIRE(!zero);
  BOOST_TEST(code_of(zero.error()) == errc::invalid_layout);
  auto three = call<local_mr>(t.sys, t.client_conn, alloc_local_mr_atom::value,
                              uint64_t{64}, uint64_t{3});
  BOOST_REQUIRE(!three);
  BOOST_TEST(code_of(three.error()) == errc::invalid_layout);
  auto huge = call<local_mr>(t.sys, t.client_conn, alloc_local_mr_atom::value,
                             t.opts.max_alloc_bytes + 1, uint64_t{8});
  BOOST_REQUIRE(!huge);
  BOOST_TEST(code_of(huge.error()) == errc::size_limit);
  auto ok = call<local_mr>(t.sys, t.client_conn, alloc_local_mr_atom::value,
                           uint64_t{1000}, uint64_t{4096});
  BOOST_REQUIRE(ok);
  BOOST_TEST(ok->size() == 1000u);
  BOOST_TEST(ok->addr() % 4096 == 0u);
}

BOOST_AUTO_TEST_CASE(write_and_read_remote_memory_with_slices) {
  two_nodes t;
  const uint64_t size = 256 * 1024;
  auto rmr = call<remote_mr>(t.sys, t.client_conn,
                             request_remote_mr_atom::value, size, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  BOOST_TEST(rmr->size() == size);
  auto src = alloc(t, t.client_conn, size);
  fill(src, 7);
  auto n = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == size);
  auto dst = alloc(t, t.client_conn, size);
  n = call<uint64_t>(t.sys, t.client_conn, read_atom::value, dst, *rmr);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(same(src, dst));
  // Slices on both sides: overwrite the middle of the remote region.
  auto part = alloc(t, t.client_conn, 1000);
  fill(part, 99);
  auto rpart = rmr->slice(5000, 1000);
  BOOST_REQUIRE(rpart);
  n = call<uint64_t>(t.sys, t.client_conn, write_atom::value, part, *rpart);
  BOOST_REQUIRE(n);
  auto back = alloc(t, t.client_conn, size);
  n = call<uint64_t>(t.sys, t.client_conn, read_atom::value, back, *rmr);
  BOOST_REQUIRE(n);
  BOOST_TEST(std::memcmp(back.data() + 5000, part.data(), 1000) == 0);
  BOOST_TEST(std::memcmp(back.data(), src.data(), 5000) == 0);
  BOOST_TEST(std::memcmp(back.data() + 6000, src.data() + 6000, size - 6000)
             == 0);
  // Lengths must match; slices must fit.
  auto short_src = src.slice(0, 10);
  BOOST_REQUIRE(short_src);
  auto bad = call<uint64_t>(t.sys, t.client_conn, write_atom::value, *short_src,
                            *rmr);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::length_mismatch);
  BOOST_TEST(code_of(rmr->slice(size - 10, 11).error()) == errc::out_of_bounds);
  BOOST_TEST(code_of(src.slice(1, size).error()) == errc::out_of_bounds);
}

BOOST_AUTO_TEST_CASE(send_data_sizes_around_the_chunk_boundary) {
  two_nodes t;
  auto cm = chunk_max(t.opts);
  for (size_t size :
       {size_t{0}, size_t{1}, cm - 1, cm, cm + 1,
        size_t{t.opts.max_message_len_bytes} + 1, size_t{200} * 1000}) {
    BOOST_TEST_CONTEXT("size " << size) {
      auto src = alloc(t, t.client_conn, size);
      fill(src, static_cast<uint8_t>(size));
      auto sent
          = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
      BOOST_REQUIRE_MESSAGE(sent, render(sent));
      BOOST_TEST(*sent == size);
      // One local_mr per chunk, in order.
      size_t off = 0;
      do {
        auto chunk
            = call<local_mr>(t.sys, t.server_conn, receive_data_atom::value);
        BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
        auto expect = std::min(cm, size - off);
        BOOST_REQUIRE_EQUAL(chunk->size(), expect);
        BOOST_TEST(std::memcmp(chunk->data(), src.data() + off, expect) == 0);
        off += expect;
      } while (off < size);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_data_subscriber_gets_every_chunk_pushed_in_order) {
  two_nodes t;
  auto cm = chunk_max(t.opts);
  auto send = [&](uint64_t size, uint8_t seed) {
    auto src = alloc(t, t.client_conn, size);
    fill(src, seed);
    auto sent
        = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
    BOOST_REQUIRE_MESSAGE(sent, render(sent));
    return src;
  };
  // Two chunks queue before anyone subscribes.
  auto q1 = send(100, 1);
  auto q2 = send(200, 2);
  caf::scoped_actor sub{t.sys};
  auto n = call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                          caf::actor_cast<data_subscriber>(sub));
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(*n == 2u);
  auto next = [&] {
    local_mr out;
    sub->receive([&](data_atom, local_mr& mr) { out = std::move(mr); },
                 caf::after(std::chrono::seconds(10 * timeout_scale())) >>
                     [] { BOOST_FAIL("no chunk pushed"); });
    return out;
  };
  BOOST_TEST(same(next(), q1));
  BOOST_TEST(same(next(), q2));
  // While subscribed, receive_data is refused.
  auto r = call<local_mr>(t.sys, t.server_conn, receive_data_atom::value);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::invalid_argument, render(r.error()));
  // A message of three chunks arrives pushed, chunk by chunk, in order.
  auto big = send(2 * cm + 10, 3);
  for (uint64_t off = 0; off < big.size();) {
    auto chunk = next();
    auto expect = std::min<uint64_t>(cm, big.size() - off);
    BOOST_REQUIRE_EQUAL(chunk.size(), expect);
    BOOST_TEST(std::memcmp(chunk.data(), big.data() + off, expect) == 0);
    off += expect;
  }
  // An invalid handle ends the subscription: data queues again.
  auto none = call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                             data_subscriber{});
  BOOST_REQUIRE(none);
  auto after = send(300, 4);
  auto got = call<local_mr>(t.sys, t.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(same(*got, after));
  sub->receive([](data_atom, local_mr&) { BOOST_FAIL("pushed after the end"); },
               caf::after(std::chrono::milliseconds(100)) >> [] {});
}

// A user actor on the server echoes every chunk it is pushed with a
// send_data of its own: the server's acknowledgement of each ping rides on
// that echo (SendData.acked, EXT_PIGGYBACK_ACKS) instead of a response of
// its own, and the client's send_data calls still complete.
BOOST_AUTO_TEST_CASE(an_echo_carries_the_acknowledgement_of_the_ping) {
  two_nodes t;
  auto conn = t.server_conn;
  auto echo
      = t.sys.spawn([conn](caf::event_based_actor* self) -> caf::behavior {
          return {[self, conn](data_atom, local_mr& chunk) {
            self->request(conn, caf::infinite, send_data_atom::value,
                          std::move(chunk))
                .then([](uint64_t) {},
                      [](caf::error& err) { BOOST_FAIL(render(err)); });
          }};
        });
  BOOST_REQUIRE(call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                               caf::actor_cast<data_subscriber>(echo)));
  caf::scoped_actor sub{t.sys};
  BOOST_REQUIRE(call<uint64_t>(t.sys, t.client_conn, subscribe_data_atom::value,
                               caf::actor_cast<data_subscriber>(sub)));
  constexpr int rounds = 50;
  for (int i = 0; i < rounds; ++i) {
    auto src = alloc(t, t.client_conn, 16);
    fill(src, static_cast<uint8_t>(i));
    auto sent
        = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
    BOOST_REQUIRE_MESSAGE(sent, render(sent));
    BOOST_REQUIRE_EQUAL(*sent, 16u);
    local_mr back;
    sub->receive([&](data_atom, local_mr& mr) { back = std::move(mr); },
                 caf::after(std::chrono::seconds(10 * timeout_scale())) >>
                     [] { BOOST_FAIL("no echo"); });
    BOOST_REQUIRE(same(back, src));
  }
  auto server = call<agent_stats>(t.sys, t.server_conn, stats_atom::value);
  auto client = call<agent_stats>(t.sys, t.client_conn, stats_atom::value);
  BOOST_REQUIRE(server && client);
  // Scheduling decides how many ride; without the extension none would.
  BOOST_TEST_MESSAGE("acknowledgements on echoes: "
                     << server->piggybacked_acks_sent << " of " << rounds);
  BOOST_TEST(server->piggybacked_acks_sent >= 1u);
  BOOST_TEST(client->piggybacked_acks_received
             == server->piggybacked_acks_sent);
  BOOST_TEST(client->protocol_errors == 0u);
  BOOST_TEST(server->protocol_errors == 0u);
  caf::anon_send_exit(echo, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(send_data_of_10_mib) {
  auto o = test_options();
  o.max_message_len_bytes = 64 * 1024;
  o.recv_depth = 32;
  two_nodes t{o};
  const size_t size = 10 << 20;
  auto src = alloc(t, t.client_conn, size);
  fill(src, 3);
  // The receiver collects while the sender sends.
  caf::scoped_actor self{t.sys};
  self->send(t.client_conn, send_data_atom::value, src);
  std::vector<uint8_t> got;
  got.reserve(size);
  while (got.size() < size) {
    auto chunk = call<local_mr>(t.sys, t.server_conn, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
    got.insert(got.end(), chunk->data(), chunk->data() + chunk->size());
  }
  BOOST_TEST(got.size() == size);
  BOOST_TEST(std::memcmp(got.data(), src.data(), size) == 0);
  bool done = false;
  self->receive([&](uint64_t n) { done = n == size; },
                [&](caf::error& err) { BOOST_FAIL(render(err)); });
  BOOST_TEST(done);
}

BOOST_AUTO_TEST_CASE(send_mr_remote_hands_memory_back_to_its_owner) {
  two_nodes t;
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE(rmr);
  auto src = alloc(t, t.client_conn, 4096);
  fill(src, 5);
  BOOST_REQUIRE(
      call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr));
  auto tok = call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, *rmr);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  auto mine
      = call<local_mr>(t.sys, t.server_conn, receive_local_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(mine, render(mine));
  BOOST_TEST((mine->token() == rmr->token()));
  BOOST_TEST(same(*mine, src));
  // Handed back: a second hand-back and writes through it are refused.
  auto twice = call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, *rmr);
  BOOST_REQUIRE(!twice);
  BOOST_TEST(code_of(twice.error()) == errc::already_sent);
  auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr);
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::invalid_argument);
  auto s = call<agent_stats>(t.sys, t.server_conn, stats_atom::value);
  BOOST_REQUIRE(s);
  BOOST_TEST(s->owned_mrs == 0u);
}

BOOST_AUTO_TEST_CASE(remote_alloc_errors_come_from_the_peer) {
  two_nodes t;
  auto bad
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{64}, uint64_t{6});
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_layout);
  auto huge
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{1} << 40, uint64_t{8});
  BOOST_REQUIRE(!huge);
  BOOST_TEST(code_of(huge.error()) == errc::size_limit);
  // The agent keeps serving.
  auto ok = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                            uint64_t{64}, uint64_t{8});
  BOOST_TEST(static_cast<bool>(ok));
}

BOOST_AUTO_TEST_CASE(hundred_requests_in_flight_from_several_actors) {
  two_nodes t;
  constexpr int users = 4;
  constexpr int per_user = 25;
  caf::scoped_actor collector{t.sys};
  auto conn = t.client_conn;
  for (int u = 0; u < users; ++u) {
    t.sys.spawn([conn, u,
                 dst = caf::actor{collector}](caf::event_based_actor* self) {
      for (int i = 0; i < per_user; ++i) {
        auto size = uint64_t(1000 + 37 * i + u);
        self->request(conn, std::chrono::seconds(30),
                      request_remote_mr_atom::value, size, uint64_t{8})
            .then(
                [self, dst, size, u, i, conn](remote_mr& rmr) {
                  self->request(conn, std::chrono::seconds(30),
                                alloc_local_mr_atom::value, size, uint64_t{8})
                      .then([self, dst, rmr, u, i, conn](local_mr& src) {
                        std::memset(src.data(), u * 31 + i, src.size());
                        self->request(conn, std::chrono::seconds(30),
                                      write_atom::value, src, rmr)
                            .then([self, dst, rmr, src, conn](uint64_t) {
                              self->request(conn, std::chrono::seconds(30),
                                            alloc_local_mr_atom::value,
                                            src.size(), uint64_t{8})
                                  .then([self, dst, rmr, src,
                                         conn](local_mr& back) {
                                    self->request(conn,
                                                  std::chrono::seconds(30),
                                                  read_atom::value, back, rmr)
                                        .then([dst, src, back](uint64_t) {
                                          caf::anon_send(dst, same(src, back));
                                        });
                                  });
                            });
                      });
                },
                [dst](caf::error&) { caf::anon_send(dst, false); });
      }
    });
  }
  int ok = 0;
  int total = 0;
  collector->receive_for(total, users * per_user)(
      [&](bool verified) { ok += verified ? 1 : 0; },
      caf::after(std::chrono::seconds(60)) >> [&] { BOOST_FAIL("stalled"); });
  BOOST_TEST(ok == users * per_user);
}

BOOST_AUTO_TEST_SUITE_END()
