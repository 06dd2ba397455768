// The hand codec of the data path's frames (protocol/codec.hpp:
// encode_send_data, encode_actor_message, parse_eager_send_data,
// parse_eager_actor_message): byte for byte what protobuf writes, parsed
// back to the same Message, every other encoding left to protobuf, and
// spare bodies taken on their arena.  Part of protocol_codec_test.

#include <boost/test/unit_test.hpp>

#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

#include <google/protobuf/arena.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

using namespace rdmactor;
using namespace rdmactor::protocol;

// A named namespace: the unity build puts this file in one translation
// unit with codec_test.cpp, whose anonymous namespace has the same names.
namespace codec_by_hand {

using bytes = std::vector<uint8_t>;

constexpr size_t max_len = 4096;
constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();
constexpr uint32_t u32_max = std::numeric_limits<uint32_t>::max();

BOOST_AUTO_TEST_SUITE(by_hand)

// The hand-written encoder of the data path's frame writes what protobuf
// writes for the same Message, byte for byte, and decodes back to it:
// ids and lengths of every varint width (zero left out), with and without
// an immediate value (0 included: has_imm alone), 0 to the most
// acknowledgements; and it refuses a buffer or a maximum one byte short.
BOOST_AUTO_TEST_CASE(encode_send_data_writes_what_protobuf_writes) {
  const uint64_t values[] = {
      0, 1, 127, 128, 16383, 16384, 1u << 21, (uint64_t{1} << 35) + 3, u64_max};
  std::vector<uint64_t> acks;
  for (size_t i = 0; i < rdmactor::tuning::max_acks_per_response; ++i)
    acks.push_back(i == 0 ? u64_max : i * 0x0102030405060708u);
  const std::optional<uint32_t> imms[] = {std::nullopt, 0u, 1u, 300u, u32_max};
  size_t cases = 0;
  for (auto id : values)
    for (auto len : values)
      for (auto imm : imms)
        for (size_t n : {size_t{0}, size_t{1}, size_t{2}, acks.size()}) {
          auto msg
              = imm ? make_send_data(id, len, *imm) : make_send_data(id, len);
          for (size_t i = 0; i < n; ++i)
            msg.mutable_request()->mutable_send_data()->add_acked(acks[i]);
          bytes want(max_len);
          auto res = encode(msg, want.data(), want.size(), max_len);
          BOOST_REQUIRE(res.code == errc::none);
          want.resize(res.header_len);
          send_data_fields f;
          f.request_id = id;
          f.len = len;
          f.imm = imm;
          f.acked = acks.data();
          f.acked_count = n;
          bytes got(max_send_data_header_len(n));
          auto written = encode_send_data(f, got.data(), got.size(), max_len);
          BOOST_TEST_CONTEXT("id " << id << ", len " << len << ", imm "
                                   << (imm ? int64_t{*imm} : -1) << ", acks "
                                   << n) {
            BOOST_REQUIRE_EQUAL(written, want.size());
            got.resize(written);
            BOOST_CHECK(got == want);
            // Too small a buffer or maximum: nothing.
            bytes short_buf(written - 1, 0xee);
            BOOST_CHECK_EQUAL(encode_send_data(f, short_buf.data(),
                                               short_buf.size(), max_len),
                              0u);
            BOOST_CHECK(short_buf == bytes(written - 1, 0xee));
            BOOST_CHECK_EQUAL(
                encode_send_data(f, got.data(), max_len, written - 1), 0u);
            // The hand parser reads them back to the same Message.
            Message back;
            BOOST_REQUIRE(parse_eager_send_data(got.data() + frame_header_len,
                                                written - frame_header_len,
                                                back));
            BOOST_CHECK(back.SerializeAsString() == msg.SerializeAsString());
          }
          ++cases;
        }
  BOOST_CHECK_EQUAL(cases, 9u * 9u * 5u * 4u);
  BOOST_CHECK_EQUAL(encode_send_data({}, nullptr, 100, max_len), 0u);
}

// The eager ActorMessage frame by hand: the same bytes as encode for
// every field at every varint width (zero left out), `down` or not; the
// hand parser reads them back and leaves any other encoding to protobuf.
BOOST_AUTO_TEST_CASE(encode_actor_message_writes_what_protobuf_writes) {
  // Every varint width, 1 to 10 bytes, at its edges.
  const uint64_t values[] = {0,
                             1,
                             127,
                             128,
                             16384,
                             (uint64_t{1} << 21) - 1,
                             uint64_t{1} << 28,
                             (uint64_t{1} << 35) + 3,
                             (uint64_t{1} << 42) + 0x55,
                             (uint64_t{1} << 49) - 1,
                             (uint64_t{1} << 56) - 1,
                             uint64_t{1} << 56,
                             (uint64_t{1} << 63) - 1,
                             u64_max};
  size_t cases = 0;
  for (auto a : values)
    for (auto b : values)
      for (auto c : values)
        for (bool down : {false, true}) {
          actor_message_fields f{a, b, c, b, a, down};
          Message msg;
          auto* am = msg.mutable_actor_message();
          am->set_target(f.target);
          am->set_sender(f.sender);
          am->set_message_id(f.message_id);
          am->set_len(f.len);
          am->set_total_len(f.total_len);
          am->set_down(f.down);
          bytes want(max_len);
          auto res = encode(msg, want.data(), want.size(), max_len);
          BOOST_REQUIRE(res.code == errc::none);
          want.resize(res.header_len);
          bytes got(actor_frame_overhead);
          auto written
              = encode_actor_message(f, got.data(), got.size(), max_len);
          BOOST_REQUIRE_EQUAL(written, want.size());
          got.resize(written);
          BOOST_CHECK(got == want);
          Message back;
          BOOST_REQUIRE(parse_eager_actor_message(
              got.data() + frame_header_len, written - frame_header_len, back));
          BOOST_CHECK(back.SerializeAsString() == msg.SerializeAsString());
          // Too small a buffer or maximum: nothing.
          BOOST_CHECK_EQUAL(
              encode_actor_message(f, got.data(), written - 1, max_len), 0u);
          BOOST_CHECK_EQUAL(
              encode_actor_message(f, got.data(), got.size(), written - 1), 0u);
          ++cases;
        }
  BOOST_CHECK_EQUAL(cases, 14u * 14u * 14u * 2u);
}

// A spare ActorMessage on the output's arena becomes its body, cleared
// first (a stale field of the frame it held before must not survive); one
// that is not on that arena is left alone.
BOOST_AUTO_TEST_CASE(parse_eager_actor_message_takes_a_spare_on_its_arena) {
  const bytes canonical = {0x3a, 0x04, 0x08, 0x05, 0x10, 0x06};
  google::protobuf::Arena arena;
  auto* out = google::protobuf::Arena::CreateMessage<Message>(&arena);
  auto* spare = google::protobuf::Arena::CreateMessage<ActorMessage>(&arena);
  spare->set_total_len(77);
  spare->set_down(true);
  spare->mutable_source()->set_rkey(9);
  eager_spares spares;
  spares.actor_message = spare;
  BOOST_REQUIRE(parse_eager_actor_message(canonical.data(), canonical.size(),
                                          *out, &spares));
  BOOST_TEST(spares.actor_message == nullptr);
  BOOST_TEST(&out->actor_message() == spare);
  BOOST_TEST(spare->target() == 5u);
  BOOST_TEST(spare->sender() == 6u);
  BOOST_TEST(spare->total_len() == 0u);
  BOOST_TEST(!spare->down());
  BOOST_TEST(!spare->has_source());
  // A heap Message: the spare is not taken.
  auto* other = google::protobuf::Arena::CreateMessage<ActorMessage>(&arena);
  other->set_target(1);
  Message heap;
  spares.actor_message = other;
  BOOST_REQUIRE(parse_eager_actor_message(canonical.data(), canonical.size(),
                                          heap, &spares));
  BOOST_TEST(spares.actor_message == other);
  BOOST_TEST(&heap.actor_message() != other);
  BOOST_TEST(heap.actor_message().target() == 5u);
  BOOST_TEST(other->target() == 1u);
}

BOOST_AUTO_TEST_CASE(other_encodings_of_a_send_data_go_to_protobuf) {
  // Message{request{request_id 5, send_data{len 8}}} as encode writes it.
  const bytes canonical = {0x0a, 0x06, 0x08, 0x05, 0x2a, 0x02, 0x08, 0x08};
  Message out;
  BOOST_REQUIRE(parse_eager_send_data(canonical.data(), canonical.size(), out));
  BOOST_TEST(out.request().request_id() == 5u);
  BOOST_TEST(out.request().send_data().len() == 8u);
  const std::vector<bytes> others = {
      {0x0a, 0x06, 0x2a, 0x02, 0x08, 0x08, 0x08, 0x05}, // request_id behind
      {0x0a, 0x06, 0x08, 0x00, 0x2a, 0x02, 0x08, 0x08}, // a zero request_id
      {0x0a, 0x07, 0x08, 0x85, 0x00, 0x2a, 0x02, 0x08, 0x08},       // overlong
      {0x0a, 0x08, 0x08, 0x05, 0x2a, 0x04, 0x10, 0x01, 0x08, 0x08}, // order
      {0x0a, 0x06, 0x08, 0x05, 0x2a, 0x02, 0x18, 0x02}, // has_imm as 2
      {0x0a, 0x0a, 0x08, 0x05, 0x2a, 0x06, 0x10, 0x80, 0x80, 0x80, 0x80,
       0x10},                                           // imm past 32 bits
      {0x0a, 0x06, 0x08, 0x05, 0x2a, 0x02, 0x2a, 0x00}, // acked empty
      {0x0a, 0x0a, 0x08, 0x05, 0x2a, 0x06, 0x2a, 0x04, 1, 2, 3, 4}, // 4 bytes
      {0x0a, 0x06, 0x08, 0x05, 0x2a, 0x02, 0x22, 0x00},             // a source
      {0x0a, 0x06, 0x08, 0x05, 0x32, 0x02, 0x08, 0x08}, // a ping, not data
      {0x0a, 0x07, 0x08, 0x05, 0x2a, 0x02, 0x08, 0x08}, // length past end
  };
  for (const auto& b : others) {
    Message untouched;
    untouched.mutable_hello();
    BOOST_TEST(!parse_eager_send_data(b.data(), b.size(), untouched));
    BOOST_TEST(untouched.has_hello());
  }
  // Spares on the output's arena are taken and cleared; the acked list of
  // the spare SendData does not survive.
  google::protobuf::Arena arena;
  auto* on_arena = google::protobuf::Arena::CreateMessage<Message>(&arena);
  eager_spares spares;
  spares.request = google::protobuf::Arena::CreateMessage<Request>(&arena);
  spares.request->set_request_id(99);
  spares.send_data = google::protobuf::Arena::CreateMessage<SendData>(&arena);
  spares.send_data->add_acked(7);
  spares.send_data->set_has_imm(true);
  auto* req = spares.request;
  auto* sd = spares.send_data;
  BOOST_REQUIRE(parse_eager_send_data(canonical.data(), canonical.size(),
                                      *on_arena, &spares));
  BOOST_TEST(spares.request == nullptr);
  BOOST_TEST(spares.send_data == nullptr);
  BOOST_TEST(&on_arena->request() == req);
  BOOST_TEST(&on_arena->request().send_data() == sd);
  BOOST_TEST(on_arena->request().request_id() == 5u);
  BOOST_TEST(sd->len() == 8u);
  BOOST_TEST(sd->acked_size() == 0);
  BOOST_TEST(!sd->has_imm());
}

BOOST_AUTO_TEST_CASE(other_encodings_of_an_actor_message_go_to_protobuf) {
  // Message{actor_message{target 5, sender 6}} as encode writes it.
  const bytes canonical = {0x3a, 0x04, 0x08, 0x05, 0x10, 0x06};
  Message out;
  BOOST_REQUIRE(
      parse_eager_actor_message(canonical.data(), canonical.size(), out));
  BOOST_TEST(out.actor_message().target() == 5u);
  BOOST_TEST(out.actor_message().sender() == 6u);
  const std::vector<bytes> others = {
      {0x3a, 0x04, 0x10, 0x06, 0x08, 0x05},       // fields out of order
      {0x3a, 0x04, 0x08, 0x05, 0x08, 0x06},       // a field twice
      {0x3a, 0x05, 0x08, 0x85, 0x00, 0x10, 0x06}, // an overlong varint
      {0x3a, 0x0b, 0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
       0x00}, // ten bytes, the last 0: overlong
      {0x3a, 0x0a, 0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
       0x00}, // nine bytes, the last 0: overlong
      {0x3a, 0x0b, 0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
       0x02}, // past 64 bits
      {0x3a, 0x0c, 0x08, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
       0x81, 0x01},                         // eleven bytes
      {0x3a, 0x04, 0x08, 0x00, 0x10, 0x06}, // a zero written
      {0x3a, 0x02, 0x30, 0x02},             // down as 2
      {0x3a, 0x02, 0x38, 0x00},             // field 7 as a varint
      {0x3a, 0x03, 0x08, 0x05},             // length past the end
      {0x3a, 0x02, 0x08, 0x05, 0x40, 0x01}, // a Message field behind
      {0x42, 0x02, 0x08, 0x05},             // an ActorAck
  };
  for (const auto& b : others) {
    Message untouched;
    untouched.mutable_hello();
    BOOST_TEST(!parse_eager_actor_message(b.data(), b.size(), untouched));
    BOOST_TEST(untouched.has_hello());
  }
  // decode still takes the valid ones, through protobuf.
  bytes frame = {0x06, 0x00, 0x00, 0x00, 0x3a, 0x04, 0x10, 0x06, 0x08, 0x05};
  Message decoded;
  auto res = decode(frame.data(), frame.size(), max_len, decoded);
  BOOST_REQUIRE(res.code == errc::none);
  BOOST_TEST(decoded.actor_message().target() == 5u);
  BOOST_TEST(decoded.actor_message().sender() == 6u);
}

BOOST_AUTO_TEST_SUITE_END()

} // namespace codec_by_hand
