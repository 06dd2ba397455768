#pragma once

// The fixture of the remote-actor suites on the deterministic harness: a
// client and a server node whose actor systems register the message types
// of the remote-actor tests (remote_actors_fixture.hpp, as an application
// registers its own), on test/support/remote_harness.hpp.

#include <memory>

#include "test/actors/remote_actors_fixture.hpp"
#include "test/support/remote_harness.hpp"

namespace rdmactor::test {

/// The configs of both nodes: the server's "point" has another layout
/// when `server_mismatched`.
inline agent_harness::systems remote_configs(bool server_mismatched = false) {
  return {std::make_unique<remote_config>(true),
          std::make_unique<remote_config>(false, server_mismatched)};
}

/// Client and server node, one connection between them (settled).
struct harnessed_nodes : remote_harness {
  explicit harnessed_nodes(options o = harness_options())
      : harnessed_nodes(o, o) {}

  harnessed_nodes(options client_opts, options server_opts,
                  bool server_mismatched = false)
      : remote_harness(std::move(client_opts), std::move(server_opts),
                       remote_configs(server_mismatched)) {}

  /// Without a connection (`connect`).
  harnessed_nodes(options client_opts, options server_opts, unconnected_t)
      : remote_harness(std::move(client_opts), std::move(server_opts),
                       remote_configs(), unconnected) {}
};

} // namespace rdmactor::test
