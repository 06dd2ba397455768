#define BOOST_TEST_MODULE credit_ledger
#include <boost/test/unit_test.hpp>

// The transport's credit rules (transport/credit_ledger.hpp) without a
// network or actors: the single rules, then a model of two connected sides
// that streams requests and answers under random interleavings and checks
// that no receive is ever missing (no RNR), that nothing stalls, and that
// an honest side never consumes more receives than it was granted.

#include <deque>
#include <random>
#include <vector>

#include "transport/credit_ledger.hpp"

using rdmactor::transport::credit_ledger;

BOOST_AUTO_TEST_SUITE(rules)

BOOST_AUTO_TEST_CASE(a_data_send_keeps_one_credit_in_reserve) {
  credit_ledger l{4};
  BOOST_TEST(l.credits() == 4u);
  BOOST_TEST(l.can_send_data());
  BOOST_TEST(l.can_send_data(2));  // two more sends leave two
  BOOST_TEST(!l.can_send_data(3)); // three would leave one
  l.take_for_send(false);
  l.take_for_send(false);
  l.take_for_send(false);
  BOOST_TEST(l.credits() == 1u);
  BOOST_TEST(!l.can_send_data()); // the last credit is for credit-only
}

BOOST_AUTO_TEST_CASE(a_send_reports_what_is_owed_once) {
  credit_ledger l{8};
  l.on_reposted(true);
  l.on_reposted(false);
  auto imm = l.take_for_send(false);
  BOOST_TEST((imm & credit_ledger::credit_mask) == 2u);
  BOOST_TEST((imm & credit_ledger::credit_only_bit) == 0u);
  BOOST_TEST(l.owed() == 0u);
  auto again = l.take_for_send(true);
  BOOST_TEST((again & credit_ledger::credit_mask) == 0u);
  BOOST_TEST((again & credit_ledger::credit_only_bit) != 0u);
}

BOOST_AUTO_TEST_CASE(received_credits_add_up_and_credit_only_is_told) {
  credit_ledger l{4};
  BOOST_TEST(!l.on_received(3));
  BOOST_TEST(l.credits() == 7u);
  BOOST_TEST(l.on_received(credit_ledger::credit_only_bit | 2));
  BOOST_TEST(l.credits() == 9u);
}

BOOST_AUTO_TEST_CASE(credit_only_is_due_at_half_the_pool_owed_by_data) {
  credit_ledger l{8};
  for (int i = 0; i < 3; ++i)
    l.on_reposted(true);
  BOOST_TEST(!l.credit_only_due(false, false)); // 3 < 4
  l.on_reposted(true);
  BOOST_TEST(l.credit_only_due(false, false));
  BOOST_TEST(!l.credit_only_due(true, false)); // a data send carries them
  BOOST_TEST(!l.credit_only_due(false, true)); // no send-queue entry
}

BOOST_AUTO_TEST_CASE(credit_only_messages_never_answer_each_other) {
  // Receives reposted after credit-only messages alone never make one due:
  // otherwise two idle sides would bounce credit messages forever.
  credit_ledger l{4};
  for (int i = 0; i < 100; ++i)
    l.on_reposted(false);
  BOOST_TEST(!l.credit_only_due(false, false));
}

BOOST_AUTO_TEST_CASE(no_credit_no_credit_only_message) {
  credit_ledger l{4};
  for (int i = 0; i < 4; ++i)
    l.take_for_send(false);
  for (int i = 0; i < 4; ++i)
    l.on_reposted(true);
  BOOST_TEST(l.credits() == 0u);
  BOOST_TEST(!l.credit_only_due(false, false));
}

BOOST_AUTO_TEST_CASE(the_peer_is_granted_the_depth_and_every_reported_credit) {
  credit_ledger l{4};
  BOOST_TEST(l.granted() == 4u);
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(l.on_consumed());
  BOOST_TEST(l.consumed() == 4u);
  for (int i = 0; i < 3; ++i)
    l.on_reposted(true);
  // Reposted is not granted: the peer learns of it only from a send.
  BOOST_TEST(l.granted() == 4u);
  l.take_for_send(false);
  BOOST_TEST(l.granted() == 7u);
  l.on_reposted(false);
  l.take_for_send(true); // a credit-only message grants too
  BOOST_TEST(l.granted() == 8u);
  for (int i = 0; i < 4; ++i)
    BOOST_TEST(l.on_consumed());
  BOOST_TEST(l.overrun() == 0u);
}

