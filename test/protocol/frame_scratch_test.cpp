#define BOOST_TEST_MODULE frame_scratch
#include <boost/test/unit_test.hpp>

// Decoding into a frame_scratch (protocol/frame_scratch.hpp): after the
// thread's first frame, a data-path frame costs no heap allocation; small
// frames share the arena until half its first block is used, a long
// message resets it; a large frame and a nested scope still decode.
// Counts every global `operator new` of this program.

#include <string>
#include <vector>

#include "protocol/codec.hpp"
#include "protocol/frame_scratch.hpp"
#include "protocol/messages.hpp"
#include "test/support/counting_new.hpp"

using namespace rdmactor;
namespace pb = rdmactor::protocol;

namespace {

constexpr size_t max_len = 1 << 20;

/// An eager SendData frame with `acked` acknowledgements and 8 payload
/// bytes, as the data path writes it.
std::vector<uint8_t> send_data_frame(size_t acked) {
  std::vector<uint64_t> ids(acked);
  for (size_t i = 0; i < acked; ++i)
    ids[i] = 1000 + i;
  pb::send_data_fields f;
  f.request_id = 42;
  f.len = 8;
  f.acked = ids.data();
  f.acked_count = ids.size();
  std::vector<uint8_t> buf(pb::max_send_data_header_len(acked) + 8);
  auto n = pb::encode_send_data(f, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(n > 0);
  buf.resize(n + 8, 0xab);
  return buf;
}

/// An eager ActorMessage frame with 8 payload bytes, as the remote-actor
/// path writes it.
std::vector<uint8_t> actor_frame(uint64_t target) {
  pb::actor_message_fields f{};
  f.target = target;
  f.sender = 3;
  f.message_id = uint64_t{1} << 62 | 17;
  f.len = 8;
  std::vector<uint8_t> buf(pb::actor_frame_overhead + 8);
  auto n = pb::encode_actor_message(f, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(n > 0);
  buf.resize(n + 8, 0xcd);
  return buf;
}

/// A frame whose decoded form exceeds the arena's first block.
std::vector<uint8_t> large_frame() {
  auto msg
      = pb::make_goodbye(std::string(3 * pb::frame_scratch::block_bytes, 'x'));
  std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
  auto res = pb::encode(msg, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(res.code == errc::none);
  buf.resize(res.header_len);
  return buf;
}

/// Decodes `frame` into a fresh scratch; returns the request id (0: not a
/// request).
uint64_t decode_once(const std::vector<uint8_t>& frame) {
  pb::frame_scratch scratch;
  auto& msg = scratch.message();
  auto res = scratch.decode(frame.data(), frame.size(), max_len);
  if (res.code != errc::none || !msg.has_request())
    return 0;
  return msg.request().request_id();
}

} // namespace

BOOST_AUTO_TEST_CASE(a_data_path_frame_decodes_without_allocations) {
  auto frame = send_data_frame(16);
  BOOST_TEST(decode_once(frame) == 42u); // warms the thread's arena
  auto before = test::heap_allocations.load();
  for (int i = 0; i < 1000; ++i)
    BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(test::heap_allocations.load() - before == 0u);
}

BOOST_AUTO_TEST_CASE(the_message_is_empty_in_every_scope) {
  auto frame = send_data_frame(4);
  BOOST_TEST(decode_once(frame) == 42u);
  pb::frame_scratch scratch;
  BOOST_TEST(!scratch.message().has_request());
  BOOST_TEST(scratch.message().ByteSizeLong() == 0u);
}

// The message and its ActorMessage body stay from frame to frame: a run
// of remote-actor frames, a SendData among them, takes no arena memory
// after the first, and each scope still starts from an empty message.
BOOST_AUTO_TEST_CASE(actor_message_frames_reuse_one_message_and_body) {
  auto frame = send_data_frame(2);
  BOOST_TEST(decode_once(frame) == 42u);
  auto used = pb::frame_scratch::arena_bytes_used();
  for (uint64_t i = 1; i <= 100; ++i) {
    auto af = actor_frame(i);
    pb::frame_scratch scratch;
    BOOST_TEST(scratch.message().ByteSizeLong() == 0u);
    auto res = scratch.decode(af.data(), af.size(), max_len);
    BOOST_REQUIRE((res.code == errc::none));
    BOOST_TEST(scratch.message().actor_message().target() == i);
    BOOST_TEST(scratch.message().actor_message().message_id()
               == (uint64_t{1} << 62 | 17));
    if (i == 2)
      used = pb::frame_scratch::arena_bytes_used();
    if (i > 2)
      BOOST_TEST(pb::frame_scratch::arena_bytes_used() == used);
  }
  // An ActorMessage protobuf parsed, with a field the eager form never
  // has, then an eager one: the stale field is gone.
  pb::Message with_source;
  auto* am = with_source.mutable_actor_message();
  am->set_target(7);
  am->set_len(0);
  am->mutable_source()->set_rkey(5);
  std::vector<uint8_t> buf(pb::frame_header_len + with_source.ByteSizeLong());
  auto enc = pb::encode(with_source, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(enc.code == errc::none);
  {
    pb::frame_scratch scratch;
    auto res = scratch.decode(buf.data(), enc.header_len, max_len);
    BOOST_REQUIRE((res.code == errc::none));
    BOOST_TEST(scratch.message().actor_message().has_source());
  }
  auto af = actor_frame(9);
  pb::frame_scratch scratch;
  auto res = scratch.decode(af.data(), af.size(), max_len);
  BOOST_REQUIRE((res.code == errc::none));
  BOOST_TEST(scratch.message().actor_message().target() == 9u);
  BOOST_TEST(!scratch.message().actor_message().has_source());
}

BOOST_AUTO_TEST_CASE(a_large_frame_decodes_and_the_next_small_one_is_free) {
  auto big = large_frame();
  {
    pb::frame_scratch scratch;
    auto& msg = scratch.message();
    auto res = scratch.decode(big.data(), big.size(), max_len);
    BOOST_TEST((res.code == errc::none));
    BOOST_TEST(msg.goodbye().reason().size()
               == 3 * pb::frame_scratch::block_bytes);
  }
  auto frame = send_data_frame(16);
  BOOST_TEST(decode_once(frame) == 42u);
  auto before = test::heap_allocations.load();
  BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(test::heap_allocations.load() - before == 0u);
}

BOOST_AUTO_TEST_CASE(a_nested_scope_gets_a_message_of_its_own) {
  auto frame = send_data_frame(2);
  pb::frame_scratch outer;
  auto res = pb::decode(frame.data(), frame.size(), max_len, outer.message());
  BOOST_TEST((res.code == errc::none));
  // A frame decoded meanwhile leaves the outer message as it was.
  BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(outer.message().request().request_id() == 42u);
  BOOST_TEST(outer.message().request().send_data().acked_size() == 2);
}

BOOST_AUTO_TEST_CASE(small_frames_share_the_arena_until_half_a_block_is_used) {
  // A frame protobuf parses (not an eager one): its body is a new object
  // on the arena every time.
  auto msg = pb::make_goodbye("bye");
  std::vector<uint8_t> bye(pb::frame_header_len + msg.ByteSizeLong());
  auto enc = pb::encode(msg, bye.data(), bye.size(), max_len);
  BOOST_REQUIRE(enc.code == errc::none);
  auto decode_bye = [&] {
    pb::frame_scratch scratch;
    auto res = scratch.decode(bye.data(), bye.size(), max_len);
    return res.code == errc::none && scratch.message().has_goodbye();
  };
  BOOST_TEST(decode_bye());
  // Every scope's body stays on the arena, so its use grows, until a
  // scope ends with more than half the block used: then it starts over.
  bool grew = false;
  bool reset = false;
  auto last = pb::frame_scratch::arena_bytes_used();
  for (int i = 0; i < 200 && !reset; ++i) {
    BOOST_TEST(decode_bye());
    auto now = pb::frame_scratch::arena_bytes_used();
    BOOST_TEST(now <= pb::frame_scratch::block_bytes / 2);
    grew = grew || now > last;
    reset = now < last;
    last = now;
  }
  BOOST_TEST(grew);
  BOOST_TEST(reset);
}

// Eager SendData frames take the last frame's Request and SendData: after
// the first, a run of them takes no more arena memory.
BOOST_AUTO_TEST_CASE(send_data_frames_reuse_one_request_and_body) {
  auto frame = send_data_frame(16);
  BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(decode_once(frame) == 42u);
  auto used = pb::frame_scratch::arena_bytes_used();
  for (int i = 0; i < 100; ++i) {
    pb::frame_scratch scratch;
    auto res = scratch.decode(frame.data(), frame.size(), max_len);
    BOOST_REQUIRE((res.code == errc::none));
    BOOST_TEST(scratch.message().request().send_data().acked_size() == 16);
    BOOST_TEST(scratch.message().request().send_data().acked(15) == 1015u);
  }
  BOOST_TEST(pb::frame_scratch::arena_bytes_used() == used);
}

BOOST_AUTO_TEST_CASE(a_long_message_resets_the_arena_when_its_scope_ends) {
  auto frame = send_data_frame(2);
  BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(pb::frame_scratch::arena_bytes_used() > 0u);
  // A Goodbye whose reason is longer than keep_message_bytes: its string's
  // heap buffer must not wait for later frames.
  auto msg = pb::make_goodbye(
      std::string(pb::frame_scratch::keep_message_bytes + 1, 'y'));
  std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
  auto enc = pb::encode(msg, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(enc.code == errc::none);
  buf.resize(enc.header_len);
  {
    pb::frame_scratch scratch;
    auto res = scratch.decode(buf.data(), buf.size(), max_len);
    BOOST_TEST((res.code == errc::none));
    BOOST_TEST(scratch.message().has_goodbye());
  }
  BOOST_TEST(pb::frame_scratch::arena_bytes_used() == 0u);
  // So does a frame that fails to decode.
  BOOST_TEST(decode_once(frame) == 42u);
  BOOST_TEST(pb::frame_scratch::arena_bytes_used() > 0u);
  auto bad = frame;
  bad.resize(bad.size() / 2);
  BOOST_TEST(decode_once(bad) == 0u);
  BOOST_TEST(pb::frame_scratch::arena_bytes_used() == 0u);
}
