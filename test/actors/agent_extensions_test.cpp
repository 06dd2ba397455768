// Immediate data, access rights, memory-region tags, connection ids and
// leases on the fabric RDMACTOR_TEST_FABRIC names (soft here, verbs in
// agent_test_verbs): the fabric's own paths (RDMA WRITE with immediate
// data, remote access errors) and the lease clock.  The same protocol
// behaviour runs deterministically in test/actors/connection/.

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <thread>
#include <vector>

#include <caf/event_based_actor.hpp>

#include "protocol/codec.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "test/actors/fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

void fill_with(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed + i * 13);
}

bool matches(const uint8_t* data, size_t size, uint8_t seed) {
  for (size_t i = 0; i < size; ++i)
    if (data[i] != static_cast<uint8_t>(seed + i * 13))
      return false;
  return true;
}

local_mr alloc_on(caf::actor_system& sys, const connection_actor& c,
                  uint64_t size) {
  auto mr
      = call<local_mr>(sys, c, alloc_local_mr_atom::value, size, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(mr, render(mr));
  return *mr;
}

std::chrono::seconds wait_time() {
  return std::chrono::seconds(10 * timeout_scale());
}

/// What a chunk_subscriber saw, in arrival order.
struct event {
  bool imm = false;   // carried an immediate value
  bool write = false; // a write_with_imm (no chunk)
  uint32_t value = 0; // the immediate value
  uint64_t conn = 0;  // the connection id
  uint64_t bytes = 0; // bytes written or chunk size
  local_mr chunk;
};

event next_event(caf::scoped_actor& sub) {
  event ev;
  sub->receive(
      [&](data_atom, uint64_t conn, local_mr& chunk) {
        ev.conn = conn;
        ev.bytes = chunk.size();
        ev.chunk = std::move(chunk);
      },
      [&](imm_atom, uint32_t imm, uint64_t conn, local_mr& chunk) {
        ev.imm = true;
        ev.value = imm;
        ev.conn = conn;
        ev.bytes = chunk.size();
        ev.chunk = std::move(chunk);
      },
      [&](imm_atom, uint32_t imm, uint64_t conn, uint64_t bytes) {
        ev.imm = true;
        ev.write = true;
        ev.value = imm;
        ev.conn = conn;
        ev.bytes = bytes;
      },
      caf::after(wait_time()) >> [] { BOOST_FAIL("nothing pushed"); });
  return ev;
}

/// Lends `size` bytes of the server's memory to the client; returns the
/// server's handle and the client's token.
std::pair<local_mr, remote_mr> lend_to_client(two_nodes& t, uint64_t size,
                                              uint32_t access
                                              = transport::access::all) {
  auto mr
      = call<local_mr>(t.server_side.sys, t.server_conn,
                       alloc_local_mr_atom::value, size, uint64_t{64}, access);
  BOOST_REQUIRE_MESSAGE(mr, render(mr));
  auto tok = call<mr_token>(t.server_side.sys, t.server_conn,
                            send_mr_atom::value, *mr);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return {*mr, *rmr};
}

} // namespace

BOOST_AUTO_TEST_SUITE(immediate_data)

