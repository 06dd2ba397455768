#define BOOST_TEST_MODULE atomics
#include <boost/test/unit_test.hpp>

// Atomics on a peer's memory through the connection (fetch_add,
// compare_swap), on the fabric RDMACTOR_TEST_FABRIC names: this suite runs
// as atomics_test (soft) and atomics_test_verbs (Soft-RoCE VM).
// RDMACTOR_TEST_ROUNDTRIPS scales the contention cases (default 100000
// fetch_adds in all; the verbs registration uses fewer).

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "test/actors/fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

local_mr alloc(two_nodes& t, const connection_actor& c, uint64_t size) {
  auto mr = call<local_mr>(t.sys, c, alloc_local_mr_atom::value, size,
                           uint64_t{64});
  BOOST_REQUIRE_MESSAGE(mr, render(mr));
  return *mr;
}

uint64_t word_of(const local_mr& mr, size_t offset = 0) {
  uint64_t x = 0;
  std::memcpy(&x, mr.data() + offset, 8);
  return x;
}

/// The server lends `region` to the client over one connection (SendMR
/// LOCAL); returns the client's handle.
remote_mr lend(two_nodes& t, const connection_actor& server_conn,
               const connection_actor& client_conn, const local_mr& region) {
  auto token = call<mr_token>(t.sys, server_conn, send_mr_atom::value, region);
  BOOST_REQUIRE_MESSAGE(token, render(token));
  auto rmr = call<remote_mr>(t.sys, client_conn, receive_remote_mr_atom::value);
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  return *rmr;
}

caf::expected<uint64_t> fetch_add(two_nodes& t, const connection_actor& c,
                                  const remote_mr& word, uint64_t add) {
  return call<uint64_t>(t.sys, c, fetch_add_atom::value, word, add);
}

caf::expected<uint64_t> cas(two_nodes& t, const connection_actor& c,
                            const remote_mr& word, uint64_t expected,
                            uint64_t desired) {
  return call<uint64_t>(t.sys, c, compare_swap_atom::value, word, expected,
                        desired);
}

uint64_t total_ops() {
  auto v = std::stoull(env_or("RDMACTOR_TEST_ROUNDTRIPS", "100000"));
  return std::max<uint64_t>(v, 400);
}

/// Connections from one client node to one server node: `n` pairs
/// (client end, server end).
struct connections {
  std::vector<connection_actor> client;
  std::vector<connection_actor> server;
};

connections connect_n(two_nodes& t, size_t n) {
  connections cs;
  cs.client.push_back(t.client_conn);
  cs.server.push_back(t.server_conn);
  while (cs.client.size() < n) {
    t.connect();
    cs.client.push_back(t.client_conn);
    cs.server.push_back(t.server_conn);
  }
  return cs;
}

// -- a peer that keeps `window` fetch_adds in flight -------------------------

struct adder_state {
  connection_actor conn;
  remote_mr word;
  uint64_t count = 0;
  uint64_t sent = 0;
  uint64_t done = 0;
  std::vector<uint64_t> olds;
  caf::actor report;
  bool failed = false;
};

using adder_ptr = caf::stateful_actor<adder_state>*;

void add_next(adder_ptr self) {
  auto& st = self->state;
  if (st.sent >= st.count || st.failed)
    return;
  ++st.sent;
  self->request(st.conn, std::chrono::seconds(60 * timeout_scale()),
                fetch_add_atom::value, st.word, uint64_t{1})
      .then(
          [self](uint64_t old) {
            auto& s = self->state;
            s.olds.push_back(old);
            if (++s.done == s.count) {
              self->send(s.report, std::move(s.olds));
              self->quit();
              return;
            }
            add_next(self);
          },
          [self](caf::error& err) {
            auto& s = self->state;
            if (s.failed)
              return;
            s.failed = true;
            self->send(s.report, render(err));
            self->quit();
          });
}

caf::behavior adder(adder_ptr self, connection_actor conn, remote_mr word,
                    uint64_t count, uint32_t window, caf::actor report) {
  auto& st = self->state;
  st.conn = std::move(conn);
  st.word = std::move(word);
  st.count = count;
  st.report = std::move(report);
  st.olds.reserve(count);
  for (uint32_t i = 0; i < window; ++i)
    add_next(self);
  return {[](caf::unit_t) {}};
}

