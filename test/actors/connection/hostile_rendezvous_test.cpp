#include <boost/test/unit_test.hpp>

// The suite `hostile_rendezvous`: a scripted raw peer on the deterministic
// harness (test/support/scripted_peer.hpp) sends SendData naming a source
// the agent reads, honest and hostile.

#include <cstring>
#include <vector>

#include "test/support/scripted_peer.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// The scripted limits with 64 KiB messages over 4 KiB receive buffers:
/// the agent offers rendezvous (reads payloads over 4 KiB with RDMA READ).
options rendezvous_options() {
  auto o = scripted_options();
  o.max_message_len_bytes = 64 * 1024;
  o.eager_message_len_bytes = 4096;
  o.max_rendezvous_bytes = 64 * 1024; // pieces of 64 KiB
  o.peer_max_queued_bytes = 48 * 1024;
  return o;
}

/// Memory of the peer the agent may read (from the harness's client
/// pool), filled with a pattern.
local_mr readable(scripted_peer& p, size_t len) {
  auto mr = p.h.client.pool->allocate(len, 64, transport::access::remote_read);
  BOOST_REQUIRE_MESSAGE(mr, render(mr));
  for (size_t i = 0; i < len; ++i)
    mr->data()[i] = static_cast<uint8_t>(i * 7 + 1);
  return std::move(*mr);
}

} // namespace

BOOST_AUTO_TEST_SUITE(hostile_rendezvous)

// An agent whose eager size is its max message length offers no
// rendezvous: a SendData naming a source is refused, counted, and the
// agent serves on.
BOOST_AUTO_TEST_CASE(
    a_rendezvous_to_an_agent_that_did_not_offer_it_is_refused) {
  scripted_peer p;
  auto id = p.next_id++;
  p.send(pb::make_send_data_rendezvous(id, pb::make_token(0x10000, 8192, 5)));
  auto res = p.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::MALFORMED);
  auto s = p.stats();
  BOOST_TEST(s.rejected_requests == 1u);
  BOOST_TEST(s.rendezvous_read == 0u);
  p.expect_still_serving();
}

// The agent reads an honest rendezvous chunk from the peer's memory,
// delivers exactly those bytes and answers OK; once the user drops them,
// the memory is back.
BOOST_AUTO_TEST_CASE(an_honest_rendezvous_is_read_and_delivered) {
  scripted_peer p{rendezvous_options()};
  const auto start = p.agent_bytes();
  const size_t len = 40 * 1024;
  auto src = readable(p, len);
  auto id = p.next_id++;
  p.send(pb::make_send_data_rendezvous(
      id, pb::make_token(src.addr(), len, src.rkey())));
  auto res = p.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::OK);
  {
    auto got = p.h.call<local_mr>(p.agent, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(got, render(got));
    BOOST_REQUIRE_EQUAL(got->size(), len);
    BOOST_TEST(std::memcmp(got->data(), src.data(), len) == 0);
  }
  p.h.settle();
  auto s = p.stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  BOOST_TEST(p.agent_bytes() == start);
}

// Headers a hostile peer may send: each is refused with an error status
// before anything is allocated or read, counted, and the agent serves on.
BOOST_AUTO_TEST_CASE(hostile_rendezvous_headers_are_error_answers) {
  scripted_peer p{rendezvous_options()};
  auto src = readable(p, 8192);
  struct bad_case {
    uint64_t len;
    pb::MrToken token;
    pb::Status status;
  };
  auto tok = [&](uint64_t addr, uint64_t len) {
    return pb::make_token(addr, len, src.rkey());
  };
  std::vector<bad_case> cases{
      // the token names fewer bytes than SendData.len
      {8192, tok(src.addr(), 4096), pb::LENGTH_MISMATCH},
      // a huge length
      {uint64_t{1} << 40, tok(src.addr(), uint64_t{1} << 40), pb::SIZE_LIMIT},
      // beyond the max-rendezvous-bytes this agent offered
      {64 * 1024 + 1, tok(src.addr(), 64 * 1024 + 1), pb::SIZE_LIMIT},
      // within it but beyond peer-max-queued-bytes
      {60 * 1024, tok(src.addr(), 60 * 1024), pb::QUOTA_EXCEEDED},
      // a range that wraps around the address space
      {8192, tok(~uint64_t{0} - 100, 8192), pb::MALFORMED},
      // small enough for an eager SendData
      {100, tok(src.addr(), 100), pb::MALFORMED},
      // zero bytes
      {0, tok(src.addr(), 0), pb::MALFORMED},
  };
  uint64_t refused = 0;
  for (auto& c : cases) {
    auto id = p.next_id++;
    auto msg = pb::make_send_data_rendezvous(id, c.token);
    msg.mutable_request()->mutable_send_data()->set_len(c.len);
    p.send(msg);
    auto res = p.next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == c.status,
               "case len " << c.len << ": " << pb::status_of(res));
    ++refused;
    // Under peer-max-violations (6) in a row: a good request in between.
    if (refused % 4 == 0)
      p.expect_still_serving();
  }
  auto s = p.stats();
  BOOST_TEST(s.rejected_requests == refused);
  BOOST_TEST(s.rendezvous_read == 0u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  p.expect_still_serving();
  // Only the two regions the good requests allocated are held.
  BOOST_TEST(p.stats().owned_mrs == 2u);
}

// A source the peer's device does not know (a wrong rkey) cannot be
// checked before the READ: the READ fails, which ends the connection as
// on any reliable connection, and every byte returns.
BOOST_AUTO_TEST_CASE(
    a_rendezvous_source_that_cannot_be_read_ends_the_connection) {
  scripted_peer p{rendezvous_options()};
  auto down = p.h.watch(p.agent);
  auto src = readable(p, 8192);
  p.send(pb::make_send_data_rendezvous(
      p.next_id++, pb::make_token(src.addr(), 8192, src.rkey() + 12345)));
  p.h.settle();
  BOOST_REQUIRE(down->down);
  BOOST_TEST_MESSAGE("the connection ended: " << render(down->reason));
  BOOST_TEST(p.agent_bytes() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
