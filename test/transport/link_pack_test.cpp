// The link packs runs of small sends into one message (link_pack.cpp):
// what goes packed, what goes alone, in which order, and when.

#include <boost/test/unit_test.hpp>

#include "test/transport/link_fixture.hpp"

BOOST_AUTO_TEST_SUITE(packing)

namespace {

/// Marks a frame the way the test can read back: the top bit of its first
/// byte.
void mark(uint8_t* frame) {
  frame[0] |= 0x80;
}

/// A fixture whose link packs (the peer takes packed frames).
struct packing_fixture : fixture {
  packing_fixture() {
    l->pack_sends(4096, mark);
  }

  /// Submits a send nobody waits for whose header is `len` bytes of
  /// `tag` (first byte 0, so the mark shows), in a header buffer the link
  /// handed back, as the agent's core takes them.
  void post(uint8_t tag, size_t len = 8, local_mr payload = {}) {
    auto header = l->take_header_buffer();
    header.assign(len, tag);
    header[0] = 0;
    l->submit(op_kind::send, std::move(header), std::move(payload), mr_token{},
              0);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_held_run_of_small_sends_leaves_as_one_message) {
  packing_fixture f;
  auto before = f.peer->sent.size();
  auto credits = f.l->credits().credits();
  f.l->hold_posts();
  for (uint8_t i = 1; i <= 5; ++i)
    f.post(i);
  // Held: the run waits in the link for the rest of the activation.
  BOOST_TEST(f.peer->sent.size() == before);
  f.l->flush_posts();
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), before + 1);
  const auto& msg = f.peer->sent.back().bytes;
  BOOST_REQUIRE_EQUAL(msg.size(), 5u * 8);
  for (size_t i = 0; i < 5; ++i) {
    // Every frame but the last is marked; the bytes are the headers, in
    // submission order.
    BOOST_TEST(msg[i * 8] == (i < 4 ? 0x80 : 0x00));
    BOOST_TEST(msg[i * 8 + 1] == i + 1);
  }
  BOOST_TEST(f.l->packed_messages() == 1u);
  BOOST_TEST(f.l->packed_sends() == 5u);
  // One credit for the five.
  BOOST_TEST(f.l->credits().credits() == credits - 1);
}

BOOST_AUTO_TEST_CASE(a_lone_send_goes_alone_and_does_not_wait_unheld) {
  packing_fixture f;
  auto before = f.peer->sent.size();
  f.post(1);
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), before + 1);
  BOOST_TEST(f.peer->sent.back().bytes.size() == 8u);
  f.l->hold_posts();
  f.post(2);
  f.l->flush_posts(); // a run of one: posted as it is
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), before + 2);
  BOOST_TEST(f.peer->sent.back().bytes[0] == 0x00);
  BOOST_TEST(f.l->packed_messages() == 0u);
}

BOOST_AUTO_TEST_CASE(without_pack_sends_every_send_goes_alone) {
  fixture f;
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  for (int i = 0; i < 5; ++i)
    f.send(0);
  f.l->flush_posts();
  BOOST_TEST(f.peer->sent.size() == before + 5);
  BOOST_TEST(f.l->packed_messages() == 0u);
}

BOOST_AUTO_TEST_CASE(a_large_send_between_runs_keeps_the_order) {
  packing_fixture f;
  buffer big{*f.dev, 2000};
  buffer small{*f.dev, 16};
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  f.post(1);
  f.post(2, 8, small.view()); // header and payload copied together
  f.post(3, 8, big.view());   // over pack_frame_max_bytes: alone
  f.post(4);
  f.post(5);
  f.l->flush_posts();
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), before + 3);
  const auto& first = f.peer->sent[before].bytes;
  BOOST_REQUIRE_EQUAL(first.size(), 8u + 8u + 16u);
  BOOST_TEST(first[0] == 0x80);
  BOOST_TEST(first[8] == 0x00);
  BOOST_TEST(first[9] == 2);
  BOOST_TEST(std::memcmp(first.data() + 16, small.bytes.data(), 16) == 0);
  const auto& alone = f.peer->sent[before + 1].bytes;
  BOOST_REQUIRE_EQUAL(alone.size(), 8u + 2000u);
  BOOST_TEST(alone[1] == 3);
  const auto& last = f.peer->sent[before + 2].bytes;
  BOOST_REQUIRE_EQUAL(last.size(), 16u);
  BOOST_TEST(last[1] == 4);
  BOOST_TEST(last[9] == 5);
  BOOST_TEST(f.l->packed_sends() == 4u);
}

