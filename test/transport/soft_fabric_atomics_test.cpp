// Soft-fabric-only tests: the responder's atomics unit, its validation
// and atomicity.

#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <thread>

#include "test/transport/soft_fabric_fixture.hpp"
#include "transport/soft/atomics.hpp"
#include "transport/soft/protection_domain.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

constexpr uint32_t rwa
    = local_write | remote_write | remote_read | remote_atomic;

} // namespace

// -- atomics: the responder's validation and atomicity -----------------------

BOOST_AUTO_TEST_SUITE(soft_atomics)

BOOST_AUTO_TEST_CASE(the_unit_executes_fetch_add_and_compare_swap) {
  soft::protection_domain pd;
  alignas(8) std::array<uint8_t, 64> mem{};
  auto reg = pd.add(mem.data(), mem.size(), rwa);
  BOOST_REQUIRE(reg);
  soft::atomic_unit unit;
  auto at = reinterpret_cast<uint64_t>(mem.data()) + 8;
  auto r = unit.execute(pd, atomic_op::fetch_add, (*reg)->rkey, at, 5, 0);
  BOOST_TEST(r.status == wc_status::success);
  BOOST_TEST(r.old_value == 0u);
  r = unit.execute(pd, atomic_op::fetch_add, (*reg)->rkey, at, 7, 0);
  BOOST_TEST(r.old_value == 5u);
  BOOST_TEST(word_at(mem.data() + 8) == 12u);
  // Wraps around.
  r = unit.execute(pd, atomic_op::fetch_add, (*reg)->rkey, at, ~uint64_t{0}, 0);
  BOOST_TEST(word_at(mem.data() + 8) == 11u);
  // CAS: a mismatch leaves the word; a match swaps.
  r = unit.execute(pd, atomic_op::compare_swap, (*reg)->rkey, at, 3, 99);
  BOOST_TEST(r.status == wc_status::success);
  BOOST_TEST(r.old_value == 11u);
  BOOST_TEST(word_at(mem.data() + 8) == 11u);
  r = unit.execute(pd, atomic_op::compare_swap, (*reg)->rkey, at, 11, 99);
  BOOST_TEST(r.old_value == 11u);
  BOOST_TEST(word_at(mem.data() + 8) == 99u);
  // The neighbours are untouched.
  BOOST_TEST(word_at(mem.data()) == 0u);
  BOOST_TEST(word_at(mem.data() + 16) == 0u);
}

BOOST_AUTO_TEST_CASE(the_unit_refuses_what_a_nic_refuses_and_touches_nothing) {
  soft::protection_domain pd;
  alignas(8) std::array<uint8_t, 64> mem{};
  mem.fill(0x5C);
  alignas(8) std::array<uint8_t, 64> plain{};
  auto reg = pd.add(mem.data(), mem.size(), rwa);
  auto no_atomic
      = pd.add(plain.data(), plain.size(), local_write | remote_write);
  BOOST_REQUIRE(reg);
  BOOST_REQUIRE(no_atomic);
  soft::atomic_unit unit;
  auto base = reinterpret_cast<uint64_t>(mem.data());
  auto rkey = (*reg)->rkey;
  struct bad_case {
    const char* what;
    uint32_t rkey;
    uint64_t addr;
    wc_status expect;
  };
  const bad_case cases[] = {
      {"unknown rkey", rkey ^ 0x5A5A5A5Au, base,
       wc_status::remote_access_error},
      {"lkey as rkey", (*reg)->lkey, base, wc_status::remote_access_error},
      {"past the end", rkey, base + 64, wc_status::remote_access_error},
      {"straddles the end", rkey, base + 60, wc_status::remote_access_error},
      {"before the start", rkey, base - 8, wc_status::remote_access_error},
      {"address wraps", rkey, ~uint64_t{0} - 3, wc_status::remote_access_error},
      {"misaligned", rkey, base + 4, wc_status::remote_operation_error},
      {"no remote_atomic", (*no_atomic)->rkey,
       reinterpret_cast<uint64_t>(plain.data()),
       wc_status::remote_access_error},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.what) {
      for (auto op : {atomic_op::fetch_add, atomic_op::compare_swap}) {
        auto r = unit.execute(pd, op, c.rkey, c.addr, 0x5C5C5C5C5C5C5C5Cu, 1);
        BOOST_TEST(r.status == c.expect);
        BOOST_TEST(r.why != nullptr);
      }
    }
  }
  BOOST_TEST(all_bytes(mem.data(), mem.size(), 0x5C));
  BOOST_TEST(all_bytes(plain.data(), plain.size(), 0));
  // Deregistered: refused as well.
  pd.remove(*reg);
  auto r = unit.execute(pd, atomic_op::fetch_add, rkey, base, 1, 0);
  BOOST_TEST(r.status == wc_status::remote_access_error);
  BOOST_TEST(all_bytes(mem.data(), mem.size(), 0x5C));
}

BOOST_AUTO_TEST_CASE(the_unit_is_atomic_across_threads) {
  soft::protection_domain pd;
  alignas(8) std::array<uint8_t, 64> mem{};
  auto reg = pd.add(mem.data(), mem.size(), rwa);
  BOOST_REQUIRE(reg);
  soft::atomic_unit unit;
  auto at = reinterpret_cast<uint64_t>(mem.data());
  constexpr int threads = 4;
  constexpr int per_thread = 20000;
  std::vector<std::thread> ts;
  std::atomic<int> cas_wins{0};
  for (int i = 0; i < threads; ++i)
    ts.emplace_back([&, i] {
      for (int k = 0; k < per_thread; ++k) {
        unit.execute(pd, atomic_op::fetch_add, (*reg)->rkey, at, 1, 0);
        // A CAS of the second word from k to k + 1: exactly one thread
        // wins each step.
        auto r = unit.execute(pd, atomic_op::compare_swap, (*reg)->rkey, at + 8,
                              uint64_t(k), uint64_t(k + 1));
        if (r.old_value == uint64_t(k))
          ++cas_wins;
      }
      static_cast<void>(i);
    });
  for (auto& t : ts)
    t.join();
  auto total = unit.execute(pd, atomic_op::fetch_add, (*reg)->rkey, at, 0, 0);
  BOOST_TEST(total.old_value == uint64_t{threads} * per_thread);
  auto second
      = unit.execute(pd, atomic_op::fetch_add, (*reg)->rkey, at + 8, 0, 0);
  BOOST_TEST(second.old_value == uint64_t(cas_wins.load()));
}

BOOST_AUTO_TEST_SUITE_END()
