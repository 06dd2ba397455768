#include <boost/test/unit_test.hpp>

// The suite `timeouts`: receive calls that nothing answers end with
// request_timeout once the simulated clock passed request-timeout-ms (and
// not before), within one sweep interval.

#include "common/tuning.hpp"
#include "test/support/agent_harness.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

BOOST_AUTO_TEST_SUITE(timeouts)

BOOST_AUTO_TEST_CASE(receive_times_out_when_nothing_arrives) {
  auto o = harness_options();
  o.request_timeout_ms = 300;
  agent_harness h{o};
  auto data = h.ask<local_mr>(h.client_conn, receive_data_atom::value);
  auto region = h.ask<remote_mr>(h.client_conn, receive_remote_mr_atom::value);
  h.advance(o.request_timeout_ms - 1);
  BOOST_TEST(!data->done);
  BOOST_TEST(!region->done);
  h.advance(1 + tuning::sweep_interval_ms(o.request_timeout_ms));
  BOOST_REQUIRE(data->done);
  BOOST_TEST(!data->values);
  BOOST_TEST(code_of(data->error) == errc::request_timeout,
             render(data->error));
  BOOST_REQUIRE(region->done);
  BOOST_TEST(!region->values);
  BOOST_TEST(code_of(region->error) == errc::request_timeout,
             render(region->error));
}

BOOST_AUTO_TEST_SUITE_END()
