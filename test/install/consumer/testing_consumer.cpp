// Testing your actors over rdmactor with Boost.Test: the example of
// docs/testing-your-actors.md, built by the install_consumer test against
// an installed rdmactor.
#define BOOST_TEST_MODULE my_actors
#include <boost/test/unit_test.hpp>

#include <string>

#include <rdmactor/rdmactor.hpp>
#include <rdmactor/testing.hpp>

using namespace rdmactor;
using rdmactor::testing::two_nodes;

// Two nodes in one process, connected over the soft fabric (verbs with
// RDMACTOR_TEST_FABRIC=verbs): client_conn and server_conn are the ends.
BOOST_FIXTURE_TEST_CASE(bytes_reach_the_peer, two_nodes) {
  auto sent
      = call<uint64_t>(client_conn, send_data_atom_v, std::string{"ping"});
  BOOST_REQUIRE_MESSAGE(sent, render(sent));
  auto got = call<local_mr>(server_conn, receive_data_atom_v);
  BOOST_REQUIRE_MESSAGE(got, render(got));
  BOOST_TEST(
      std::string(reinterpret_cast<const char*>(got->data()), got->size())
      == "ping");
}

// Every wait is bounded: a call nobody answers in time is an error value.
BOOST_FIXTURE_TEST_CASE(waits_are_bounded, two_nodes) {
  auto nothing = rdmactor::testing::call_within<local_mr>(
      sys, std::chrono::milliseconds{100}, server_conn, receive_data_atom_v);
  BOOST_TEST(!nothing);
}
