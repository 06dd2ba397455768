#pragma once

// The surviving node of the fault matrix (reliability_test.cpp,
// fault_matrix_test.cpp): its system, the peer it serves throughout, and
// the checks that it reports promptly, keeps serving and returns every
// byte to its allocator.

#include <csignal>
#include <cstring>
#include <map>
#include <sstream>
#include <thread>

#include <caf/event_based_actor.hpp>

#include "test/reliability/peer_process.hpp"
#include "test/reliability/reliability_options.hpp"
#include "transport/soft/faults.hpp"

namespace rdmactor::test {

using namespace std::chrono_literals;

/// Generous bounds: they tell "prompt" from "hangs", nothing finer.  They
/// scale with the request timeout (RDMACTOR_TEST_TIMEOUT_SCALE, set for the
/// emulated VM): a peer that is stopped and then killed while our chunks
/// wait for its credits is only noticed by the chunks' deadlines there.
const std::chrono::seconds down_bound{20 * timeout_scale()};
constexpr auto line_bound = 60s;

inline bool on_soft() {
  return env_or("RDMACTOR_TEST_FABRIC", "soft") == "soft";
}

/// The pattern byte at `offset` for `seed`.
inline uint8_t pattern(uint64_t offset, uint8_t seed) {
  return static_cast<uint8_t>(offset * 31 + seed);
}

inline void fill(local_mr& mr, uint8_t seed, uint64_t first = 0) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = pattern(first + i, seed);
}

inline bool holds_pattern(const local_mr& mr, uint8_t seed,
                          uint64_t first = 0) {
  for (size_t i = 0; i < mr.size(); ++i)
    if (mr.data()[i] != pattern(first + i, seed))
      return false;
  return true;
}

/// Names an outcome: "ok", an rdmactor code, or CAF's error.
inline std::string outcome(const caf::error& err) {
  if (!err)
    return "ok";
  auto code = code_of(err);
  return code != errc::none ? to_string(code) : render(err);
}

/// Returns true when `err` is an answer rather than the caller's own
/// timeout: rdmactor errors, or CAF's "the actor is gone".
inline bool answered(const caf::error& err) {
  if (!err || code_of(err) != errc::none)
    return true;
  return err.category() == caf::atom("system")
         && err.code() == static_cast<uint8_t>(caf::sec::request_receiver_down);
}

/// Watches one actor; `down` waits for its exit reason.
class watch {
public:
  watch(caf::actor_system& sys, const connection_actor& conn)
      : self_(std::make_unique<caf::scoped_actor>(sys)) {
    (*self_)->monitor(conn);
  }

  std::optional<caf::error> down(std::chrono::milliseconds bound) {
    std::optional<caf::error> out;
    (*self_)->receive([&](caf::down_msg& msg) { out = msg.reason; },
                      caf::after(bound) >> [] {});
    return out;
  }

private:
  std::unique_ptr<caf::scoped_actor> self_;
};

/// What a receiving user saw: chunks claimed with receive_data, checked
/// against the pattern of one send_data.
struct verify_book {
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> chunks{0};
  std::atomic<uint64_t> corrupt{0};
  std::atomic<bool> done{false};
  uint8_t seed = 0;
};

/// Claims every chunk of `conn` until it goes, checking each against the
/// pattern at its offset in the sender's buffer.
void verify_loop(caf::event_based_actor* self, connection_actor conn,
                 std::shared_ptr<verify_book> book, uint64_t offset) {
  self->request(conn, 60s, receive_data_atom::value)
      .then(
          [=](local_mr& chunk) {
            if (!holds_pattern(chunk, book->seed, offset))
              ++book->corrupt;
            ++book->chunks;
            book->bytes += chunk.size();
            verify_loop(self, conn, book, offset + chunk.size());
          },
          [=](caf::error& err) {
            if (code_of(err) == errc::request_timeout) {
              verify_loop(self, conn, book, offset);
              return;
            }
            book->done = true;
            self->quit();
          });
}

std::shared_ptr<verify_book> spawn_verifier(caf::actor_system& sys,
                                            const connection_actor& conn,
                                            uint8_t seed) {
  auto book = std::make_shared<verify_book>();
  book->seed = seed;
  // State as spawn arguments: see test/reliability/sanitizers/ubsan.supp.
  sys.spawn([](caf::event_based_actor* self, connection_actor c,
               std::shared_ptr<verify_book> b) { verify_loop(self, c, b, 0); },
            conn, book);
  return book;
}

