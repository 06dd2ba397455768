#define BOOST_TEST_MODULE hostile_protocol
#include <boost/test/unit_test.hpp>

// A scripted raw peer against one agent on the deterministic harness
// (test/support/scripted_peer.hpp): the suites are the hostile_*_test.cpp
// files beside this one.
