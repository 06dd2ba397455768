#define BOOST_TEST_MODULE remote_protocol
#include <boost/test/unit_test.hpp>

// Remote actors (actors/remote/) between two nodes' actor systems on the
// deterministic harness (test/support/remote_harness.hpp): the suites are
// in the files beside this one.
