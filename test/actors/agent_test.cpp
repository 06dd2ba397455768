#define BOOST_TEST_MODULE agent
#include <boost/test/unit_test.hpp>

// The agent_test executable: this file defines its test module; the suites
// are agent_operations_test.cpp, agent_peer_claims_test.cpp,
// agent_peer_departure_test.cpp, agent_scale_test.cpp,
// agent_node_lifecycle_test.cpp, agent_rendezvous_test.cpp,
// agent_extensions_test.cpp and data_handler_test.cpp (their helpers:
// agent_helpers.hpp and fixture.hpp).