/// The surviving node, an established peer (the bystander) and a port.
struct survivor_fixture : system_holder {
  options opts = reliability_options();
  std::string host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  std::unique_ptr<node> survivor;
  caf::scoped_actor acceptor{sys};
  uint16_t port = 0;
  std::unique_ptr<node> bystander;
  connection_actor bystander_conn;
  connection_actor bystander_peer; // the survivor's end: a connection
                                   // lives while someone holds it

  survivor_fixture() {
    survivor = open(opts);
    auto p
        = survivor->listen(host + ":0", caf::actor_cast<caf::actor>(acceptor));
    BOOST_REQUIRE_MESSAGE(p, render(p));
    port = *p;
    bystander = open(opts);
    auto c = bystander->connect(address());
    BOOST_REQUIRE_MESSAGE(c, render(c));
    bystander_conn = *c;
    bystander_peer = accept_next();
  }

  ~survivor_fixture() {
    bystander->close();
    survivor->close();
  }

  std::unique_ptr<node> open(const options& o) {
    auto n = node::open(sys, o);
    BOOST_REQUIRE_MESSAGE(n, render(n));
    return std::move(*n);
  }

  std::string address() const {
    return host + ":" + std::to_string(port);
  }

  /// Returns the survivor's end of the next accepted connection.
  connection_actor accept_next() {
    connection_actor c;
    acceptor->receive([&](accepted_atom, connection_actor& x) { c = x; },
                      caf::after(std::chrono::seconds(30)) >> [] {});
    BOOST_REQUIRE_MESSAGE(c, "no connection accepted within 30 s");
    return c;
  }

  /// Starts reliability_peer against the survivor.
  std::unique_ptr<peer_process> start_peer(const std::string& mode,
                                           uint64_t bytes, uint64_t count = 8) {
    auto p = std::make_unique<peer_process>(
        RDMACTOR_RELIABILITY_PEER,
        std::vector<std::string>{address(), mode, std::to_string(bytes),
                                 std::to_string(count)});
    BOOST_REQUIRE(p->started());
    return p;
  }

  /// One round trip with verified content on `conn`: allocate on the peer,
  /// write, read back, compare, release.
  void round_trip(const connection_actor& conn, const std::string& who) {
    auto rmr = call<remote_mr>(sys, conn, request_remote_mr_atom::value,
                               uint64_t{4096}, uint64_t{64});
    BOOST_REQUIRE_MESSAGE(rmr, who << ": request_remote_mr: " << render(rmr));
    auto src = call<local_mr>(sys, conn, alloc_local_mr_atom::value,
                              uint64_t{4096}, uint64_t{64});
    auto dst = call<local_mr>(sys, conn, alloc_local_mr_atom::value,
                              uint64_t{4096}, uint64_t{64});
    BOOST_REQUIRE(src && dst);
    fill(*src, 42);
    auto w = call<uint64_t>(sys, conn, write_atom::value, *src, *rmr);
    BOOST_REQUIRE_MESSAGE(w, who << ": write: " << render(w));
    auto r = call<uint64_t>(sys, conn, read_atom::value, *dst, *rmr);
    BOOST_REQUIRE_MESSAGE(r, who << ": read: " << render(r));
    BOOST_TEST(holds_pattern(*dst, 42), who << ": read back other bytes");
    auto rel = call<uint64_t>(sys, conn, release_atom::value, *rmr);
    BOOST_TEST(static_cast<bool>(rel), who << ": release: " << render(rel));
  }

  /// The survivor still serves its established peer and a new connection.
  void expect_serving(const std::string& when) {
    round_trip(bystander_conn, when + ", established peer");
    auto fresh = open(opts);
    auto c = fresh->connect(address());
    BOOST_REQUIRE_MESSAGE(c, when << ", new connection: " << render(c));
    auto survivor_end = accept_next();
    round_trip(*c, when + ", new connection");
    fresh->close();
  }

  /// `n`'s allocator returns to zero bytes in use.
  void expect_memory_back(node& n, const std::string& who) {
    auto back = eventually([&] { return n.memory_stats().bytes_in_use == 0; },
                           std::chrono::seconds(20));
    BOOST_TEST(back, who << " still has " << n.memory_stats().bytes_in_use
                         << " bytes in use");
  }

  agent_stats stats_of(const connection_actor& conn) {
    auto s = call<agent_stats>(sys, conn, stats_atom::value);
    return s ? *s : agent_stats{};
  }

  /// Waits for `w`'s connection to go down and reports its reason.
  caf::error expect_down(watch& w, const std::string& what) {
    auto reason = w.down(down_bound);
    BOOST_REQUIRE_MESSAGE(reason, what << ": the survivor did not notice "
                                          "within "
                                       << down_bound.count() << " s");
    BOOST_TEST_MESSAGE(what << ": survivor reports " << render(*reason));
    return *reason;
  }
};

} // namespace rdmactor::test
