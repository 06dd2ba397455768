#define BOOST_TEST_MODULE link
#include <boost/test/unit_test.hpp>

// The data path of one connection (transport/link.hpp) without a network
// or actors: a link on the fake queue pair of test/support/fake_fabric.hpp,
// with the test playing the peer (it reads the SENDs the link posted and
// delivers SENDs into the link's receive buffers) and the owner (it calls
// poll, reclaim and arm, and records what the link reports).

#include "test/transport/link_fixture.hpp"

BOOST_AUTO_TEST_SUITE(setup)

BOOST_AUTO_TEST_CASE(open_posts_every_receive_before_anything_is_submitted) {
  fixture f{8};
  for (int i = 0; i < 8; ++i)
    BOOST_TEST(f.deliver(0));
  BOOST_TEST(!f.deliver(0)); // a ninth SEND finds no receive
  BOOST_TEST(f.l->poll() == 8u);
  BOOST_TEST(f.rec.messages.size() == 8u);
  BOOST_TEST(f.peer->protection_errors == 0u);
}

BOOST_AUTO_TEST_CASE(open_refuses_a_receive_depth_below_the_minimum) {
  auto dev = std::make_shared<fake_device>();
  conn_params cp;
  cp.recv_depth = min_recv_depth - 1;
  auto peer = std::make_shared<fake_link>(dev->registry, cp);
  auto opened
      = transport::link::open(dev, std::make_shared<fake_queue_pair>(peer));
  BOOST_REQUIRE(!opened);
  BOOST_TEST(code_of(opened.error()) == errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(destroying_the_link_closes_the_queue_pair) {
  fixture f;
  BOOST_TEST(!f.peer->in_error());
  f.l.reset();
  BOOST_TEST(f.peer->in_error());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(posting)

BOOST_AUTO_TEST_CASE(a_send_carries_header_then_payload_and_reports_bytes) {
  fixture f;
  buffer payload{*f.dev, 100};
  std::vector<uint8_t> header{9, 8, 7};
  f.l->submit(op_kind::send, header, payload.view(), mr_token{}, 42);
  BOOST_REQUIRE(f.peer->sent.size() == 1u);
  auto& msg = f.peer->sent[0].bytes;
  BOOST_REQUIRE(msg.size() == 103u);
  BOOST_TEST(std::equal(header.begin(), header.end(), msg.begin()));
  BOOST_TEST(
      std::equal(payload.bytes.begin(), payload.bytes.end(), msg.begin() + 3));
  BOOST_TEST(f.rec.dones.empty()); // not before the completion is polled
  f.l->poll();
  BOOST_REQUIRE(f.rec.dones.size() == 1u);
  BOOST_TEST(f.rec.dones[0].cookie == 42u);
  BOOST_TEST(f.rec.dones[0].result.value() == 103u);
  BOOST_TEST(f.l->in_flight() == 0u);
  BOOST_TEST(f.peer->protection_errors == 0u);
}

// A quiet send (upkeep: a keepalive, a Hello) is in flight like any
// other, but not traffic: an owner waits for none of it
// (`traffic_in_flight`, which keeps adaptive polling going).
BOOST_AUTO_TEST_CASE(quiet_sends_in_flight_are_not_traffic) {
  fixture f;
  f.l->submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{}, mr_token{},
              0, std::nullopt, true);
  BOOST_TEST(f.l->in_flight() == 1u);
  BOOST_TEST(f.l->traffic_in_flight() == 0u);
  f.send(0);
  BOOST_TEST(f.l->in_flight() == 2u);
  BOOST_TEST(f.l->traffic_in_flight() == 1u);
  f.settle();
  BOOST_TEST(f.l->in_flight() == 0u);
  BOOST_TEST(f.l->traffic_in_flight() == 0u);
  // Once more after the completions: the count went back with them.
  f.l->submit(op_kind::send, std::vector<uint8_t>(8, 1), local_mr{}, mr_token{},
              0, std::nullopt, true);
  BOOST_TEST(f.l->traffic_in_flight() == 0u);
  f.send(0);
  BOOST_TEST(f.l->traffic_in_flight() == 1u);
}

BOOST_AUTO_TEST_CASE(a_posted_header_buffer_comes_back_for_the_next_send) {
  fixture f;
  // None spare yet: a new, empty buffer.
  BOOST_TEST(f.l->take_header_buffer().capacity() == 0u);
  auto header = f.l->take_header_buffer();
  header.assign({9, 8, 7});
  auto data = header.data();
  f.l->submit(op_kind::send, std::move(header), local_mr{}, mr_token{}, 1);
  BOOST_REQUIRE(f.peer->sent.size() == 1u);
  // Its bytes are in the registered slot: the buffer is spare, empty, with
  // its storage, and only once.
  auto next = f.l->take_header_buffer();
  BOOST_TEST(next.empty());
  BOOST_TEST(next.data() == data);
  BOOST_TEST(f.l->take_header_buffer().capacity() == 0u);
  // The send went out intact.
  BOOST_TEST((f.peer->sent[0].bytes == std::vector<uint8_t>{9, 8, 7}));
}

// An idle link registers one chunk of header slots; a burst of sends makes
// more as it needs them (up to one per send-queue entry), and every header
// reaches the wire intact.
BOOST_AUTO_TEST_CASE(header_slots_are_registered_as_sends_need_them) {
  fixture f{64};
  // The receive pool and the first chunk of header slots.
  BOOST_TEST(f.dev->registry->size() == 2u);
  const size_t burst = tuning::header_slot_chunk + 8;
  for (size_t i = 0; i < burst; ++i)
    f.l->submit(op_kind::send,
                std::vector<uint8_t>(16, static_cast<uint8_t>(i)), local_mr{},
                mr_token{}, i + 1);
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), burst);
  BOOST_TEST(f.dev->registry->size() == 3u);
  for (size_t i = 0; i < burst; ++i) {
    BOOST_REQUIRE_EQUAL(f.peer->sent[i].bytes.size(), 16u);
    BOOST_TEST(f.peer->sent[i].bytes[0] == static_cast<uint8_t>(i));
  }
  // Slots come back and are used again: no more registrations.
  f.settle();
  for (size_t i = 0; i < 8; ++i)
    f.send(0, 16);
  f.settle();
  BOOST_TEST(f.dev->registry->size() == 3u);
}