BOOST_AUTO_TEST_CASE(imm_values_arrive_in_order_with_their_data) {
  two_nodes t;
  const auto before = t.server->memory_stats().bytes_in_use;
  constexpr uint32_t n = 300;
  constexpr uint64_t slot = 64;
  {
    auto [target, rmr] = lend_to_client(t, n * slot);
    caf::scoped_actor sub{t.sys};
    auto subscribed
        = call<uint64_t>(t.sys, t.server_conn, subscribe_data_atom::value,
                         caf::actor_cast<chunk_subscriber>(sub));
    BOOST_REQUIRE_MESSAGE(subscribed, render(subscribed));
    // One blocking write first: the later ones need not wait for the Hello.
    auto src = alloc_on(t.sys, t.client_conn, n * slot);
    for (uint32_t i = 0; i < n; ++i) {
      auto piece = src.slice(i * slot, slot);
      BOOST_REQUIRE(piece);
      fill_with(*piece, static_cast<uint8_t>(i));
    }
    // Every third operation a send_data with a value, every fifth a plain
    // send_data, else a write_with_imm into slot i: all from one actor, so
    // they reach the connection (and the peer) in this order.
    caf::scoped_actor self{t.sys};
    std::vector<int> kinds; // 0 write, 1 send with imm, 2 plain send
    for (uint32_t i = 0; i < n; ++i) {
      auto piece = *src.slice(i * slot, slot);
      auto rpiece = rmr.slice(i * slot, slot);
      BOOST_REQUIRE(rpiece);
      if (i % 3 == 1) {
        kinds.push_back(1);
        self->send(t.client_conn, send_data_atom::value, piece,
                   uint32_t{100000 + i});
      } else if (i % 5 == 2) {
        kinds.push_back(2);
        self->send(t.client_conn, send_data_atom::value, piece);
      } else {
        kinds.push_back(0);
        self->send(t.client_conn, write_with_imm_atom::value, piece, *rpiece,
                   uint32_t{i});
      }
      if (i == 0) // the first alone: after it the Hello is in
        self->receive([&](uint64_t x) { BOOST_TEST(x == slot); },
                      [](caf::error& e) { BOOST_FAIL(render(e)); },
                      caf::after(wait_time()) >>
                          [] { BOOST_FAIL("no answer"); });
    }
    uint32_t answered = 1;
    self->receive_for(answered, n)([&](uint64_t x) { BOOST_TEST(x == slot); },
                                   [](caf::error& e) { BOOST_FAIL(render(e)); },
                                   caf::after(wait_time()) >>
                                       [] { BOOST_FAIL("no answer"); });
    const auto conn = t.server_conn->id();
    for (uint32_t i = 0; i < n; ++i) {
      BOOST_TEST_CONTEXT("operation " << i) {
        auto ev = next_event(sub);
        BOOST_TEST(ev.conn == conn);
        BOOST_TEST(ev.bytes == slot);
        switch (kinds[i]) {
          case 0:
            BOOST_REQUIRE(ev.write);
            BOOST_TEST(ev.value == i);
            // The data was in place before the value came.
            BOOST_TEST(matches(target.data() + i * slot, slot,
                               static_cast<uint8_t>(i)));
            break;
          case 1:
            BOOST_REQUIRE(ev.imm);
            BOOST_REQUIRE(!ev.write);
            BOOST_TEST(ev.value == 100000 + i);
            BOOST_TEST(matches(ev.chunk.data(), slot, static_cast<uint8_t>(i)));
            break;
          default:
            BOOST_REQUIRE(!ev.imm);
            BOOST_TEST(matches(ev.chunk.data(), slot, static_cast<uint8_t>(i)));
        }
      }
    }
    auto s = call<agent_stats>(t.sys, t.server_conn, stats_atom::value);
    BOOST_REQUIRE(s);
    BOOST_TEST(s->imms_dropped == 0u);
    BOOST_TEST(s->protocol_errors == 0u);
    // The client's lent token goes back with rmr; the server's region with
    // `target`.
  }
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
}

BOOST_AUTO_TEST_CASE(receive_imm_takes_values_without_a_subscriber) {
  two_nodes t;
  auto [target, rmr] = lend_to_client(t, 4096);
  auto src = alloc_on(t.sys, t.client_conn, 4096);
  fill_with(src, 3);
  auto w = call<uint64_t>(t.sys, t.client_conn, write_with_imm_atom::value, src,
                          rmr, uint32_t{7});
  BOOST_REQUIRE_MESSAGE(w, render(w));
  BOOST_TEST(*w == 4096u);
  auto small = *src.slice(0, 100);
  auto d = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, small,
                          uint32_t{8});
  BOOST_REQUIRE_MESSAGE(d, render(d));
  auto plain = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value,
                              *src.slice(0, 50));
  BOOST_REQUIRE_MESSAGE(plain, render(plain));
  // A value larger than a chunk comes with every chunk.
  auto cm = t.opts.max_message_len_bytes - protocol::max_frame_overhead
            - protocol::imm_frame_overhead;
  auto big = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value,
                            *src.slice(0, cm + 10), uint32_t{9});
  BOOST_REQUIRE_MESSAGE(big, render(big));
  using imm_reply = std::tuple<uint32_t, uint64_t, local_mr>;
  auto next = [&] {
    caf::scoped_actor self{t.sys};
    imm_reply out;
    self->request(t.server_conn, wait_time(), receive_imm_atom::value)
        .receive(
            [&](uint32_t imm, uint64_t bytes, local_mr& chunk) {
              out = imm_reply{imm, bytes, std::move(chunk)};
            },
            [](caf::error& e) { BOOST_FAIL(render(e)); });
    return out;
  };
  auto a = next();
  BOOST_TEST(std::get<0>(a) == 7u);
  BOOST_TEST(std::get<1>(a) == 4096u);
  BOOST_TEST(!std::get<2>(a).valid());
  BOOST_TEST(matches(target.data(), 4096, 3));
  auto b = next();
  BOOST_TEST(std::get<0>(b) == 8u);
  BOOST_TEST(std::get<1>(b) == 100u);
  BOOST_TEST(matches(std::get<2>(b).data(), 100, 3));
  auto c1 = next();
  auto c2 = next();
  BOOST_TEST(std::get<0>(c1) == 9u);
  BOOST_TEST(std::get<0>(c2) == 9u);
  BOOST_TEST(std::get<1>(c1) == cm);
  BOOST_TEST(std::get<1>(c2) == 10u);
  // The plain chunk went to receive_data.
  auto p = call<local_mr>(t.sys, t.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(p, render(p));
  BOOST_TEST(p->size() == 50u);
}

