#include <boost/test/unit_test.hpp>

// The link (transport/link.hpp) on a fake queue pair: signaling, failure,
// immediate data and held posts (the doorbell).  Fixture: link_fixture.hpp.

#include "test/transport/link_fixture.hpp"

BOOST_AUTO_TEST_SUITE(signaling)

BOOST_AUTO_TEST_CASE(one_completion_finishes_the_unsignaled_batch_before_it) {
  fixture f{16};
  // 15 sends use the credits up (one stays in reserve).
  for (uint64_t i = 1; i <= 15; ++i)
    f.send(i);
  BOOST_TEST(f.peer->sent.size() == 15u);
  f.l->poll();
  BOOST_TEST(f.rec.dones.size() == 15u);
  f.rec.dones.clear();
  BOOST_REQUIRE(f.deliver(credit_only | 15, 0)); // the 15 receives used
  // A burst queued behind the exhausted credits goes out as one batch.
  for (uint64_t i = 16; i <= 30; ++i)
    f.send(i);
  BOOST_TEST(f.l->queued() == 15u);
  f.l->poll(); // the credits arrive: 15 posts, few signaled
  BOOST_TEST(f.l->queued() == 0u);
  BOOST_TEST(f.rec.dones.size() < 15u); // not every one signaled
  f.l->poll();
  BOOST_TEST(f.rec.dones.size() == 15u);
  BOOST_TEST(f.l->in_flight() == 0u);
  for (size_t i = 0; i < f.rec.dones.size(); ++i)
    BOOST_TEST(f.rec.dones[i].cookie == 16 + i); // in posting order
}

BOOST_AUTO_TEST_CASE(the_cq_is_armed_once_until_it_fires) {
  fixture f;
  f.l->arm();
  f.l->arm();
  BOOST_TEST(f.qp->arms.size() == 1u);
  BOOST_TEST((f.l->armed() != transport::link::armed_for::none));
  f.l->notified();
  f.l->arm();
  BOOST_TEST(f.qp->arms.size() == 2u);
}

BOOST_AUTO_TEST_CASE(posts_nobody_waits_for_arm_for_receives_only) {
  fixture f;
  using armed_for = transport::link::armed_for;
  f.send(0); // a post: nobody waits for its completion
  f.l->arm();
  BOOST_REQUIRE(f.qp->arms.size() == 1u);
  BOOST_TEST((f.qp->arms[0] == cq_events::receives));
  BOOST_TEST((f.l->armed() == armed_for::receives));
  // A requester's operation widens the arming; once it completed, the next
  // arming after a notification is for receives again.
  f.send(7);
  BOOST_TEST(f.l->waited() == 1u);
  f.l->arm();
  BOOST_REQUIRE(f.qp->arms.size() == 2u);
  BOOST_TEST((f.qp->arms[1] == cq_events::all));
  f.l->arm(); // armed for everything already
  BOOST_TEST(f.qp->arms.size() == 2u);
  f.settle();
  BOOST_TEST(f.l->waited() == 0u);
  f.l->notified();
  f.l->arm();
  BOOST_REQUIRE(f.qp->arms.size() == 3u);
  BOOST_TEST((f.qp->arms[2] == cq_events::receives));
}

