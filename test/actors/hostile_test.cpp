#define BOOST_TEST_MODULE hostile_peer
#include <boost/test/unit_test.hpp>

// The hostile_test executable: this file defines its test module; the
// suites are hostile_actor_messages_test.cpp and hostile_partials_test.cpp
// (their raw peer: hostile_fixture.hpp).  The hostile requests, rendezvous and
// credits suites run on the deterministic harness
// (test/actors/connection/hostile_*_test.cpp).
