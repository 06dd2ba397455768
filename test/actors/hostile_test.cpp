#define BOOST_TEST_MODULE hostile_peer
#include <boost/test/unit_test.hpp>

// The hostile_test executable: this file defines its test module; its
// suite is hostile_actor_messages_test.cpp (the raw peer:
// hostile_fixture.hpp): actor messages to a node's published actors over
// the soft fabric.  The other hostile suites run on the deterministic
// harness (test/actors/connection/hostile_*_test.cpp).
