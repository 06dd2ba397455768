#include <boost/test/unit_test.hpp>

// The suite `immediate_data`: values that ride on RDMA WRITEs and on
// send_data chunks between two harnessed agents, in order with the data
// around them, and the connection each pushed item names.

#include <memory>
#include <tuple>
#include <vector>

#include "protocol/codec.hpp"
#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(immediate_data)

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

/// What a chunk_subscriber got.
struct event {
  bool imm = false;   // carried an immediate value
  bool write = false; // a write_with_imm (no chunk)
  uint32_t value = 0; // the immediate value
  uint64_t conn = 0;  // the connection id
  uint64_t bytes = 0; // bytes written or chunk size
  local_mr chunk;
};

using event_log = std::shared_ptr<std::vector<event>>;

/// A chunk_subscriber that appends what it gets to `log`.
chunk_subscriber spawn_recorder(agent_harness& h, event_log log) {
  auto hdl = h.sys().spawn(
      [](chunk_subscriber::pointer,
         event_log out) -> chunk_subscriber::behavior_type {
        return {[out](data_atom, uint64_t conn, local_mr& chunk) {
                  auto& ev = out->emplace_back();
                  ev.conn = conn;
                  ev.bytes = chunk.size();
                  ev.chunk = std::move(chunk);
                },
                [out](imm_atom, uint32_t imm, uint64_t conn, local_mr& chunk) {
                  auto& ev = out->emplace_back();
                  ev.imm = true;
                  ev.value = imm;
                  ev.conn = conn;
                  ev.bytes = chunk.size();
                  ev.chunk = std::move(chunk);
                },
                [out](imm_atom, uint32_t imm, uint64_t conn, uint64_t bytes) {
                  auto& ev = out->emplace_back();
                  ev.imm = true;
                  ev.write = true;
                  ev.value = imm;
                  ev.conn = conn;
                  ev.bytes = bytes;
                }};
      },
      std::move(log));
  h.settle();
  return hdl;
}

/// Lends `size` bytes of the server's memory to the client; returns the
/// server's handle and the client's.
std::pair<local_mr, remote_mr> lend_to_client(agent_harness& h, uint64_t size) {
  auto mr = h.alloc(h.server_conn, size);
  auto tok = h.call<mr_token>(h.server_conn, send_mr_atom::value, mr);
  BOOST_REQUIRE_MESSAGE(tok, render(tok));
  auto rmr = h.call<remote_mr>(h.client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return {mr, *rmr};
}

} // namespace

