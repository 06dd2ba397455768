#include <boost/test/unit_test.hpp>

// The hostile suites, rendezvous (issue 13): SendData naming a source the
// agent reads, honest and hostile.

#include <cstring>
#include <vector>

#include "test/actors/hostile_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// -- rendezvous (issue 13) ----------------------------------------------------

namespace {

/// The limits above with 64 KiB messages over 4 KiB receive buffers: the
/// node offers rendezvous (reads payloads over 4 KiB with RDMA READ).
options rendezvous_limited_options() {
  auto o = limited_options();
  o.max_message_len_bytes = 64 * 1024;
  o.eager_message_len_bytes = 4096;
  o.peer_max_queued_bytes = 48 * 1024;
  return o;
}

struct rendezvous_peer_fixture : raw_peer_fixture {
  rendezvous_peer_fixture() : raw_peer_fixture(rendezvous_limited_options()) {}

  /// Memory of the raw peer the agent may read, filled with a pattern.
  local_mr readable(size_t len) {
    auto mr = pool->allocate(len, 64, transport::access::remote_read);
    BOOST_REQUIRE_MESSAGE(mr, render(mr));
    for (size_t i = 0; i < len; ++i)
      mr->data()[i] = static_cast<uint8_t>(i * 7 + 1);
    return *mr;
  }
};

} // namespace

// A node whose eager size is its max message length offers no rendezvous:
// a SendData naming a source is refused, counted, and the agent serves on.
BOOST_AUTO_TEST_CASE(a_rendezvous_to_a_node_that_did_not_offer_it_is_refused) {
  raw_peer_fixture f;
  auto id = f.next_id++;
  f.send(pb::make_send_data_rendezvous(id, pb::make_token(0x10000, 8192, 5)));
  auto res = f.next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::MALFORMED);
  auto s = f.server_stats();
  BOOST_TEST(s.rejected_requests == 1u);
  BOOST_TEST(s.rendezvous_read == 0u);
  f.expect_still_serving();
}

BOOST_FIXTURE_TEST_SUITE(hostile_rendezvous, rendezvous_peer_fixture)

// The agent reads an honest rendezvous chunk from the peer's memory,
// delivers exactly those bytes and answers OK; once the user drops them,
// the memory is back.
BOOST_AUTO_TEST_CASE(an_honest_rendezvous_is_read_and_delivered) {
  const size_t len = 40 * 1024;
  auto src = readable(len);
  auto id = next_id++;
  send(pb::make_send_data_rendezvous(
      id, pb::make_token(src.addr(), len, src.rkey())));
  auto res = next_response();
  BOOST_TEST(res.request_id() == id);
  BOOST_TEST(pb::status_of(res) == pb::OK);
  {
    auto got = call<local_mr>(sys, server_conn, receive_data_atom::value);
    BOOST_REQUIRE_MESSAGE(got, render(got));
    BOOST_REQUIRE_EQUAL(got->size(), len);
    BOOST_TEST(std::memcmp(got->data(), src.data(), len) == 0);
  }
  auto s = server_stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0u; }));
}

// Headers a hostile peer may send: each is refused with an error status
// before anything is allocated or read, counted, and the agent serves on.
BOOST_AUTO_TEST_CASE(hostile_rendezvous_headers_are_error_answers) {
  auto src = readable(8192);
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
      // beyond the max message length this node offered
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
    auto id = next_id++;
    auto msg = pb::make_send_data_rendezvous(id, c.token);
    msg.mutable_request()->mutable_send_data()->set_len(c.len);
    send(msg);
    auto res = next_response();
    BOOST_TEST(res.request_id() == id);
    BOOST_TEST(pb::status_of(res) == c.status,
               "case len " << c.len << ": " << pb::status_of(res));
    ++refused;
    // Under peer-max-violations (6) in a row: a good request in between.
    if (refused % 4 == 0)
      expect_still_serving();
  }
  auto s = server_stats();
  BOOST_TEST(s.rejected_requests == refused);
  BOOST_TEST(s.rendezvous_read == 0u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  expect_still_serving();
  // Only the two regions the good requests allocated are held.
  BOOST_TEST(server_stats().owned_mrs == 2u);
}

// A source the peer's device does not know (a wrong rkey) cannot be checked
// before the READ: the READ fails, which ends the connection as on any
// reliable connection; the node survives and every byte returns.
BOOST_AUTO_TEST_CASE(
    a_rendezvous_source_that_cannot_be_read_ends_the_connection) {
  caf::scoped_actor watcher{sys};
  watcher->monitor(server_conn);
  auto src = readable(8192);
  send(pb::make_send_data_rendezvous(
      next_id++, pb::make_token(src.addr(), 8192, src.rkey() + 12345)));
  bool down = false;
  watcher->receive([&](caf::down_msg&) { down = true; },
                   caf::after(std::chrono::seconds(10 * timeout_scale())) >>
                       [] {});
  BOOST_TEST(down);
  BOOST_TEST(
      eventually([&] { return server->memory_stats().bytes_in_use == 0u; }));
}

BOOST_AUTO_TEST_SUITE_END()
