#define BOOST_TEST_MODULE agent_core
#include <boost/test/unit_test.hpp>

// The agent's protocol (actors/core/agent_core.hpp) without a network or
// actors: frames from the peer go straight into the core, its effects land in a
// recording sink, memory comes from a pool on the fuzz target's fake
// device, and the tests drive time themselves.
//
// This file defines the test module; its suites live beside it, all in
// this one executable:
//   agent_core_fixture.hpp                 the recording sink and the fixture
//   agent_core_rendezvous_fixture.hpp      the fixtures of rendezvous pieces
//   agent_core_peer_requests_test.cpp      alloc_and_release, violations
//   agent_core_send_data_test.cpp          send_data_in, piggybacked_acks
//   agent_core_requests_out_test.cpp       requests_out
//   agent_core_logging_test.cpp            log_budget_and_noise
//   agent_core_close_keepalive_test.cpp    close_and_keepalive
//   agent_core_extensions_test.cpp         extensions
//   agent_core_rendezvous_test.cpp         rendezvous
//   agent_core_actor_rendezvous_test.cpp   actor_rendezvous
//   agent_core_partial_work_test.cpp       partial_work
