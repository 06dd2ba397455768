#pragma once

// Helpers the suites of agent_test share: buffers to fill and compare,
// memory from a connection, the largest chunk of a send_data, and the
// scale checks (registered bytes, one value sent across a connection).

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "protocol/codec.hpp"
#include "test/actors/fixture.hpp"

namespace rdmactor::test {

inline void fill(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed + i * 31);
}

inline bool same(const local_mr& a, const local_mr& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

inline local_mr alloc(two_nodes& t, const connection_actor& c, uint64_t size) {
  auto mr = call<local_mr>(t.sys, c, alloc_local_mr_atom::value, size,
                           uint64_t{64});
  BOOST_REQUIRE_MESSAGE(mr, render(mr));
  return *mr;
}

inline size_t chunk_max(const options& o) {
  return o.max_message_len_bytes - protocol::max_frame_overhead;
}

/// Bytes the connections of `n` hold registered: everything the device has
/// registered except the node's arenas and shared receive buffers (which
/// grow with traffic and stay): their own receive buffers, header slots.
inline uint64_t connection_registrations(node& n) {
  return n.device()->registered_bytes() - n.pool()->stats().registered_bytes
         - n.shared_receive_bytes();
}

/// Sends `value` as 8 bytes on `from` and takes them on `to`.
inline void send_value(caf::actor_system& sys, const connection_actor& from,
                       const connection_actor& to, uint64_t value, size_t idx) {
  auto src = call<local_mr>(sys, from, alloc_local_mr_atom::value, uint64_t{8},
                            uint64_t{8});
  BOOST_REQUIRE_MESSAGE(src, "connection " << idx << ": " << render(src));
  std::memcpy(src->data(), &value, 8);
  auto sent = call<uint64_t>(sys, from, send_data_atom::value, *src);
  BOOST_REQUIRE_MESSAGE(sent, "connection " << idx << ": " << render(sent));
  auto got = call<local_mr>(sys, to, receive_data_atom::value);
  BOOST_REQUIRE_MESSAGE(got, "connection " << idx << ": " << render(got));
  BOOST_REQUIRE_EQUAL(got->size(), 8u);
  uint64_t x = 0;
  std::memcpy(&x, got->data(), 8);
  BOOST_REQUIRE_EQUAL(x, value);
}

/// Ends every client (user_shutdown) and returns how many of `servers`,
/// their peers' ends on the server, went down within 30 s (times the
/// scale).  `clients` is emptied.
inline size_t
end_clients_and_count_downs(two_nodes& t,
                            std::vector<connection_actor>& clients,
                            const std::vector<connection_actor>& servers) {
  caf::scoped_actor watcher{t.server_side.sys};
  for (auto& s : servers)
    watcher->monitor(s);
  for (auto& c : clients)
    caf::anon_send_exit(c, caf::exit_reason::user_shutdown);
  clients.clear();
  size_t down = 0;
  watcher->receive_for(down, servers.size())(
      [](caf::down_msg&) {},
      caf::after(std::chrono::seconds(30 * timeout_scale())) >> [] {});
  return down;
}

} // namespace rdmactor::test