// -- a peer that takes a CAS lock around a read-modify-write -----------------

struct locker_state {
  connection_actor conn;
  remote_mr lock;
  remote_mr counter;
  local_mr scratch;
  uint64_t id = 0;
  uint64_t rounds = 0;
  uint64_t done = 0;
  uint64_t violations = 0;
  caf::actor report;
};

using locker_ptr = caf::stateful_actor<locker_state>*;

std::chrono::seconds op_timeout() {
  return std::chrono::seconds(60 * timeout_scale());
}

void locker_fail(locker_ptr self, const caf::error& err) {
  self->send(self->state.report, render(err));
  self->quit();
}

void acquire(locker_ptr self);

void release(locker_ptr self) {
  auto& st = self->state;
  self->request(st.conn, op_timeout(), compare_swap_atom::value, st.lock, st.id,
                uint64_t{0})
      .then(
          [self](uint64_t old) {
            auto& s = self->state;
            if (old != s.id)
              ++s.violations; // someone else held our lock
            if (++s.done == s.rounds) {
              self->send(s.report, s.violations);
              self->quit();
              return;
            }
            acquire(self);
          },
          [self](caf::error& err) { locker_fail(self, err); });
}

void critical_section(locker_ptr self) {
  auto& st = self->state;
  // Not atomic on purpose: read, add one, write back.
  self->request(st.conn, op_timeout(), read_atom::value, st.scratch, st.counter)
      .then(
          [self](uint64_t) {
            auto& s = self->state;
            auto v = word_of(s.scratch) + 1;
            std::memcpy(s.scratch.data(), &v, 8);
            self->request(s.conn, op_timeout(), write_atom::value, s.scratch,
                          s.counter)
                .then([self](uint64_t) { release(self); },
                      [self](caf::error& err) { locker_fail(self, err); });
          },
          [self](caf::error& err) { locker_fail(self, err); });
}

void acquire(locker_ptr self) {
  auto& st = self->state;
  self->request(st.conn, op_timeout(), compare_swap_atom::value, st.lock,
                uint64_t{0}, st.id)
      .then(
          [self](uint64_t old) {
            if (old == 0)
              critical_section(self);
            else
              acquire(self); // held: try again
          },
          [self](caf::error& err) { locker_fail(self, err); });
}

caf::behavior locker(locker_ptr self, connection_actor conn, remote_mr lock,
                     remote_mr counter, local_mr scratch, uint64_t id,
                     uint64_t rounds, caf::actor report) {
  auto& st = self->state;
  st.conn = std::move(conn);
  st.lock = std::move(lock);
  st.counter = std::move(counter);
  st.scratch = std::move(scratch);
  st.id = id;
  st.rounds = rounds;
  st.report = std::move(report);
  acquire(self);
  return {[](caf::unit_t) {}};
}

} // namespace

BOOST_AUTO_TEST_SUITE(atomics)

BOOST_AUTO_TEST_CASE(fetch_add_returns_old_values_and_ends_at_the_sum) {
  two_nodes t;
  // Memory the peer allocated for us (AllocMR) carries remote-atomic access.
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{64}, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  auto word = rmr->slice(8, 8);
  BOOST_REQUIRE(word);
  uint64_t expect = 0;
  for (uint64_t add :
       {uint64_t{1}, uint64_t{41}, uint64_t{1} << 40, uint64_t{7}}) {
    auto old = fetch_add(t, t.client_conn, *word, add);
    BOOST_REQUIRE_MESSAGE(old, render(old));
    BOOST_TEST(*old == expect);
    expect += add;
  }
  // Wrapping: adding 2^64 - 1 subtracts one.
  auto old = fetch_add(t, t.client_conn, *word, ~uint64_t{0});
  BOOST_REQUIRE(old);
  BOOST_TEST(*old == expect);
  expect -= 1;
  // The word and only the word changed; a longer slice works on its
  // first 8 bytes.
  auto tail = rmr->slice(8, 56);
  BOOST_REQUIRE(tail);
  old = fetch_add(t, t.client_conn, *tail, 0);
  BOOST_REQUIRE(old);
  BOOST_TEST(*old == expect);
  auto back = alloc(t, t.client_conn, 64);
  auto n = call<uint64_t>(t.sys, t.client_conn, read_atom::value, back, *rmr);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(word_of(back, 0) == 0u);
  BOOST_TEST(word_of(back, 8) == expect);
  BOOST_TEST(word_of(back, 16) == 0u);
}

