#define BOOST_TEST_MODULE hostile_peer
#include <boost/test/unit_test.hpp>

// The hostile_test executable: this file defines its test module; its
// suite is hostile_actor_messages_test.cpp (the raw peer:
// hostile_fixture.hpp), a node over the soft fabric.  The hostile
// requests, rendezvous, partials and credits suites run on the
// deterministic harness (test/actors/connection/hostile_*_test.cpp).
