// mr_exchange_test: the memory-region requests of the protocol core
// (actors/core/mr_exchange.hpp) alone, behind a fake core_port.

#define BOOST_TEST_MODULE mr_exchange_test
#include <boost/test/unit_test.hpp>

#include "actors/core/mr_exchange.hpp"
#include "test/actors/core/core_port_fixture.hpp"

namespace {

/// A peer's quota: two regions, 4 KiB.
struct quota_fixture : core_port_fixture {
  quota_fixture() {
    core.opts_.peer_max_mrs = 2;
    core.opts_.peer_max_alloc_bytes = 4096;
  }
};

struct exchange_fixture : quota_fixture {
  mr_exchange regions{core};

  /// The response the fake core sent last.
  const pb::Response& last_answer() const {
    BOOST_REQUIRE(!core.unsolicited.empty() || !core.rejected.empty());
    return core.rejected.empty() ? core.unsolicited.back().response()
                                 : core.rejected.back().response();
  }

  /// Answers our request `i` with `res`.
  void answer(size_t i, const pb::Message& res) {
    BOOST_REQUIRE(i < core.answers.size());
    core.answers[i](&res.response(), caf::none);
  }
};

pb::AllocMR alloc_req(uint64_t size) {
  pb::AllocMR req;
  req.set_size(size);
  req.set_align(64);
  return req;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(mr_exchange_alone, exchange_fixture)

// The peer allocates within its quota and releases: every byte returns.
BOOST_AUTO_TEST_CASE(the_peers_alloc_and_release_return_every_byte) {
  auto before = pool->stats().bytes_in_use;
  regions.on_alloc_mr(1, alloc_req(1024));
  BOOST_REQUIRE_EQUAL(core.unsolicited.size(), 1u);
  const auto& res = core.unsolicited[0].response().alloc_mr();
  BOOST_TEST(res.status() == pb::OK);
  BOOST_TEST(regions.held().peer_bytes() == 1024u);
  BOOST_TEST(regions.held().peer_mrs() == 1u);
  pb::ReleaseMR rel;
  *rel.mutable_token() = res.token();
  regions.on_release_mr(2, rel);
  BOOST_TEST(core.unsolicited.back().response().release_mr().status()
             == pb::OK);
  BOOST_TEST(regions.held().size() == 0u);
  BOOST_TEST(pool->stats().bytes_in_use == before);
  BOOST_TEST(core.accepts == 2);
}

BOOST_AUTO_TEST_CASE(an_alloc_over_the_quota_is_refused) {
  regions.on_alloc_mr(1, alloc_req(4096));
  regions.on_alloc_mr(2, alloc_req(64));
  BOOST_REQUIRE_EQUAL(core.rejected.size(), 1u);
  BOOST_TEST(core.rejected[0].response().alloc_mr().status()
             == pb::QUOTA_EXCEEDED);
  BOOST_TEST(regions.held().peer_mrs() == 1u);
}

BOOST_AUTO_TEST_CASE(a_release_of_an_unknown_token_is_refused) {
  pb::ReleaseMR rel;
  *rel.mutable_token() = pb::make_token(mr_token{0x1000, 64, 7});
  regions.on_release_mr(1, rel);
  BOOST_TEST(last_answer().release_mr().status() == pb::UNKNOWN_TOKEN);
  BOOST_TEST(core.violations == 1);
}

// A lent region is held until the peer answers; a refusal drops it.
BOOST_AUTO_TEST_CASE(a_refused_lending_holds_nothing) {
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  std::optional<caf::expected<mr_token>> got;
  regions.lend(*mr, core.now_, [&](caf::expected<mr_token> x) { got = x; });
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  BOOST_TEST(core.requests[0].request().send_mr().kind() == pb::SendMR::LOCAL);
  BOOST_TEST(regions.held().size() == 1u);
  answer(0, pb::make_send_mr_response(1, pb::QUOTA_EXCEEDED, "full"));
  BOOST_REQUIRE(got && !*got);
  BOOST_TEST(regions.held().size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_lease_needs_the_peers_offer) {
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  std::optional<caf::expected<mr_token>> got;
  regions.lend(
      *mr, core.now_, [&](caf::expected<mr_token> x) { got = x; }, 0, 1000);
  BOOST_REQUIRE(got && !*got);
  BOOST_TEST(got->error().code() == static_cast<uint8_t>(errc::not_negotiated));
  BOOST_TEST(core.requests.empty());
  BOOST_TEST(regions.held().size() == 0u);
}

// A lease ends at its time unless renewed; the revoked entry goes.
BOOST_AUTO_TEST_CASE(a_lease_ends_unless_renewed) {
  core.offered_ |= pb::EXT_LEASES;
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  std::optional<caf::expected<mr_token>> got;
  regions.lend(
      *mr, core.now_, [&](caf::expected<mr_token> x) { got = x; }, 0, 1000);
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  answer(0, pb::make_send_mr_response(1, pb::OK, {}));
  BOOST_REQUIRE(got && *got);
  auto end = core.now_ + milliseconds{1000};
  BOOST_TEST((regions.expire_leases(core.now_) == end));
  pb::RenewLease renew;
  *renew.mutable_token() = pb::make_token(**got);
  renew.set_lease_ms(1000);
  core.now_ += milliseconds{500};
  regions.on_renew_lease(2, renew);
  BOOST_TEST(core.unsolicited.back().response().renew_lease().status()
             == pb::OK);
  BOOST_TEST((regions.expire_leases(end) == end + milliseconds{500}));
  BOOST_TEST(regions.held().size() == 1u);
  regions.expire_leases(end + milliseconds{500});
  BOOST_TEST(regions.held().size() == 0u);
  BOOST_TEST(core.counters_.leases_expired == 1u);
  // Renewing it now is noise, answered UNKNOWN_TOKEN.
  regions.on_renew_lease(3, renew);
  BOOST_TEST(core.unsolicited.back().response().renew_lease().status()
             == pb::UNKNOWN_TOKEN);
  BOOST_TEST(core.noise == 1);
}

// An AllocMR that timed out is remembered, so a late OK answer's region
// goes back to the peer.
BOOST_AUTO_TEST_CASE(a_timed_out_alloc_is_remembered) {
  std::optional<caf::expected<mr_token>> got;
  regions.alloc(64, 64, core.now_, [&](caf::expected<mr_token> x) { got = x; });
  BOOST_REQUIRE_EQUAL(core.requests.size(), 1u);
  auto id = core.requests[0].request().request_id();
  core.answers[0](nullptr, make_error(errc::request_timeout, "late"));
  BOOST_REQUIRE(got && !*got);
  BOOST_REQUIRE_EQUAL(core.late_allocs.size(), 1u);
  BOOST_TEST(core.late_allocs[0] == id);
}

// The peer's SendMR REMOTE hands back only what we hold for it.
BOOST_AUTO_TEST_CASE(a_give_back_of_memory_we_do_not_own_is_refused) {
  pb::SendMR req;
  req.set_kind(pb::SendMR::REMOTE);
  *req.mutable_token() = pb::make_token(mr_token{0x2000, 64, 9});
  regions.on_send_mr(1, req);
  BOOST_TEST(last_answer().send_mr().status() == pb::NOT_OWNED);
  BOOST_TEST(out.local_mrs.empty());
}

BOOST_AUTO_TEST_SUITE_END()