BOOST_AUTO_TEST_CASE(imm_values_arrive_in_order_with_their_data) {
  agent_harness h;
  const auto before = h.server.bytes_in_use();
  constexpr uint32_t n = 300;
  constexpr uint64_t slot = 64;
  {
    auto [target, rmr] = lend_to_client(h, n * slot);
    auto log = std::make_shared<std::vector<event>>();
    auto sub = spawn_recorder(h, log);
    auto subscribed
        = h.call<uint64_t>(h.server_conn, subscribe_data_atom::value, sub);
    BOOST_REQUIRE_MESSAGE(subscribed, render(subscribed));
    auto src = h.alloc(h.client_conn, n * slot);
    for (uint32_t i = 0; i < n; ++i) {
      auto piece = src.slice(i * slot, slot);
      BOOST_REQUIRE(piece);
      fill_with(*piece, static_cast<uint8_t>(i));
    }
    // Every third operation a send_data with a value, every fifth a plain
    // send_data, else a write_with_imm into slot i, made in this order
    // without waiting for the answers.
    std::vector<int> kinds; // 0 write, 1 send with imm, 2 plain send
    std::vector<std::shared_ptr<pending_reply<uint64_t>>> answers;
    for (uint32_t i = 0; i < n; ++i) {
      auto piece = *src.slice(i * slot, slot);
      auto rpiece = rmr.slice(i * slot, slot);
      BOOST_REQUIRE(rpiece);
      if (i % 3 == 1) {
        kinds.push_back(1);
        answers.push_back(h.ask<uint64_t>(h.client_conn, send_data_atom::value,
                                          piece, uint32_t{100000 + i}));
      } else if (i % 5 == 2) {
        kinds.push_back(2);
        answers.push_back(
            h.ask<uint64_t>(h.client_conn, send_data_atom::value, piece));
      } else {
        kinds.push_back(0);
        answers.push_back(h.ask<uint64_t>(h.client_conn,
                                          write_with_imm_atom::value, piece,
                                          *rpiece, uint32_t{i}));
      }
    }
    h.settle();
    for (auto& a : answers) {
      auto x = agent_harness::take(*a);
      BOOST_REQUIRE_MESSAGE(x, render(x));
      BOOST_TEST(*x == slot);
    }
    const auto conn = h.server_conn->id();
    BOOST_REQUIRE_EQUAL(log->size(), size_t{n});
    for (uint32_t i = 0; i < n; ++i) {
      BOOST_TEST_CONTEXT("operation " << i) {
        auto& ev = (*log)[i];
        BOOST_TEST(ev.conn == conn);
        BOOST_TEST(ev.bytes == slot);
        switch (kinds[i]) {
          case 0:
            BOOST_REQUIRE(ev.write);
            BOOST_TEST(ev.value == i);
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
    auto s = h.stats(h.server_conn);
    BOOST_TEST(s.imms_dropped == 0u);
    BOOST_TEST(s.protocol_errors == 0u);
    log->clear();
  }
  h.settle();
  BOOST_TEST(h.server.bytes_in_use() == before);
}

BOOST_AUTO_TEST_CASE(receive_imm_takes_values_without_a_subscriber) {
  agent_harness h;
  auto [target, rmr] = lend_to_client(h, 4096);
  auto src = h.alloc(h.client_conn, 4096);
  fill_with(src, 3);
  auto w = h.call<uint64_t>(h.client_conn, write_with_imm_atom::value, src, rmr,
                            uint32_t{7});
  BOOST_REQUIRE_MESSAGE(w, render(w));
  BOOST_TEST(*w == 4096u);
  auto d = h.call<uint64_t>(h.client_conn, send_data_atom::value,
                            *src.slice(0, 100), uint32_t{8});
  BOOST_REQUIRE_MESSAGE(d, render(d));
  auto plain = h.call<uint64_t>(h.client_conn, send_data_atom::value,
                                *src.slice(0, 50));
  BOOST_REQUIRE_MESSAGE(plain, render(plain));
  // A value larger than a chunk comes with every chunk.
  auto cm = harness_options().max_message_len_bytes
            - protocol::max_frame_overhead - protocol::imm_frame_overhead;
  auto big = h.call<uint64_t>(h.client_conn, send_data_atom::value,
                              *src.slice(0, cm + 10), uint32_t{9});
  BOOST_REQUIRE_MESSAGE(big, render(big));
  auto next = [&] {
    auto r = h.call<uint32_t, uint64_t, local_mr>(h.server_conn,
                                                  receive_imm_atom::value);
    BOOST_REQUIRE_MESSAGE(r, render(r));
    return std::move(*r);
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
  auto p = h.call<local_mr>(h.server_conn, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(p, render(p));
  BOOST_TEST(p->size() == 50u);
}

// A peer whose Hello does not offer immediate data: calls that need it
// fail with not_negotiated, the rest works, and the other way round the
// values flow.
BOOST_AUTO_TEST_CASE(a_peer_that_did_not_offer_immediate_data) {
  auto server_opts = harness_options();
  server_opts.immediate_data = false;
  agent_harness h{harness_options(), server_opts};
  auto [target, rmr] = lend_to_client(h, 256);
  auto src = h.alloc(h.client_conn, 256);
  auto w = h.call<uint64_t>(h.client_conn, write_with_imm_atom::value, src, rmr,
                            uint32_t{1});
  BOOST_REQUIRE(!w);
  BOOST_TEST(code_of(w.error()) == errc::not_negotiated, render(w.error()));
  auto d = h.call<uint64_t>(h.client_conn, send_data_atom::value, src,
                            uint32_t{1});
  BOOST_REQUIRE(!d);
  BOOST_TEST(code_of(d.error()) == errc::not_negotiated, render(d.error()));
  // The connection still works without values.
  auto plain = h.call<uint64_t>(h.client_conn, write_atom::value, src, rmr);
  BOOST_REQUIRE_MESSAGE(plain, render(plain));
  auto sent = h.call<uint64_t>(h.client_conn, send_data_atom::value, src);
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  auto s = h.stats(h.server_conn);
  BOOST_TEST(s.protocol_errors == 0u);
  BOOST_TEST(s.queued_imms == 0u);
  // The other way round the server's calls work: the client offered.
  auto mine = h.alloc(h.client_conn, 256);
  BOOST_REQUIRE(h.call<mr_token>(h.client_conn, send_mr_atom::value, mine));
  auto srmr = h.call<remote_mr>(h.server_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(srmr, render(srmr));
  auto ssrc = h.alloc(h.server_conn, 256);
  auto back = h.call<uint64_t>(h.server_conn, write_with_imm_atom::value, ssrc,
                               *srmr, uint32_t{5});
  BOOST_REQUIRE_MESSAGE(back, render(back));
  auto imm = h.call<uint32_t, uint64_t, local_mr>(h.client_conn,
                                                  receive_imm_atom::value);
  BOOST_REQUIRE_MESSAGE(imm, render(imm));
  BOOST_TEST(std::get<0>(*imm) == 5u);
  BOOST_TEST(std::get<1>(*imm) == 256u);
}

// One subscriber for two connections tells their chunks apart by the
// connection id each carries.
BOOST_AUTO_TEST_CASE(pushed_chunks_identify_their_connection) {
  agent_harness h;
  auto client1 = h.client_conn;
  auto server1 = h.server_conn;
  auto [client2, server2] = h.connect();
  BOOST_REQUIRE(server1->id() != server2->id());
  auto log = std::make_shared<std::vector<event>>();
  auto sub = spawn_recorder(h, log);
  for (auto& s : {server1, server2}) {
    auto n = h.call<uint64_t>(s, subscribe_data_atom::value, sub);
    BOOST_REQUIRE_MESSAGE(n, render(n));
  }
  for (int round = 0; round < 10; ++round) {
    for (int k = 0; k < 2; ++k) {
      auto& c = k == 0 ? client1 : client2;
      auto seed = static_cast<uint8_t>(round + (k == 0 ? 0 : 100));
      auto src = h.alloc(c, 32);
      fill_with(src, seed);
      auto sent = h.call<uint64_t>(c, send_data_atom::value, src);
      BOOST_REQUIRE_MESSAGE(sent, render(sent));
      BOOST_REQUIRE_EQUAL(log->size(), 1u);
      auto& ev = log->front();
      BOOST_TEST(!ev.imm);
      BOOST_TEST(ev.conn == (k == 0 ? server1 : server2)->id());
      BOOST_TEST(matches(ev.chunk.data(), 32, seed));
      log->clear();
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