BOOST_AUTO_TEST_CASE(a_peer_that_did_not_offer_immediate_data) {
  auto server_opts = test_options();
  server_opts.immediate_data = false;
  two_nodes t{test_options(), server_opts};
  auto [target, rmr] = lend_to_client(t, 256);
  auto src = alloc_on(t.sys, t.client_conn, 256);
  auto w = call<uint64_t>(t.sys, t.client_conn, write_with_imm_atom::value, src,
                          rmr, uint32_t{1});
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::not_negotiated, render(w.error()));
  auto d = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src,
                          uint32_t{1});
  BOOST_REQUIRE(!d);
  BOOST_TEST(code_of(d.error()) == errc::not_negotiated, render(d.error()));
  // The connection still works without values.
  auto plain
      = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, rmr);
  BOOST_REQUIRE_MESSAGE(plain, render(plain));
  auto sent = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  auto s = call<agent_stats>(t.sys, t.server_conn, stats_atom::value);
  BOOST_REQUIRE(s);
  BOOST_TEST(s->protocol_errors == 0u);
  BOOST_TEST(s->queued_imms == 0u);
  // The other way round the server's calls work: the client offered.
  auto [ctarget, srmr] = [&] {
    auto mr = alloc_on(t.sys, t.client_conn, 256);
    BOOST_REQUIRE(
        call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, mr));
    auto r = call<remote_mr>(t.server_side.sys, t.server_conn,
                             receive_remote_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(r, render(r));
    return std::make_pair(mr, *r);
  }();
  auto ssrc = alloc_on(t.server_side.sys, t.server_conn, 256);
  auto back
      = call<uint64_t>(t.server_side.sys, t.server_conn,
                       write_with_imm_atom::value, ssrc, srmr, uint32_t{5});
  BOOST_REQUIRE_MESSAGE(back, render(back));
  caf::scoped_actor self{t.sys};
  self->request(t.client_conn, wait_time(), receive_imm_atom::value)
      .receive(
          [](uint32_t imm, uint64_t bytes, local_mr&) {
            BOOST_TEST(imm == 5u);
            BOOST_TEST(bytes == 256u);
          },
          [](caf::error& e) { BOOST_FAIL(render(e)); });
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(access_and_tags)

BOOST_AUTO_TEST_CASE(a_read_only_region_is_read_but_not_written_by_the_peer) {
  two_nodes t;
  const auto before = t.server->memory_stats().bytes_in_use;
  {
    auto bad = call<local_mr>(t.sys, t.client_conn, alloc_local_mr_atom::value,
                              uint64_t{64}, uint64_t{64}, uint32_t{1u << 20});
    BOOST_REQUIRE(!bad);
    BOOST_TEST(code_of(bad.error()) == errc::invalid_argument);
    auto [ro, rmr] = lend_to_client(t, 4096, transport::access::remote_read);
    fill_with(ro, 11);
    auto dst = alloc_on(t.sys, t.client_conn, 4096);
    auto r = call<uint64_t>(t.sys, t.client_conn, read_atom::value, dst, rmr);
    BOOST_REQUIRE_MESSAGE(r, render(r));
    BOOST_TEST(matches(dst.data(), 4096, 11));
    caf::scoped_actor self{t.sys};
    self->monitor(t.client_conn);
    auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, dst, rmr);
    BOOST_REQUIRE(!w);
    BOOST_TEST(code_of(w.error()) == errc::remote_access_error,
               render(w.error()));
    BOOST_TEST(matches(ro.data(), 4096, 11)); // untouched
    // As on any reliable connection, the error ends it.
    caf::error why;
    self->receive([&](caf::down_msg& m) { why = m.reason; },
                  caf::after(wait_time()) >> [] { BOOST_FAIL("not down"); });
    BOOST_TEST(code_of(why) == errc::peer_gone, render(why));
  }
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
}