BOOST_AUTO_TEST_CASE(atomics_on_a_device_without_them_are_refused) {
  fixture f; // the fake device has no atomics (supports_atomics: false)
  BOOST_REQUIRE(!f.dev->supports_atomics());
  f.l->submit_atomic(op_kind::fetch_add, mr_token{0x1000, 8, 5}, 1, 0, 7);
  f.l->submit_atomic(op_kind::compare_swap, mr_token{0x1000, 8, 5}, 0, 1, 8);
  BOOST_REQUIRE(f.rec.dones.size() == 2u);
  BOOST_TEST(code(f.rec.dones[0].result) == errc::unsupported);
  BOOST_TEST(code(f.rec.dones[1].result) == errc::unsupported);
  BOOST_TEST(render(f.rec.dones[0].result.error()).find("atomic")
             != std::string::npos);
  BOOST_TEST(f.peer->sent.empty());
  BOOST_TEST(!f.l->down()); // a refusal, not a failure
}

BOOST_AUTO_TEST_CASE(one_sided_operations_check_lengths_locally) {
  fixture f;
  buffer local{*f.dev, 64};
  f.l->submit(op_kind::write, {}, local.view(), mr_token{0x1000, 32, 5}, 1);
  BOOST_REQUIRE(f.rec.dones.size() == 1u);
  BOOST_TEST(code(f.rec.dones[0].result) == errc::length_mismatch);
  f.l->submit(op_kind::read, {}, local.view(), mr_token{0x1000, 64, 5}, 2);
  f.l->poll();
  BOOST_REQUIRE(f.rec.dones.size() == 2u);
  BOOST_TEST(f.rec.dones[1].result.value() == 64u);
  BOOST_TEST(local.bytes[0] == 0x5a); // the fake READ's pattern
  BOOST_TEST(!f.l->down());
}