BOOST_AUTO_TEST_CASE(a_peer_that_ignores_credits_overruns_its_grant) {
  // The receives we repost are posted, not granted: a peer that keeps
  // sending into them without waiting for our report ignores credits.
  credit_ledger l{4};
  for (int i = 0; i < 4; ++i) {
    BOOST_TEST(l.on_consumed());
    l.on_reposted(true);
  }
  BOOST_TEST(!l.on_consumed());
  BOOST_TEST(l.overrun() == 1u);
  BOOST_TEST(!l.on_consumed());
  BOOST_TEST(l.overrun() == 2u);
}

BOOST_AUTO_TEST_CASE(a_grant_is_counted_once_however_often_it_is_reported) {
  credit_ledger l{4};
  l.on_reposted(true);
  l.take_for_send(false);
  l.take_for_send(false); // nothing owed any more: reports 0
  BOOST_TEST(l.granted() == 5u);
  for (int i = 0; i < 5; ++i)
    BOOST_TEST(l.on_consumed());
  BOOST_TEST(!l.on_consumed());
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

/// One message on the wire: its immediate data.
using channel = std::deque<uint32_t>;

/// One side of the model connection.
struct side {
  credit_ledger ledger;
  uint32_t posted;       // receives posted (the peer's credits)
  int to_send = 0;       // data messages queued
  int unreleased = 0;    // received data messages still held
  int received_data = 0; // data messages delivered to this side
  bool answers = false;  // queues one answer per data message received

  explicit side(uint32_t depth) : ledger(depth), posted(depth) {}
};

/// Runs A -> B requests, B -> A answers, `count` of each, choosing a random
/// enabled event each step.  Returns false on a stall (work left, nothing
/// enabled); fails the test on a message without a posted receive.
bool run_model(uint32_t depth, int count, uint32_t seed) {
  std::mt19937 rng{seed};
  side a{depth};
  side b{depth};
  b.answers = true;
  a.to_send = count;
  channel a_to_b;
  channel b_to_a;
  auto deliver = [](channel& ch, side& to) {
    auto imm = ch.front();
    ch.pop_front();
    BOOST_REQUIRE_MESSAGE(to.posted > 0, "a message found no posted receive");
    --to.posted;
    BOOST_REQUIRE_MESSAGE(to.ledger.on_consumed(),
                          "an honest peer consumed more than it was granted");
    if (to.ledger.on_received(imm)) {
      ++to.posted; // credit-only: reposted at once
      to.ledger.on_reposted(false);
      return;
    }
    ++to.unreleased;
    ++to.received_data;
    if (to.answers)
      ++to.to_send;
  };
  for (;;) {
    if (a.received_data == count && b.received_data == count)
      return true;
    std::vector<int> enabled;
    for (int s = 0; s < 2; ++s) {
      auto& me = s == 0 ? a : b;
      bool can_data = me.to_send > 0 && me.ledger.can_send_data();
      if (can_data)
        enabled.push_back(s * 10 + 0);
      if (me.ledger.credit_only_due(can_data, false))
        enabled.push_back(s * 10 + 1);
      if (me.unreleased > 0)
        enabled.push_back(s * 10 + 2);
    }
    if (!a_to_b.empty())
      enabled.push_back(30);
    if (!b_to_a.empty())
      enabled.push_back(31);
    if (enabled.empty())
      return false;
    auto ev = enabled[rng() % enabled.size()];
    if (ev == 30) {
      deliver(a_to_b, b);
      continue;
    }
    if (ev == 31) {
      deliver(b_to_a, a);
      continue;
    }
    auto& me = ev / 10 == 0 ? a : b;
    auto& out = ev / 10 == 0 ? a_to_b : b_to_a;
    switch (ev % 10) {
      case 0:
        out.push_back(me.ledger.take_for_send(false));
        --me.to_send;
        break;
      case 1:
        out.push_back(me.ledger.take_for_send(true));
        break;
      case 2:
        --me.unreleased;
        ++me.posted;
        me.ledger.on_reposted(true);
        break;
    }
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(model)

// The request/response pattern of the agent (SendData, SendDataResponse)
// at the smallest pool the transport accepts and at a larger one, under
// many random interleavings: every message finds a receive, and the stream
// always completes.
BOOST_AUTO_TEST_CASE(streams_complete_under_random_interleavings) {
  for (uint32_t depth : {4u, 5u, 16u}) {
    for (uint32_t seed = 1; seed <= 200; ++seed) {
      BOOST_TEST_CONTEXT("recv_depth " << depth << ", seed " << seed) {
        BOOST_TEST(run_model(depth, 300, seed));
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
