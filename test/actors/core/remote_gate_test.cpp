#define BOOST_TEST_MODULE remote_gate
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/exit_reason.hpp>
#include <caf/send.hpp>

#include "actors/core/remote_gate.hpp"
#include "actors/node/remote_mr_access.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/error.hpp"

using namespace rdmactor;
using agent_detail::check_remote;
using agent_detail::remote_use;

namespace {

constexpr int64_t lease_end = 1'000'000;

/// A region of 64 bytes at an 8-aligned address, "owned" by the null
/// agent (so that its last handle sends nothing), leased until
/// `lease_end` when `leased`.
remote_mr region(bool leased) {
  auto st = std::make_shared<remote_mr_state>(mr_token{4096, 64, 7},
                                              caf::actor_addr{});
  if (leased)
    st->set_lease_end_ns(lease_end);
  return remote_mr{std::move(st)};
}

const remote_use every_use[] = {remote_use::post, remote_use::renew,
                                remote_use::release, remote_use::send_back};

std::string what_of(remote_use use) {
  return "op" + std::to_string(static_cast<int>(use));
}

} // namespace

BOOST_AUTO_TEST_SUITE(remote_gate)

BOOST_AUTO_TEST_CASE(a_live_leased_region_passes_every_use) {
  auto mr = region(true);
  for (auto use : every_use)
    BOOST_TEST(!check_remote(mr, {}, lease_end - 1, use, "x"));
}

BOOST_AUTO_TEST_CASE(an_empty_handle_or_another_connections_fails_every_use) {
  config cfg;
  caf::actor_system sys{cfg};
  auto other = sys.spawn([] { return caf::behavior{[](int) {}}; });
  auto mr = region(true);
  for (auto use : every_use) {
    auto err = check_remote(remote_mr{}, {}, 0, use, what_of(use));
    BOOST_TEST(code_of(err) == errc::invalid_argument);
    BOOST_TEST(render(err).find(what_of(use) + ": needs a valid remote_mr")
                   != std::string::npos,
               render(err));
    err = check_remote(mr, other.address(), 0, use, "x");
    BOOST_TEST(code_of(err) == errc::invalid_argument);
    BOOST_TEST(render(err).find("use the connection it came from")
                   != std::string::npos,
               render(err));
  }
  caf::anon_send_exit(other, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(an_ended_lease_fails_every_use_with_lease_expired) {
  // The same rule for WRITE, READ and the atomics (post), renewals,
  // releases and send-backs: the owner revoked the region at its end.
  auto mr = region(true);
  for (auto use : every_use) {
    auto err = check_remote(mr, {}, lease_end, use, "x");
    BOOST_TEST(code_of(err) == errc::lease_expired, render(err));
    BOOST_TEST(render(err).find("renew_lease") != std::string::npos,
               render(err));
  }
  // Without a lease, no clock ends it.
  auto plain = region(false);
  for (auto use :
       {remote_use::post, remote_use::release, remote_use::send_back})
    BOOST_TEST(!check_remote(plain, {}, INT64_MAX, use, "x"));
}

BOOST_AUTO_TEST_CASE(a_finished_region_can_be_neither_posted_nor_renewed) {
  auto mr = region(true);
  BOOST_REQUIRE(detail::state_of(mr)->take());
  for (auto use : {remote_use::post, remote_use::renew}) {
    auto err = check_remote(mr, {}, 0, use, "x");
    BOOST_TEST(code_of(err) == errc::invalid_argument);
    BOOST_TEST(render(err).find("released or sent back") != std::string::npos,
               render(err));
  }
  // A second release or send-back is the caller's to name (already_sent,
  // from remote_mr_state::take), so the gate lets it through.
  BOOST_TEST(!check_remote(mr, {}, 0, remote_use::release, "x"));
  BOOST_TEST(!check_remote(mr, {}, 0, remote_use::send_back, "x"));
}

BOOST_AUTO_TEST_CASE(renewals_need_a_lease_and_send_backs_the_whole_region) {
  auto err = check_remote(region(false), {}, 0, remote_use::renew, "x");
  BOOST_TEST(code_of(err) == errc::invalid_argument);
  BOOST_TEST(render(err).find("without a lease") != std::string::npos,
             render(err));
  auto slice = region(true).slice(8, 8);
  BOOST_REQUIRE(slice);
  err = check_remote(*slice, {}, 0, remote_use::send_back, "x");
  BOOST_TEST(code_of(err) == errc::invalid_argument);
  BOOST_TEST(render(err).find("not a slice") != std::string::npos, render(err));
  // A slice is fine for everything else.
  BOOST_TEST(!check_remote(*slice, {}, 0, remote_use::post, "x"));
}

BOOST_AUTO_TEST_SUITE_END()