BOOST_AUTO_TEST_CASE(rdma_operations_larger_than_a_work_request_go_in_pieces) {
  // rxe moves at most 8 MiB per work request: a larger WRITE or READ is
  // posted as several, and answered once, with its whole length.
  fixture f{8, 4096, 4096};
  buffer local{*f.dev, 3 * 4096 + 100};
  f.l->submit(op_kind::write, {}, local.view(),
              mr_token{0x10000, local.bytes.size(), 5}, 1);
  f.l->submit(op_kind::read, {}, local.view(),
              mr_token{0x10000, local.bytes.size(), 5}, 2);
  f.settle();
  std::vector<uint64_t> pieces{4096, 4096, 4096, 100};
  std::vector<uint64_t> expected = pieces;
  expected.insert(expected.end(), pieces.begin(), pieces.end());
  BOOST_TEST(f.peer->one_sided_sizes == expected,
             boost::test_tools::per_element());
  BOOST_REQUIRE(f.rec.dones.size() == 2u);
  BOOST_TEST(f.rec.dones[0].cookie == 1u);
  BOOST_TEST(f.rec.dones[0].result.value() == local.bytes.size());
  BOOST_TEST(f.rec.dones[1].cookie == 2u);
  BOOST_TEST(f.rec.dones[1].result.value() == local.bytes.size());
  BOOST_TEST(local.bytes.back() == 0x5a); // the last piece was read too
  BOOST_TEST(f.l->in_flight() == 0u);
  BOOST_TEST(!f.l->down());
}

BOOST_AUTO_TEST_CASE(a_refused_request_is_answered_and_the_link_stays_up) {
  fixture f;
  f.send(1, max_send_header_bytes + 1);
  BOOST_REQUIRE(f.rec.dones.size() == 1u);
  BOOST_TEST(code(f.rec.dones[0].result) == errc::invalid_argument);
  buffer big{*f.dev, 4096};
  f.l->submit(op_kind::send, {1}, big.view(), mr_token{}, 2);
  BOOST_REQUIRE(f.rec.dones.size() == 2u);
  BOOST_TEST(code(f.rec.dones[1].result) == errc::invalid_argument);
  BOOST_TEST(!f.l->down());
  BOOST_TEST(f.peer->sent.empty());
}

