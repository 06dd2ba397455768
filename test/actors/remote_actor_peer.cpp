// The peer process of remote_actors_test: connects to ADDRESS, publishes
// "service" and "silent" (see remote_actors_fixture.hpp) on that
// connection, says "ready" on stdout and waits to be killed.
//
// Usage: remote_actor_peer HOST:PORT

#include <chrono>
#include <cstdio>
#include <thread>

#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::printf("usage: remote_actor_peer HOST:PORT\n");
    return 2;
  }
  remote_system s{false};
  auto n = node::open(s.sys, test_options());
  if (!n) {
    std::printf("error open: %s\n", render(n.error()).c_str());
    return 1;
  }
  auto conn = (*n)->connect(argv[1]);
  if (!conn) {
    std::printf("error connect: %s\n", render(conn.error()).c_str());
    return 1;
  }
  for (auto& [name, actor] :
       {std::pair<std::string, caf::actor>{"service", s.sys.spawn(service)},
        {"silent", s.sys.spawn(silent, caf::actor{})}}) {
    auto r = call<bool>(s.sys, *conn, publish_atom::value, name, actor);
    if (!r) {
      std::printf("error publish: %s\n", render(r.error()).c_str());
      return 1;
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  for (;;)
    std::this_thread::sleep_for(std::chrono::seconds(1));
}