BOOST_AUTO_TEST_CASE(tags_arrive_with_their_tokens) {
  two_nodes t;
  const auto before = t.client->memory_stats().bytes_in_use;
  {
    auto a = alloc_on(t.sys, t.client_conn, 128);
    auto b = alloc_on(t.sys, t.client_conn, 256);
    auto ta = call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, a,
                             uint64_t{0xfeedbeefcafe});
    BOOST_REQUIRE_MESSAGE(ta, render(ta));
    auto tb = call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, b);
    BOOST_REQUIRE_MESSAGE(tb, render(tb));
    remote_mr ra;
    remote_mr rb;
    uint64_t tag_a = 1;
    uint64_t tag_b = 1;
    caf::scoped_actor self{t.server_side.sys};
    self->request(t.server_conn, wait_time(),
                  receive_tagged_remote_mr_atom::value)
        .receive(
            [&](remote_mr& r, uint64_t tag) {
              ra = std::move(r);
              tag_a = tag;
            },
            [](caf::error& e) { BOOST_FAIL(render(e)); });
    self->request(t.server_conn, wait_time(),
                  receive_tagged_remote_mr_atom::value)
        .receive(
            [&](remote_mr& r, uint64_t tag) {
              rb = std::move(r);
              tag_b = tag;
            },
            [](caf::error& e) { BOOST_FAIL(render(e)); });
    BOOST_TEST(tag_a == 0xfeedbeefcafeu);
    BOOST_TEST((ra.token() == *ta));
    BOOST_TEST(tag_b == 0u); // untagged
    BOOST_TEST((rb.token() == *tb));
    // The tag of a region handed back; the untagged receive call takes a
    // tagged one too.
    auto back = call<mr_token>(t.server_side.sys, t.server_conn,
                               send_mr_atom::value, ra, uint64_t{7});
    BOOST_REQUIRE_MESSAGE(back, render(back));
    auto back_b = call<mr_token>(t.server_side.sys, t.server_conn,
                                 send_mr_atom::value, rb, uint64_t{8});
    BOOST_REQUIRE_MESSAGE(back_b, render(back_b));
    caf::scoped_actor me{t.sys};
    me->request(t.client_conn, wait_time(), receive_tagged_local_mr_atom::value)
        .receive(
            [&](local_mr& mr, uint64_t tag) {
              BOOST_TEST(tag == 7u);
              BOOST_TEST((mr.token() == a.token()));
            },
            [](caf::error& e) { BOOST_FAIL(render(e)); });
    auto plain
        = call<local_mr>(t.sys, t.client_conn, receive_local_mr_atom::value);
    BOOST_REQUIRE_MESSAGE(plain, render(plain));
    BOOST_TEST((plain->token() == b.token()));
  }
  BOOST_TEST(eventually(
      [&] { return t.client->memory_stats().bytes_in_use == before; },
      wait_time()));
}