BOOST_AUTO_TEST_CASE(queued_operations_arm_for_everything) {
  fixture f{8};
  for (int i = 0; i < 9; ++i)
    f.send(0); // 7 posted, 2 wait for credits
  BOOST_REQUIRE(f.l->queued() == 2u);
  f.l->arm();
  BOOST_REQUIRE(f.qp->arms.size() == 1u);
  BOOST_TEST((f.qp->arms[0] == cq_events::all));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(failure)

BOOST_AUTO_TEST_CASE(a_failed_completion_fails_the_link_with_its_status) {
  fixture f{8};
  f.send(1);
  // A write from memory the device never registered: the fake NIC
  // completes it with a protection error, as a real one would.
  std::vector<uint8_t> stray(16);
  local_mr unregistered{std::make_shared<mr_block>(
      stray.data(), stray.size(), 0xdead, 0xdead, mr_block::release_fn{})};
  f.l->submit(op_kind::write, {}, unregistered, mr_token{0x1000, 16, 1}, 99);
  f.settle();
  BOOST_TEST(f.l->down());
  BOOST_REQUIRE(f.rec.downs.size() == 1u);
  BOOST_TEST(code_of(f.rec.downs[0]) == errc::local_protection_error);
  BOOST_REQUIRE(f.rec.dones.size() == 2u); // every cookie answered once
  BOOST_TEST(f.rec.dones[0].cookie == 1u);
  BOOST_TEST(f.rec.dones[0].result.value() == 8u);
  BOOST_TEST(f.rec.dones[1].cookie == 99u);
  BOOST_TEST(code(f.rec.dones[1].result) == errc::local_protection_error);
  // Later submissions are answered with the failure at once.
  f.send(100);
  BOOST_REQUIRE(f.rec.dones.size() == 3u);
  BOOST_TEST(code(f.rec.dones[2].result) == errc::local_protection_error);
  BOOST_TEST(f.rec.downs.size() == 1u);
}

BOOST_AUTO_TEST_CASE(flushed_receives_take_the_link_down) {
  fixture f;
  f.peer->close();
  f.l->poll();
  BOOST_TEST(f.l->down());
  BOOST_REQUIRE(f.rec.downs.size() == 1u);
  BOOST_TEST(code_of(f.rec.downs[0]) == errc::work_request_flushed);
}

BOOST_AUTO_TEST_CASE(fail_is_idempotent_and_answers_everything_once) {
  fixture f{8};
  for (uint64_t i = 1; i <= 9; ++i)
    f.send(i);
  f.l->fail(make_error(errc::closed, "test"));
  f.l->fail(make_error(errc::closed, "again"));
  BOOST_TEST(f.rec.downs.size() == 1u);
  BOOST_TEST(f.rec.dones.size() == 9u);
  for (auto& d : f.rec.dones)
    BOOST_TEST(code(d.result) == errc::work_request_flushed);
  f.l->poll(); // signaled completions of the flushed sends: no second answer
  BOOST_TEST(f.rec.dones.size() == 9u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(immediate_data)

BOOST_AUTO_TEST_CASE(a_write_with_imm_takes_a_credit_like_a_send) {
  fixture f{4};
  buffer src{*f.dev, 64};
  for (uint64_t i = 1; i <= 4; ++i)
    f.l->submit(op_kind::write, {}, src.view(), mr_token{0x1000, 64, 1}, i,
                uint32_t(100 + i));
  f.settle();
  // 4 credits, one kept in reserve: three go, the fourth waits.
  BOOST_TEST(f.peer->write_imms == (std::vector<uint32_t>{101, 102, 103}));
  BOOST_TEST(f.l->credits().credits() == 1u);
  BOOST_TEST(f.l->queued() == 1u);
  // Credits come back on a credit-only message: the fourth goes.
  BOOST_TEST(f.deliver(credit_only | 3, 0));
  f.settle();
  BOOST_TEST(f.peer->write_imms.size() == 4u);
  BOOST_TEST(f.peer->write_imms.back() == 104u);
  BOOST_TEST(f.l->queued() == 0u);
  // A write without a value needs no credit.
  f.l->submit(op_kind::write, {}, src.view(), mr_token{0x1000, 64, 1}, 9);
  f.settle();
  BOOST_TEST(f.l->queued() == 0u);
}

BOOST_AUTO_TEST_CASE(a_write_with_imm_is_never_split) {
  fixture f{8, 4096, 4096};
  buffer src{*f.dev, 8192};
  f.l->submit(op_kind::write, {}, src.view(), mr_token{0x1000, 8192, 1}, 1,
              uint32_t{5});
  f.settle();
  BOOST_REQUIRE(f.rec.dones.size() == 1u);
  BOOST_TEST(code(f.rec.dones[0].result) == errc::invalid_argument);
  BOOST_TEST(f.peer->write_imms.empty());
  BOOST_TEST(f.rec.downs.empty());
}

BOOST_AUTO_TEST_CASE(the_peers_write_with_imm_returns_no_credits) {
  fixture f{8};
  auto before = f.l->credits().credits();
  // Bit 31 set: as the immediate of a SEND it would mean credit-only.
  BOOST_TEST(f.peer->deliver_write_imm(credit_only | 5, 100));
  f.settle();
  BOOST_REQUIRE(f.rec.imms.size() == 1u);
  BOOST_TEST(f.rec.imms[0].first == (credit_only | 5));
  BOOST_TEST(f.rec.imms[0].second == 100u);
  BOOST_TEST(f.rec.messages.empty());
  BOOST_TEST(f.l->credits().credits() == before);
  // Its receive was reposted at once and is owed to the peer.
  BOOST_TEST(f.l->credits().owed() == 1u);
  for (int i = 0; i < 8; ++i)
    BOOST_TEST(f.peer->deliver_write_imm(uint32_t(i), 1));
  f.settle();
  BOOST_TEST(f.rec.imms.size() == 9u);
  BOOST_TEST(f.rec.downs.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(doorbell)

BOOST_AUTO_TEST_CASE(a_poll_holds_the_doorbell_once_for_what_it_posts) {
  fixture f{8};
  // The peer's messages arrive; what the poll posts for them (credit
  // returns) goes at one ring.
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(f.deliver(0));
  BOOST_TEST(f.l->poll() == 4u);
  BOOST_TEST(f.qp->holds == 1u);
  BOOST_TEST(f.qp->rings == 1u);
  BOOST_TEST(!f.l->posts_held());
}

BOOST_AUTO_TEST_CASE(held_posts_ring_once_at_the_flush) {
  fixture f{8};
  f.l->hold_posts();
  f.l->hold_posts(); // idempotent
  for (uint64_t c = 1; c <= 3; ++c)
    f.send(c);
  BOOST_TEST(f.qp->holds == 1u);
  BOOST_TEST(f.qp->rings == 0u);
  BOOST_TEST(f.qp->posted_while_held == 3u);
  // A poll inside the owner's batch leaves the doorbell to the owner.
  f.settle();
  BOOST_TEST(f.qp->rings == 0u);
  BOOST_TEST(f.l->posts_held());
  f.l->flush_posts();
  f.l->flush_posts(); // idempotent
  BOOST_TEST(f.qp->rings == 1u);
  BOOST_TEST(!f.l->posts_held());
  // Without a hold, a submit goes to the device at once.
  f.send(4);
  BOOST_TEST(f.qp->posted_while_held == 3u);
  BOOST_TEST(f.qp->holds == 1u);
}

BOOST_AUTO_TEST_CASE(a_long_held_burst_rings_every_doorbell_batch) {
  fixture f{64};
  f.l->hold_posts();
  auto n = 2 * tuning::doorbell_batch + 3;
  for (uint64_t c = 1; c <= n; ++c)
    f.send(c);
  BOOST_TEST(f.qp->posted_while_held == n);
  BOOST_TEST(f.qp->rings == 2u); // after posts 16 and 32
  BOOST_TEST(f.qp->holds == 3u);
  f.l->flush_posts();
  BOOST_TEST(f.qp->rings == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
