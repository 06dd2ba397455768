#define BOOST_TEST_MODULE agent_protocol
#include <boost/test/unit_test.hpp>

// The agent's protocol between two connections on the deterministic
// harness (test/support/agent_harness.hpp): the suites are in the files
// beside this one.