BOOST_AUTO_TEST_CASE(compare_swap_succeeds_only_on_the_expected_value) {
  two_nodes t;
  auto region = alloc(t, t.server_conn, 64);
  auto rmr = lend(t, t.server_conn, t.client_conn, region);
  // Failure: the word is 0, not 5; it stays 0.
  auto old = cas(t, t.client_conn, rmr, 5, 9);
  BOOST_REQUIRE_MESSAGE(old, render(old));
  BOOST_TEST(*old == 0u);
  // Success: 0 -> 9.
  old = cas(t, t.client_conn, rmr, 0, 9);
  BOOST_REQUIRE(old);
  BOOST_TEST(*old == 0u);
  // Failure again (the word is 9 now).
  old = cas(t, t.client_conn, rmr, 0, 11);
  BOOST_REQUIRE(old);
  BOOST_TEST(*old == 9u);
  old = cas(t, t.client_conn, rmr, 9, ~uint64_t{0});
  BOOST_REQUIRE(old);
  BOOST_TEST(*old == 9u);
  // What the owner's CPU sees once the operations completed.
  auto now = fetch_add(t, t.client_conn, rmr, 0);
  BOOST_REQUIRE(now);
  BOOST_TEST(*now == ~uint64_t{0});
}

BOOST_AUTO_TEST_CASE(bad_words_are_refused_locally_with_a_clear_code) {
  two_nodes t;
  auto rmr
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{64}, uint64_t{64});
  BOOST_REQUIRE_MESSAGE(rmr, render(rmr));
  auto misaligned = rmr->slice(4, 8);
  BOOST_REQUIRE(misaligned);
  auto r = fetch_add(t, t.client_conn, *misaligned, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::misaligned);
  BOOST_TEST(render(r.error()).find("aligned") != std::string::npos,
             render(r.error()));
  r = cas(t, t.client_conn, *misaligned, 0, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::misaligned);
  auto small = rmr->slice(0, 4);
  BOOST_REQUIRE(small);
  r = fetch_add(t, t.client_conn, *small, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::out_of_bounds);
  r = fetch_add(t, t.client_conn, remote_mr{}, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::invalid_argument);
  // A released region.
  auto gone
      = call<remote_mr>(t.sys, t.client_conn, request_remote_mr_atom::value,
                        uint64_t{64}, uint64_t{64});
  BOOST_REQUIRE(gone);
  BOOST_REQUIRE(
      call<uint64_t>(t.sys, t.client_conn, release_atom::value, *gone));
  r = fetch_add(t, t.client_conn, *gone, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::invalid_argument);
  // A handle of another connection.
  auto first_client = t.client_conn;
  auto first_server = t.server_conn; // its last handle would close it
  t.connect();
  r = fetch_add(t, t.client_conn, *rmr, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::invalid_argument);
  // Nothing was touched, and the connection still works.
  auto old = fetch_add(t, first_client, *rmr, 0);
  BOOST_REQUIRE_MESSAGE(old, render(old));
  BOOST_TEST(*old == 0u);
}

BOOST_AUTO_TEST_CASE(a_region_without_remote_atomic_access_is_refused) {
  two_nodes t;
  // Registered for remote reads and writes only.
  auto plain = t.server->pool()->allocate(64, 64,
                                          transport::access::local_write
                                              | transport::access::remote_write
                                              | transport::access::remote_read);
  BOOST_REQUIRE_MESSAGE(plain, render(plain));
  std::memset(plain->data(), 0x5C, 64);
  auto rmr = lend(t, t.server_conn, t.client_conn, *plain);
  auto r = fetch_add(t, t.client_conn, rmr, 1);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::remote_access_error,
             render(r.error()));
  BOOST_TEST(render(r.error()).find("remote-atomic") != std::string::npos,
             render(r.error()));
  BOOST_TEST(std::all_of(plain->data(), plain->data() + 64,
                         [](uint8_t b) { return b == 0x5C; }));
}