BOOST_AUTO_TEST_CASE(pushed_chunks_identify_their_connection) {
  two_nodes t;
  auto client1 = t.client_conn;
  auto server1 = t.server_conn;
  t.connect();
  auto client2 = t.client_conn;
  auto server2 = t.server_conn;
  BOOST_REQUIRE(server1->id() != server2->id());
  caf::scoped_actor sub{t.sys};
  for (auto& s : {server1, server2}) {
    auto n = call<uint64_t>(t.sys, s, subscribe_data_atom::value,
                            caf::actor_cast<chunk_subscriber>(sub));
    BOOST_REQUIRE_MESSAGE(n, render(n));
  }
  for (int round = 0; round < 10; ++round) {
    for (auto* c : {&client1, &client2}) {
      auto src = alloc_on(t.sys, *c, 32);
      fill_with(src, static_cast<uint8_t>(round + (c == &client1 ? 0 : 100)));
      auto sent = call<uint64_t>(t.sys, *c, send_data_atom::value, src);
      BOOST_REQUIRE_MESSAGE(sent, render(sent));
      auto ev = next_event(sub);
      BOOST_TEST(!ev.imm);
      BOOST_TEST(ev.conn == (c == &client1 ? server1 : server2)->id());
      BOOST_TEST(
          matches(ev.chunk.data(), 32,
                  static_cast<uint8_t>(round + (c == &client1 ? 0 : 100))));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(leases)

namespace {

/// Lends `size` bytes of the server's memory to the client with a lease;
/// the server keeps no handle of its own.
remote_mr lend_leased(two_nodes& t, uint64_t size, uint32_t lease_ms) {
  auto mr = alloc_on(t.server_side.sys, t.server_conn, size);
  auto tok = call<mr_token>(t.server_side.sys, t.server_conn,
                            send_mr_atom::value, mr, uint64_t{0}, lease_ms);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  BOOST_TEST(tok->rkey != mr.rkey()); // a registration of its own
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return *rmr;
}

agent_stats server_stats(two_nodes& t) {
  auto s
      = call<agent_stats>(t.server_side.sys, t.server_conn, stats_atom::value);
  BOOST_REQUIRE(s);
  return *s;
}

/// Checks that the connection still serves: `src` reaches the server,
/// which refused nothing and saw no protocol error.
void expect_serving(two_nodes& t, const local_mr& src) {
  auto sent = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  auto got = call<local_mr>(t.server_side.sys, t.server_conn,
                            receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  auto s = server_stats(t);
  BOOST_TEST(s.rejected_requests == 0u);
  BOOST_TEST(s.protocol_errors == 0u);
}

} // namespace

BOOST_AUTO_TEST_CASE(a_lease_ends_unless_renewed_and_the_memory_returns) {
  two_nodes t;
  const auto before = t.server->memory_stats().bytes_in_use;
  const uint32_t lease = 1000 * timeout_scale();
  auto rmr = lend_leased(t, 4096, lease);
  BOOST_TEST(t.server->memory_stats().bytes_in_use > before);
  auto src = alloc_on(t.sys, t.client_conn, 4096);
  fill_with(src, 5);
  // Renewed three times over more than the lease's duration: usable.
  for (int i = 0; i < 4; ++i) {
    auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, rmr);
    BOOST_REQUIRE_MESSAGE(w, render(w));
    std::this_thread::sleep_for(std::chrono::milliseconds(lease / 3));
    auto granted = call<uint32_t>(t.sys, t.client_conn, renew_lease_atom::value,
                                  rmr, lease * 10);
    BOOST_REQUIRE_MESSAGE(granted, render(granted));
    BOOST_TEST(*granted == lease); // at most the original duration
  }
  BOOST_TEST(server_stats(t).leases_expired == 0u);
  // Not renewed: the server revokes it, and its memory returns although
  // the client still holds its remote_mr.
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
  auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, rmr);
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::lease_expired, render(w.error()));
  auto r = call<uint32_t>(t.sys, t.client_conn, renew_lease_atom::value, rmr,
                          lease);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::lease_expired, render(r.error()));
  // The connection goes on; dropping the handle sends nothing to release.
  rmr = remote_mr{};
  expect_serving(t, src);
  BOOST_TEST(server_stats(t).owned_mrs == 0u);
}

BOOST_AUTO_TEST_CASE(operations_in_flight_when_a_lease_ends) {
  two_nodes t;
  const auto before = t.server->memory_stats().bytes_in_use;
  const uint32_t lease = 1000 * timeout_scale();
  auto rmr = lend_leased(t, 64 * 1024, lease);
  auto src = alloc_on(t.sys, t.client_conn, 64 * 1024);
  // Four writers keep operations in flight until the lease ends; each ends
  // with lease_expired, and no operation meets a revoked registration.
  caf::scoped_actor self{t.sys};
  constexpr int writers = 4;
  int expired = 0;
  int ok = 0;
  for (int i = 0; i < writers; ++i)
    self->send(t.client_conn, write_atom::value, src, rmr);
  int other_errors = 0;
  while (expired < writers) {
    self->receive(
        [&](uint64_t) {
          ++ok;
          self->send(t.client_conn, write_atom::value, src, rmr);
        },
        [&](caf::error& e) {
          if (code_of(e) == errc::lease_expired)
            ++expired;
          else {
            ++other_errors;
            ++expired; // this writer stops
            BOOST_ERROR(render(e));
          }
        },
        caf::after(std::chrono::milliseconds(lease * 5)) >>
            [&] { BOOST_FAIL("no answer"); });
  }
  BOOST_TEST(ok > 0);
  BOOST_TEST(other_errors == 0);
  rmr = remote_mr{};
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
  // Still connected.
  auto sent = call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
}

