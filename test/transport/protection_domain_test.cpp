#define BOOST_TEST_MODULE protection_domain
// The soft fabric's protection domain (transport/soft/protection_domain.hpp):
// keys, lookups by kind, access and range checks, and its key table against
// a reference map through growth, shrinking and backward-shift deletion.

#include <boost/test/unit_test.hpp>

#include <array>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "rdmactor/transport/fabric.hpp"
#include "transport/soft/protection_domain.hpp"

using namespace rdmactor::transport;

namespace {

constexpr uint32_t rw
    = access::local_write | access::remote_write | access::remote_read;

} // namespace

BOOST_AUTO_TEST_CASE(keys_are_unique_non_zero_and_of_one_kind) {
  soft::protection_domain pd;
  std::array<uint8_t, 64> mem{};
  std::vector<soft::registration_ptr> regs;
  std::set<uint32_t> keys;
  for (int i = 0; i < 5000; ++i) {
    auto reg = pd.add(mem.data(), mem.size(), rw);
    BOOST_REQUIRE(reg);
    BOOST_TEST((*reg)->lkey != 0u);
    BOOST_TEST((*reg)->rkey != 0u);
    BOOST_TEST(keys.insert((*reg)->lkey).second);
    BOOST_TEST(keys.insert((*reg)->rkey).second);
    regs.push_back(*reg);
  }
  BOOST_TEST(pd.size() == 5000u);
  BOOST_TEST(pd.capacity() >= 4 * pd.size());
  auto at = reinterpret_cast<uint64_t>(mem.data());
  for (auto& reg : regs) {
    BOOST_TEST(pd.find_local(reg->lkey, at, 8, access::local_write) == reg);
    BOOST_TEST(pd.find_remote(reg->rkey, at, 8, access::remote_read) == reg);
    // A key of the other kind names nothing.
    BOOST_TEST(pd.find_local(reg->rkey, at, 8, 0) == nullptr);
    BOOST_TEST(pd.find_remote(reg->lkey, at, 8, 0) == nullptr);
  }
  BOOST_TEST(pd.find_local(0, at, 8, 0) == nullptr);
}

BOOST_AUTO_TEST_CASE(lookups_check_access_and_range) {
  soft::protection_domain pd;
  std::array<uint8_t, 64> mem{};
  auto reg = pd.add(mem.data() + 16, 32, access::remote_read);
  BOOST_REQUIRE(reg);
  auto at = reinterpret_cast<uint64_t>(mem.data());
  auto rkey = (*reg)->rkey;
  BOOST_TEST(pd.find_remote(rkey, at + 16, 32, access::remote_read) == *reg);
  BOOST_TEST(pd.find_remote(rkey, at + 40, 8, access::remote_read) == *reg);
  BOOST_TEST(pd.find_remote(rkey, at + 8, 16, access::remote_read) == nullptr);
  BOOST_TEST(pd.find_remote(rkey, at + 40, 9, access::remote_read) == nullptr);
  BOOST_TEST(pd.find_remote(rkey, at + 16, 8, access::remote_write) == nullptr);
  // Refused registrations add nothing.
  BOOST_TEST(!pd.add(nullptr, 8, access::remote_read));
  BOOST_TEST(!pd.add(mem.data(), 0, access::remote_read));
  BOOST_TEST(!pd.add(mem.data(), 8, access::remote_write));
  BOOST_TEST(!pd.add(mem.data(), 8, 1u << 30));
  BOOST_TEST(pd.size() == 1u);
}

BOOST_AUTO_TEST_CASE(remove_invalidates_once) {
  soft::protection_domain pd;
  std::array<uint8_t, 64> mem{};
  auto a = pd.add(mem.data(), mem.size(), rw);
  auto b = pd.add(mem.data(), mem.size(), rw);
  BOOST_REQUIRE(a && b);
  auto at = reinterpret_cast<uint64_t>(mem.data());
  pd.remove(*a);
  BOOST_TEST(!(*a)->valid);
  BOOST_TEST(pd.find_local((*a)->lkey, at, 8, 0) == nullptr);
  BOOST_TEST(pd.find_remote((*a)->rkey, at, 8, 0) == nullptr);
  BOOST_TEST(pd.size() == 1u);
  pd.remove(*a); // twice: nothing else goes
  pd.remove(nullptr);
  BOOST_TEST(pd.size() == 1u);
  BOOST_TEST(pd.find_remote((*b)->rkey, at, 8, 0) == *b);
}

// Random adds and removes against a reference map: every live key is found,
// every removed key misses, and the table grows and shrinks with its load.
BOOST_AUTO_TEST_CASE(the_key_table_agrees_with_a_reference_map) {
  soft::protection_domain pd;
  std::array<uint8_t, 64> mem{};
  auto at = reinterpret_cast<uint64_t>(mem.data());
  std::mt19937 rng{42};
  std::vector<soft::registration_ptr> live;
  std::vector<uint32_t> gone;
  size_t peak = 0;
  for (int step = 0; step < 40000; ++step) {
    // Grow for the first half, shrink in the second.
    bool add = live.empty() || rng() % 100 < (step < 20000 ? 70u : 25u);
    if (add) {
      auto reg = pd.add(mem.data(), mem.size(), rw);
      BOOST_REQUIRE(reg);
      live.push_back(*reg);
    } else {
      auto i = rng() % live.size();
      auto reg = live[i];
      live[i] = live.back();
      live.pop_back();
      pd.remove(reg);
      gone.push_back(reg->lkey);
      gone.push_back(reg->rkey);
    }
    peak = std::max(peak, pd.capacity());
    BOOST_REQUIRE_EQUAL(pd.size(), live.size());
    BOOST_REQUIRE(pd.capacity() >= 2 * 2 * live.size());
    if (step % 997 == 0) {
      for (auto& reg : live) {
        BOOST_REQUIRE(pd.find_local(reg->lkey, at, 8, 0) == reg);
        BOOST_REQUIRE(pd.find_remote(reg->rkey, at, 8, 0) == reg);
      }
      std::set<uint32_t> keys;
      for (auto& reg : live) {
        keys.insert(reg->lkey);
        keys.insert(reg->rkey);
      }
      for (auto key : gone)
        if (keys.count(key) == 0) {
          BOOST_REQUIRE(pd.find_local(key, at, 8, 0) == nullptr);
          BOOST_REQUIRE(pd.find_remote(key, at, 8, 0) == nullptr);
        }
    }
  }
  for (auto& reg : live)
    pd.remove(reg);
  BOOST_TEST(pd.size() == 0u);
  BOOST_TEST(peak >= 16384u);
  BOOST_TEST(pd.capacity() < peak);
}
