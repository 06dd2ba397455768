#define BOOST_TEST_MODULE held_regions
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <memory>
#include <vector>

#include "actors/core/held_regions.hpp"
#include "rdmactor/error.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

const auto t0 = clock_type::now();

struct pool_fixture {
  std::shared_ptr<fuzz::fake_device> dev
      = std::make_shared<fuzz::fake_device>();
  memory_pool_ptr pool = std::make_shared<memory_pool>(dev, 1 << 20, 1 << 24);

  local_mr region(uint64_t len) {
    auto mr = pool->allocate(len, 64, transport::access::all);
    BOOST_REQUIRE(mr);
    return std::move(*mr);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(held_regions_suite, pool_fixture)

BOOST_AUTO_TEST_CASE(the_peers_allocations_count_to_its_quota) {
  held_regions h{2, 1000};
  BOOST_TEST(h.quota_allows(1000));
  BOOST_TEST(!h.quota_allows(1001));
  auto a = h.hold(region(600), true, 0, t0, *pool);
  BOOST_REQUIRE(a);
  BOOST_TEST(h.peer_bytes() == 600u);
  BOOST_TEST(h.peer_mrs() == 1u);
  BOOST_TEST(h.quota_allows(400));
  BOOST_TEST(!h.quota_allows(401));
  // Lent memory (not the peer's allocation) does not count.
  BOOST_REQUIRE(h.hold(region(5000), false, 0, t0, *pool));
  BOOST_TEST(h.peer_bytes() == 600u);
  BOOST_REQUIRE(h.hold(region(100), true, 0, t0, *pool));
  BOOST_TEST(!h.quota_allows(1)); // two regions: peer-max-mrs
  BOOST_TEST(h.size() == 3u);
  auto mr = h.release(*a);
  BOOST_REQUIRE(mr);
  BOOST_TEST(mr->size() == 600u);
  BOOST_TEST(h.peer_bytes() == 100u);
  BOOST_TEST(h.peer_mrs() == 1u);
  BOOST_TEST(h.quota_allows(900));
}

BOOST_AUTO_TEST_CASE(a_region_is_held_once_and_released_once) {
  held_regions h{10, 1 << 20};
  auto mr = region(64);
  auto token = h.hold(mr, false, 0, t0, *pool);
  BOOST_REQUIRE(token);
  BOOST_TEST((*token == mr.token())); // no lease: the arena's token
  auto again = h.hold(mr, false, 0, t0, *pool);
  BOOST_REQUIRE(!again);
  BOOST_TEST(code_of(again.error()) == errc::already_sent);
  BOOST_TEST(h.release(*token).has_value());
  BOOST_TEST(!h.release(*token).has_value());
  BOOST_TEST(h.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_lease_has_a_token_of_its_own_and_ends) {
  held_regions h{10, 1 << 20};
  auto mr = region(64);
  auto token = h.hold(mr, true, 100, t0, *pool);
  BOOST_REQUIRE(token);
  BOOST_TEST(token->rkey != mr.token().rkey); // revocable alone
  BOOST_TEST(token->addr == mr.token().addr);
  std::vector<mr_token> revoked;
  auto note = [&](const mr_token& t, const owned_mr&) { revoked.push_back(t); };
  BOOST_TEST((h.expire(t0 + milliseconds{99}, note) == t0 + milliseconds{100}));
  BOOST_TEST(revoked.empty());
  BOOST_TEST((h.expire(t0 + milliseconds{100}, note)
              == clock_type::time_point::max()));
  BOOST_REQUIRE(revoked.size() == 1u);
  BOOST_TEST((revoked[0] == *token));
  BOOST_TEST(h.size() == 0u);
  BOOST_TEST(h.peer_bytes() == 0u); // the quota came back
}

BOOST_AUTO_TEST_CASE(a_renewal_extends_at_most_by_the_lent_duration) {
  held_regions h{10, 1 << 20};
  auto token = h.hold(region(64), false, 100, t0, *pool);
  BOOST_REQUIRE(token);
  auto grant = h.renew(*token, 1000, t0 + milliseconds{50});
  BOOST_REQUIRE(grant.has_value());
  BOOST_TEST(*grant == 100u);
  std::vector<mr_token> revoked;
  auto note = [&](const mr_token& t, const owned_mr&) { revoked.push_back(t); };
  BOOST_TEST(
      (h.expire(t0 + milliseconds{120}, note) == t0 + milliseconds{150}));
  BOOST_TEST(revoked.empty());
  BOOST_TEST((h.renew(*token, 10, t0 + milliseconds{140}) == 10u));
  h.expire(t0 + milliseconds{150}, note);
  BOOST_TEST(revoked.size() == 1u);
  // Gone: no renewal brings it back.
  BOOST_TEST(!h.renew(*token, 100, t0 + milliseconds{151}).has_value());
}

BOOST_AUTO_TEST_CASE(only_leases_can_be_renewed) {
  held_regions h{10, 1 << 20};
  auto token = h.hold(region(64), false, 0, t0, *pool);
  BOOST_REQUIRE(token);
  BOOST_TEST(!h.renew(*token, 100, t0).has_value());
  BOOST_TEST(!h.renew(mr_token{1, 2, 3}, 100, t0).has_value());
}

BOOST_AUTO_TEST_CASE(take_all_hands_everything_over_and_resets_the_quota) {
  held_regions h{2, 1000};
  BOOST_REQUIRE(h.hold(region(500), true, 0, t0, *pool));
  BOOST_REQUIRE(h.hold(region(500), true, 100, t0, *pool));
  BOOST_TEST(!h.quota_allows(1));
  auto all = h.take_all();
  BOOST_TEST(all.size() == 2u);
  BOOST_TEST(h.size() == 0u);
  BOOST_TEST(h.peer_bytes() == 0u);
  BOOST_TEST(h.quota_allows(1000));
}

BOOST_AUTO_TEST_SUITE_END()