BOOST_AUTO_TEST_CASE(atomics_and_send_backs_on_an_ended_lease_fail_locally) {
  // Every use of a remote_mr passes one gate (actors/core/remote_gate.hpp): an
  // atomic on a revoked region would otherwise reach the peer's fabric
  // with a dead rkey and end the connection.
  two_nodes t;
  const uint32_t lease = 1000 * timeout_scale();
  auto rmr = lend_leased(t, 64, lease);
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  auto fa = call<uint64_t>(t.sys, t.client_conn, fetch_add_atom::value, rmr,
                           uint64_t{1});
  BOOST_REQUIRE(!fa);
  BOOST_TEST(code_of(fa.error()) == errc::lease_expired, render(fa.error()));
  BOOST_TEST(render(fa.error()).find("fetch_add") != std::string::npos,
             render(fa.error()));
  auto cs = call<uint64_t>(t.sys, t.client_conn, compare_swap_atom::value, rmr,
                           uint64_t{0}, uint64_t{1});
  BOOST_REQUIRE(!cs);
  BOOST_TEST(code_of(cs.error()) == errc::lease_expired, render(cs.error()));
  auto back = call<mr_token>(t.sys, t.client_conn, send_mr_atom::value, rmr);
  BOOST_REQUIRE(!back);
  BOOST_TEST(code_of(back.error()) == errc::lease_expired,
             render(back.error()));
  // Nothing reached the server, and the connection still serves.
  expect_serving(t, alloc_on(t.sys, t.client_conn, 64));
}

BOOST_AUTO_TEST_CASE(a_lease_needs_memory_from_the_allocator) {
  two_nodes t;
  auto src = alloc_on(t.sys, t.client_conn, 100);
  BOOST_REQUIRE(
      call<uint64_t>(t.sys, t.client_conn, send_data_atom::value, src));
  auto chunk = call<local_mr>(t.server_side.sys, t.server_conn,
                              receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(chunk, render(chunk));
  auto tok
      = call<mr_token>(t.server_side.sys, t.server_conn, send_mr_atom::value,
                       *chunk, uint64_t{0}, uint32_t{1000});
  BOOST_REQUIRE(!tok);
  BOOST_TEST(code_of(tok.error()) == errc::invalid_argument,
             render(tok.error()));
}

BOOST_AUTO_TEST_CASE(regions_a_peer_allocates_carry_the_lenders_lease) {
  const uint32_t lease = 1000 * timeout_scale();
  auto server_opts = test_options();
  server_opts.peer_alloc_lease_ms = lease;
  two_nodes t{test_options(), server_opts};
  const auto before = t.server->memory_stats().bytes_in_use;
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{4096}, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  auto src = alloc_on(t.sys, t.client_conn, 4096);
  auto w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr);
  BOOST_REQUIRE_MESSAGE(w, render(w));
  auto granted = call<uint32_t>(t.sys, t.client_conn, renew_lease_atom::value,
                                *rmr, lease);
  BOOST_REQUIRE_MESSAGE(granted, render(granted));
  BOOST_TEST(*granted == lease);
  BOOST_TEST(server_stats(t).peer_alloc_bytes == 4096u);
  // Never released by the client: revoked and freed at the lease's end.
  BOOST_REQUIRE(eventually([&] { return server_stats(t).leases_expired == 1; },
                           std::chrono::milliseconds(lease * 5)));
  BOOST_TEST(server_stats(t).peer_alloc_bytes == 0u);
  BOOST_TEST(eventually(
      [&] { return t.server->memory_stats().bytes_in_use == before; },
      wait_time()));
  w = call<uint64_t>(t.sys, t.client_conn, write_atom::value, src, *rmr);
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::lease_expired, render(w.error()));
  auto rel = call<uint64_t>(t.sys, t.client_conn, release_atom::value, *rmr);
  BOOST_REQUIRE(!rel);
  BOOST_TEST(code_of(rel.error()) == errc::lease_expired);
  BOOST_TEST(server_stats(t).rejected_requests == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