BOOST_AUTO_TEST_CASE(a_refused_post_fails_the_link_so_it_cannot_vanish) {
  fixture f;
  f.send(0, max_send_header_bytes + 1);
  BOOST_TEST(f.l->down());
  BOOST_REQUIRE(f.rec.downs.size() == 1u);
  BOOST_TEST(code_of(f.rec.downs[0]) == errc::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(credits)

BOOST_AUTO_TEST_CASE(sends_wait_for_credits_and_go_when_the_peer_returns_them) {
  fixture f{8};
  for (uint64_t i = 1; i <= 10; ++i)
    f.send(i);
  // 8 credits, one kept in reserve for credit-only messages.
  BOOST_TEST(f.peer->sent.size() == 7u);
  BOOST_TEST(f.l->queued() == 3u);
  BOOST_TEST(f.l->credits().credits() == 1u);
  // The peer reposted 4 receives and says so in a credit-only message.
  BOOST_REQUIRE(f.deliver(credit_only | 4, 0));
  f.settle();
  BOOST_TEST(f.rec.messages.empty()); // credit-only: nothing to deliver
  BOOST_TEST(f.peer->sent.size() == 10u);
  BOOST_TEST(f.l->queued() == 0u);
  BOOST_TEST(f.rec.dones.size() == 10u);
  for (auto& d : f.rec.dones)
    BOOST_TEST(d.result.value() == 8u);
}

BOOST_AUTO_TEST_CASE(released_buffers_are_reposted_and_reported) {
  fixture f{8};
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  BOOST_REQUIRE(f.rec.messages.size() == 4u);
  BOOST_TEST(f.l->reclaim() == 0u); // the user still holds them
  f.rec.messages.clear();
  BOOST_TEST(f.l->reclaim() == 4u);
  BOOST_TEST(f.l->credits().owed() == 0u);
  // Half the pool was owed and nothing else goes: one credit-only SEND.
  BOOST_REQUIRE(f.peer->sent.size() == 1u);
  BOOST_TEST(f.peer->sent[0].bytes.empty());
  BOOST_TEST(f.peer->sent[0].imm.value() == (credit_only | 4));
  // The reposted receives take four more SENDs.
  for (int i = 0; i < 8; ++i)
    BOOST_TEST(f.deliver(0));
  BOOST_TEST(!f.deliver(0));
}

// The count behind the zero-copy rule (tuning::zero_copy_receive): live
// handles of received messages, whether their releases were drained yet
// or not.
BOOST_AUTO_TEST_CASE(held_receive_buffers_are_the_live_message_handles) {
  fixture f{8};
  BOOST_TEST(f.l->receive_buffers_held() == 0u);
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  BOOST_REQUIRE(f.rec.messages.size() == 3u);
  BOOST_TEST(f.l->receive_buffers_held() == 3u);
  f.rec.messages.pop_back(); // released, not drained yet
  BOOST_TEST(f.l->receive_buffers_held() == 2u);
  f.l->reclaim(); // drained and reposted
  BOOST_TEST(f.l->receive_buffers_held() == 2u);
  f.rec.messages.clear();
  BOOST_TEST(f.l->receive_buffers_held() == 0u);
  f.l->reclaim();
  BOOST_TEST(f.l->receive_buffers_held() == 0u);
}

BOOST_AUTO_TEST_CASE(a_data_send_carries_the_credits_it_owes) {
  fixture f{8};
  BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  f.rec.messages.clear();
  BOOST_TEST(f.l->reclaim() == 1u); // below half the pool: not yet reported
  BOOST_TEST(f.peer->sent.empty());
  f.send(1);
  BOOST_REQUIRE(f.peer->sent.size() == 1u);
  BOOST_TEST(f.peer->sent[0].imm.value() == 1u); // owed, not credit-only
  BOOST_TEST(f.l->credits().owed() == 0u);
}

BOOST_AUTO_TEST_CASE(releases_wake_the_owner_once_their_credits_are_due) {
  fixture f{8}; // credits are returned in batches of 4
  int wakes = 0;
  f.l->set_wake([&] { ++wakes; });
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  auto held = std::move(f.rec.messages);
  f.rec.messages.clear();
  // Released on another thread: three free no credit message yet.
  std::thread{[&] { held.resize(1); }}.join();
  BOOST_TEST(wakes == 0);
  std::thread{[&] { held.clear(); }}.join();
  BOOST_TEST(wakes == 1); // the fourth makes a credit return due
  BOOST_TEST(f.l->reclaim() == 4u);
  BOOST_REQUIRE(f.peer->sent.size() == 1u);
  BOOST_TEST(f.peer->sent[0].imm.value() == (credit_only | 4));
  // Fewer releases wake nobody; the next send drains them and carries
  // their credits.
  BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  f.rec.messages.clear();
  BOOST_TEST(wakes == 1);
  f.send(1);
  BOOST_REQUIRE(f.peer->sent.size() == 2u);
  BOOST_TEST(f.peer->sent[1].imm.value() == 1u);
}

BOOST_AUTO_TEST_CASE(owed_credits_lower_the_wake_threshold) {
  fixture f{8};
  int wakes = 0;
  f.l->set_wake([&] { ++wakes; });
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  f.rec.messages.clear(); // three released: below the batch of 4
  BOOST_TEST(wakes == 0);
  BOOST_TEST(f.l->reclaim() == 3u);
  BOOST_TEST(f.l->credits().owed() == 3u);
  // One more release completes the batch.
  BOOST_REQUIRE(f.deliver(0));
  f.l->poll();
  f.rec.messages.clear();
  BOOST_TEST(wakes == 1);
}

// Credits are a contract: the receives the link reposts are posted at
// once, but granted only when a send reports them.  A peer that sends into
// them without waiting for the report ignores credits and is cut off.
BOOST_AUTO_TEST_CASE(a_peer_that_sends_beyond_its_grant_fails_the_link) {
  fixture f{8};
  // Eight messages use the initial grant.  The first three are released
  // and reposted at once, below the batch that makes a credit-only
  // message due, so nothing reports them...
  for (int i = 0; i < 3; ++i) {
    BOOST_REQUIRE(f.deliver(0));
    f.l->poll();
    f.rec.messages.clear();
    f.l->reclaim();
  }
  BOOST_TEST(f.peer->sent.empty());
  for (int i = 0; i < 5; ++i)
    BOOST_REQUIRE(f.deliver(0));
  // ... so the ninth lands in a receive that was reposted, never granted.
  BOOST_REQUIRE(f.deliver(0));
  f.settle();
  BOOST_REQUIRE(f.rec.downs.size() == 1u);
  BOOST_TEST(code_of(f.rec.downs[0]) == errc::quota_exceeded);
  BOOST_TEST(what_of(f.rec.downs[0]).find("ignores credits")
                 != std::string::npos,
             render(f.rec.downs[0]));
  BOOST_TEST(f.l->down());
}

BOOST_AUTO_TEST_CASE(a_write_with_imm_beyond_the_grant_fails_the_link_too) {
  fixture f{4};
  for (uint64_t i = 1; i <= 3; ++i)
    f.send(i); // down to the reserve credit
  // Half the pool owed by the peer's writes: the reserve credit carries
  // a credit-only message that grants two receives back; after that the
  // link has no credit to report more.
  for (int i = 0; i < 4; ++i)
    BOOST_REQUIRE(f.peer->deliver_write_imm(uint32_t(i), 1));
  f.settle();
  BOOST_REQUIRE(f.peer->sent.size() == 4u);
  BOOST_TEST(f.peer->sent[3].imm.value() == (credit_only | 2));
  BOOST_TEST(f.l->credits().granted() == 6u);
  BOOST_TEST(f.rec.downs.empty());
  // Four receives are posted again, two of them never granted.
  for (int i = 0; i < 3; ++i)
    BOOST_REQUIRE(f.peer->deliver_write_imm(uint32_t(i), 1));
  f.settle();
  BOOST_REQUIRE(f.rec.downs.size() == 1u);
  BOOST_TEST(code_of(f.rec.downs[0]) == errc::quota_exceeded);
  BOOST_TEST(f.rec.imms.size() == 6u); // the seventh was not delivered
}

// The attack of a peer that sends requests and never returns a credit:
// each request makes the owner queue a reply that cannot go.  The grant
// bounds it: the link's own credits carry at most `depth` reports, so the
// peer is granted less than three times the depth and is cut off after
// that many requests, with at most that many replies queued, instead of
// queueing without end.
BOOST_AUTO_TEST_CASE(a_peer_that_returns_no_credits_queues_a_bounded_backlog) {
  constexpr uint32_t depth = 8;
  fixture f{depth};
  size_t most_queued = 0;
  int requests = 0;
  while (!f.l->down() && requests < 10000) {
    if (!f.deliver(0)) // no receive posted: the peer waits, then retries
      break;
    ++requests;
    f.settle();
    // The owner answers every request and lets its buffer go.
    f.answer_all();
    most_queued = std::max(most_queued, f.l->queued());
  }
  BOOST_REQUIRE(f.l->down());
  BOOST_TEST(code_of(f.l->failure()) == errc::quota_exceeded);
  BOOST_TEST(requests <= int(3 * depth));
  BOOST_TEST(most_queued <= size_t{3 * depth});
  BOOST_TEST(f.l->queued() == 0u); // flushed with the failure
}

// A peer within the contract that returns two credits per round while it
// spends every credit it is granted on a request: each round queues more
// replies than go.  The posts waiting on one link are bounded
// (tuning::max_queued_posts): past it the link fails, naming the cause.
BOOST_AUTO_TEST_CASE(
    a_peer_that_returns_credits_one_by_one_queues_a_bounded_backlog) {
  constexpr uint32_t depth = 8;
  fixture f{depth};
  uint64_t peer_credits = depth;
  size_t seen = 0;
  size_t most_posts = 0;
  for (int round = 0; round < 200000 && !f.l->down(); ++round) {
    while (peer_credits > 1 && !f.l->down()) {
      BOOST_REQUIRE(f.deliver(0));
      --peer_credits;
    }
    f.settle();
    auto msgs = std::move(f.rec.messages);
    f.rec.messages.clear();
    for (size_t i = 0; i < msgs.size() && !f.l->down(); ++i)
      f.send(0);
    msgs.clear();
    if (f.l->down())
      break;
    f.l->reclaim();
    most_posts = std::max(most_posts, f.l->queued_posts());
    peer_credits += f.learn_credits(seen);
    BOOST_REQUIRE(peer_credits >= 1);
    BOOST_REQUIRE(f.deliver(credit_only | 2, 0));
    --peer_credits;
    f.settle();
    peer_credits += f.learn_credits(seen);
  }
  BOOST_REQUIRE(f.l->down());
  BOOST_TEST(code_of(f.l->failure()) == errc::quota_exceeded);
  BOOST_TEST(what_of(f.l->failure()).find("wait for credits")
                 != std::string::npos,
             render(f.l->failure()));
  BOOST_TEST(f.l->credits().overrun() == 0u); // within the contract
  BOOST_TEST(most_posts <= tuning::max_queued_posts);
  BOOST_TEST(most_posts > tuning::max_queued_posts / 2);
  BOOST_TEST(f.l->queued_posts() == 0u); // flushed with the failure
}

// An honest peer that spends exactly what it learned from our sends (the
// initial depth, then every credit in an immediate value) never trips.
BOOST_AUTO_TEST_CASE(a_peer_that_spends_what_it_was_granted_never_trips) {
  constexpr uint32_t depth = 8;
  fixture f{depth};
  uint64_t peer_credits = depth;
  size_t seen = 0;
  for (int round = 0; round < 500; ++round) {
    // The peer sends what it may, keeping one in reserve like a link.
    while (peer_credits > 1) {
      BOOST_REQUIRE(f.deliver(0));
      --peer_credits;
    }
    f.settle();
    f.answer_all();
    // The peer reads our sends, learns its credits and returns ours.
    auto before = seen;
    peer_credits += f.learn_credits(seen);
    auto ours = static_cast<uint32_t>(seen - before);
    if (ours > 0 && peer_credits > 0) {
      BOOST_REQUIRE(f.deliver(credit_only | ours, 0));
      --peer_credits;
      f.settle();
      peer_credits += f.learn_credits(seen);
    }
    if (!f.rec.downs.empty())
      BOOST_FAIL("the link went down: " << render(f.rec.downs[0]));
  }
  BOOST_TEST(f.l->credits().overrun() == 0u);
  BOOST_TEST(f.l->credits().consumed() > 1000u);
}

BOOST_AUTO_TEST_SUITE_END()

/// Polls the link from inside its handler (as event mode's
/// `link_driver::requested` does after a completion posts a READ) and
/// pauses every other message (as the agent does past its delivery
/// budget).
struct nested_poller : recorder {
  transport::link* path = nullptr;
  size_t nested_polls = 0;
  size_t nested_handled = 0;

  void on_message(local_mr msg) override {
    recorder::on_message(std::move(msg));
    ++nested_polls;
    nested_handled += path->poll();
    if (messages.size() % 2 == 0)
      path->pause();
  }
};

BOOST_AUTO_TEST_CASE(a_poll_from_inside_a_poll_loses_nothing) {
  fixture f{64};
  nested_poller obs;
  obs.path = f.l.get();
  f.l->set_observer(&obs);
  constexpr size_t n = 40; // more than one batch of the CQ
  for (size_t i = 0; i < n; ++i)
    BOOST_REQUIRE(f.deliver(0));
  size_t handled = 0;
  for (int round = 0; round < 100 && obs.messages.size() < n; ++round)
    handled += f.l->poll();
  // Every message once, in order of arrival; the nested polls took none
  // (the running poll did).
  BOOST_TEST(obs.messages.size() == n);
  BOOST_TEST(handled == n);
  BOOST_TEST(obs.nested_polls == n);
  BOOST_TEST(obs.nested_handled == 0u);
  BOOST_TEST(f.l->poll() == 0u);
}