BOOST_AUTO_TEST_CASE(four_peers_fetch_add_to_the_exact_sum) {
  // Four connections to one node whose device runs four event loops (on
  // soft): the atomics of different connections run on different threads.
  auto o = test_options();
  o.engine_threads = 4;
  two_nodes t{o};
  constexpr size_t peers = 4;
  auto cs = connect_n(t, peers);
  auto region = alloc(t, cs.server[0], 64);
  const uint64_t per_peer = total_ops() / peers;
  caf::scoped_actor collector{t.sys};
  std::vector<remote_mr> words;
  for (size_t i = 0; i < peers; ++i) {
    auto word = lend(t, cs.server[i], cs.client[i], region);
    words.push_back(word);
    t.sys.spawn(adder, cs.client[i], word, per_peer, uint32_t{32},
                caf::actor{collector});
  }
  std::vector<uint64_t> olds;
  std::vector<std::string> errors;
  size_t reports = 0;
  collector->receive_for(reports, peers)(
      [&](std::vector<uint64_t>& xs) {
        olds.insert(olds.end(), xs.begin(), xs.end());
      },
      [&](std::string& err) { errors.push_back(err); },
      caf::after(std::chrono::seconds(300 * timeout_scale())) >>
          [&] { BOOST_FAIL("the adders stalled"); });
  for (auto& e : errors)
    BOOST_ERROR("an adder failed: " << e);
  BOOST_REQUIRE_EQUAL(olds.size(), per_peer * peers);
  // Every old value 0 .. n-1 exactly once: no two adds saw the same word.
  std::sort(olds.begin(), olds.end());
  size_t wrong = 0;
  for (size_t i = 0; i < olds.size(); ++i)
    wrong += olds[i] != i ? 1 : 0;
  BOOST_TEST(wrong == 0u);
  auto sum = fetch_add(t, cs.client[0], words[0], 0);
  BOOST_REQUIRE_MESSAGE(sum, render(sum));
  BOOST_TEST(*sum == per_peer * peers);
}

BOOST_AUTO_TEST_CASE(a_cas_lock_never_lets_two_peers_in) {
  two_nodes t;
  constexpr size_t peers = 4;
  auto cs = connect_n(t, peers);
  auto lock_region = alloc(t, cs.server[0], 64);
  auto counter_region = alloc(t, cs.server[0], 64);
  const uint64_t rounds = std::max<uint64_t>(10, total_ops() / 500);
  caf::scoped_actor collector{t.sys};
  remote_mr lock0;
  remote_mr counter0;
  for (size_t i = 0; i < peers; ++i) {
    auto lock = lend(t, cs.server[i], cs.client[i], lock_region);
    auto counter = lend(t, cs.server[i], cs.client[i], counter_region);
    if (i == 0) {
      lock0 = lock;
      counter0 = counter;
    }
    auto counter_word = counter.slice(0, 8);
    BOOST_REQUIRE(counter_word);
    auto scratch = alloc(t, cs.client[i], 8);
    t.sys.spawn(locker, cs.client[i], lock, *counter_word, scratch,
                uint64_t{i + 1}, rounds, caf::actor{collector});
  }
  uint64_t violations = 0;
  std::vector<std::string> errors;
  size_t reports = 0;
  collector->receive_for(reports, peers)(
      [&](uint64_t v) { violations += v; },
      [&](std::string& err) { errors.push_back(err); },
      caf::after(std::chrono::seconds(300 * timeout_scale())) >>
          [&] { BOOST_FAIL("the lockers stalled"); });
  for (auto& e : errors)
    BOOST_ERROR("a locker failed: " << e);
  BOOST_TEST(violations == 0u);
  // Every increment survived: no two peers were inside at once.
  auto scratch = alloc(t, cs.client[0], 64);
  auto n = call<uint64_t>(t.sys, cs.client[0], read_atom::value, scratch,
                          counter0);
  BOOST_REQUIRE_MESSAGE(n, render(n));
  BOOST_TEST(word_of(scratch) == rounds * peers);
  auto free = fetch_add(t, cs.client[0], lock0, 0);
  BOOST_REQUIRE(free);
  BOOST_TEST(*free == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