BOOST_AUTO_TEST_CASE(requests_with_a_cookie_and_upkeep_never_pack) {
  packing_fixture f;
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  f.send(11); // somebody waits: its own completion answers it
  f.post(1);
  f.l->submit(op_kind::send, std::vector<uint8_t>(8, 0), local_mr{}, mr_token{},
              0, std::nullopt, true); // quiet upkeep
  f.post(2);
  f.l->flush_posts();
  BOOST_TEST(f.peer->sent.size() == before + 4);
  BOOST_TEST(f.l->packed_messages() == 0u);
}

BOOST_AUTO_TEST_CASE(a_full_buffer_leaves_while_the_burst_goes_on) {
  packing_fixture f{};
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  // 4096 / 100 = 40 frames fill a buffer; the 41st starts the next.
  for (int i = 0; i < 41; ++i)
    f.post(1, 100);
  BOOST_TEST(f.peer->sent.size() == before + 1);
  BOOST_TEST(f.peer->sent.back().bytes.size() == 4000u);
  f.l->flush_posts();
  BOOST_TEST(f.peer->sent.size() == before + 2);
  BOOST_TEST(f.l->packed_sends() == 40u);
}

BOOST_AUTO_TEST_CASE(a_packed_message_carries_at_most_max_packed_frames) {
  packing_fixture f;
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  for (size_t i = 0; i < tuning::max_packed_frames + 6; ++i)
    f.post(1, 8);
  // The 64th frame made the run full: it left without waiting.
  BOOST_TEST(f.peer->sent.size() == before + 1);
  BOOST_TEST(f.peer->sent.back().bytes.size() == 8 * tuning::max_packed_frames);
  f.l->flush_posts();
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), before + 2);
  BOOST_TEST(f.peer->sent.back().bytes.size() == 8u * 6);
}

BOOST_AUTO_TEST_CASE(ring_held_posts_the_run_held_back) {
  packing_fixture f;
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  f.post(1);
  f.post(2);
  f.l->ring_held(); // a requester about to arm: the run must be out
  BOOST_TEST(f.peer->sent.size() == before + 1);
  BOOST_TEST(f.l->posts_held());
  f.l->flush_posts();
}

BOOST_AUTO_TEST_CASE(packed_buffers_come_back_with_their_completions) {
  packing_fixture f;
  // More packed messages than buffers, each completed (the fake completes
  // signaled sends at once) before the next: the buffers are reused.
  for (size_t k = 0; k < 3 * tuning::pack_buffers; ++k) {
    f.l->hold_posts();
    f.post(1);
    f.post(2);
    f.l->flush_posts();
    f.settle();
    // The peer returns the credit the message took.
    BOOST_REQUIRE(f.deliver(credit_only | 1, 0));
    f.settle();
  }
  BOOST_TEST(f.l->packed_messages() == 3 * tuning::pack_buffers);
  BOOST_TEST(f.rec.downs.empty());
}

BOOST_AUTO_TEST_CASE(a_held_send_still_waits_for_company_after_many_posts) {
  // The link counts the bytes of the packable run at the queue's tail.
  // Posting moves an op's header out before the op leaves the queue: the
  // count once took off the moved-from (empty) sizes, so it only grew, and
  // after a few KiB of posts a held send no longer waited for the sends
  // behind it: every send of a small window went alone (rdmactor-bench
  // send bw 8 B, window 32: 20 packed messages in 110,000 sends).
  packing_fixture f;
  for (size_t k = 0; k < 3 * tuning::pack_buffers; ++k) {
    f.post(1, 200); // alone, unheld
    f.l->hold_posts();
    f.post(2, 200);
    f.post(3, 200);
    f.l->flush_posts(); // packed
    f.settle();
    BOOST_REQUIRE(f.deliver(credit_only | 2, 0));
    f.settle();
  }
  BOOST_REQUIRE_EQUAL(f.l->packed_messages(), 3 * tuning::pack_buffers);
  auto before = f.peer->sent.size();
  f.l->hold_posts();
  f.post(4, 200);
  // Held and alone in the queue: it waits for the rest of the activation.
  BOOST_TEST(f.peer->sent.size() == before);
  f.post(5, 200);
  f.l->flush_posts();
  BOOST_REQUIRE_EQUAL(f.peer->sent.size(), before + 1);
  BOOST_TEST(f.peer->sent.back().bytes.size() == 400u);
  BOOST_TEST(f.rec.downs.empty());
}

BOOST_AUTO_TEST_SUITE_END()
