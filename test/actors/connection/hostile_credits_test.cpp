#include <boost/test/unit_test.hpp>

// The suite `hostile_credits`: credits are a contract.  A scripted raw
// peer (test/support/scripted_peer.hpp) that ignores them is cut off;
// other connections are served.

#include <string>

#include "test/support/scripted_peer.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(hostile_credits)

// The peer sends Pings into every receive the agent has posted and never
// returns a credit (immediate value 0 on every send): every Pong waits in
// the agent's link for a credit.  The agent counts the receives it
// granted; at the first Ping past the grant (under three times the
// receive depth), the connection ends with `quota_exceeded` ("it ignores
// credits"), so the replies it queued stay bounded.  Another connection
// is served.
BOOST_AUTO_TEST_CASE(a_peer_that_ignores_credits_is_cut_off_and_others_served) {
  auto opts = scripted_options();
  opts.recv_depth = 8;
  scripted_peer p{opts};
  p.return_credits = false;
  p.ignore_credits = true;
  auto down = p.h.watch(p.agent);
  uint64_t placed = 0;
  for (int i = 0; i < 100 && !down->down; ++i) {
    p.send(pb::make_ping(p.next_id++));
    p.h.settle();
    ++placed;
  }
  BOOST_REQUIRE(down->down);
  BOOST_TEST(placed == p.granted() + 1, placed << " Pings placed");
  BOOST_TEST(placed < 3u * opts.recv_depth, placed << " Pings placed");
  // The connection reports the peer gone, naming the link's failure.
  auto why = render(down->reason);
  BOOST_TEST(code_of(down->reason) == errc::peer_gone, why);
  BOOST_TEST(why.find("quota_exceeded") != std::string::npos, why);
  BOOST_TEST(why.find("ignores credits") != std::string::npos, why);
  BOOST_TEST(p.agent_bytes() == 0u);
  // Another connection of the same side is served.
  auto [client, server] = p.h.connect();
  auto rmr = p.h.call<remote_mr>(client, request_remote_mr_atom::value,
                                 uint64_t{1000}, uint64_t{8});
  BOOST_TEST(render(rmr) == "ok");
}

// The same peer returning its credits is never cut off: it keeps sending
// Pings far past the receive depth and every one gets its Pong.
BOOST_AUTO_TEST_CASE(a_peer_that_returns_credits_is_served_past_the_depth) {
  auto opts = scripted_options();
  opts.recv_depth = 8;
  scripted_peer p{opts};
  auto down = p.h.watch(p.agent);
  const uint64_t count = 5 * opts.recv_depth;
  for (uint64_t i = 0; i < count; ++i)
    p.send(pb::make_ping(p.next_id++));
  p.h.settle();
  uint64_t pongs = 0;
  for (auto& f : p.inbox)
    pongs += f.msg.has_response() && f.msg.response().has_pong();
  BOOST_TEST(pongs == count);
  BOOST_TEST(!down->down);
  BOOST_TEST(p.granted() > count);
}

BOOST_AUTO_TEST_SUITE_END()
