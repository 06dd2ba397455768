#define BOOST_TEST_MODULE protocol_codec
#include <boost/test/unit_test.hpp>

#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

#include <google/protobuf/stubs/logging.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using namespace rdmactor;
using namespace rdmactor::protocol;

namespace {

using bytes = std::vector<uint8_t>;

constexpr size_t max_len = 4096;
constexpr uint64_t u64_max = std::numeric_limits<uint64_t>::max();
constexpr uint32_t u32_max = std::numeric_limits<uint32_t>::max();

/// Encodes `msg` with max_len and appends `payload` behind it.
bytes make_frame(const Message& msg, const bytes& payload = {}) {
  bytes buf(max_len);
  auto res = encode(msg, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE_EQUAL(to_string(res.code), to_string(errc::none));
  BOOST_REQUIRE_GE(res.payload_capacity, payload.size());
  buf.resize(res.header_len);
  buf.insert(buf.end(), payload.begin(), payload.end());
  return buf;
}

/// Builds a frame around hand-crafted Message bytes.
bytes raw_frame(const bytes& msg_bytes, const bytes& payload = {}) {
  auto n = static_cast<uint32_t>(msg_bytes.size());
  bytes buf{static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
            static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 24)};
  buf.insert(buf.end(), msg_bytes.begin(), msg_bytes.end());
  buf.insert(buf.end(), payload.begin(), payload.end());
  return buf;
}

/// Builds a 4-byte header announcing `n` Message bytes.
bytes header(uint32_t n) {
  return {static_cast<uint8_t>(n), static_cast<uint8_t>(n >> 8),
          static_cast<uint8_t>(n >> 16), static_cast<uint8_t>(n >> 24)};
}

/// Decodes `frame` with max_len (`allow_more`: as a receiver that offered
/// packed frames) and returns the error code's name.
std::string decode_code(const bytes& frame, size_t max = max_len,
                        bool allow_more = false) {
  Message out;
  return to_string(
      decode(frame.data(), frame.size(), max, out, allow_more).code);
}

/// Compares two messages by their (deterministic, map-free) encoding.
bool same(const Message& x, const Message& y) {
  return x.SerializeAsString() == y.SerializeAsString();
}

/// Encodes `msg` with `payload`, decodes it and checks that everything
/// survives, the payload as a view into the frame.
void check_round_trip(const Message& msg, const bytes& payload = {}) {
  auto frame = make_frame(msg, payload);
  Message out;
  auto res = decode(frame.data(), frame.size(), max_len, out);
  BOOST_REQUIRE_EQUAL(to_string(res.code), to_string(errc::none));
  BOOST_CHECK(same(msg, out));
  BOOST_CHECK_EQUAL(out.DebugString(), msg.DebugString());
  BOOST_REQUIRE_EQUAL(res.payload_len, payload.size());
  BOOST_CHECK(res.payload == frame.data() + frame.size() - payload.size());
  BOOST_CHECK(bytes(res.payload, res.payload + res.payload_len) == payload);
}

const char* name(errc x) {
  return to_string(x);
}

} // namespace

BOOST_AUTO_TEST_SUITE(round_trip)

BOOST_AUTO_TEST_CASE(requests) {
  auto token = make_token(0x7f00deadbeef0000, 4096, 0x1234);
  check_round_trip(make_alloc_mr(1, 4096, 64));
  check_round_trip(make_alloc_mr(u64_max, u64_max, u64_max));
  check_round_trip(make_alloc_mr(0, 0, 0));
  check_round_trip(make_release_mr(2, token));
  check_round_trip(make_send_mr(3, SendMR::LOCAL, token));
  check_round_trip(make_send_mr(4, SendMR::REMOTE, token));
  check_round_trip(make_send_mr(5, SendMR::REMOTE, make_token(0, 0, 0)));
}

BOOST_AUTO_TEST_CASE(send_data_with_payload) {
  check_round_trip(make_send_data(6, 0), {});
  check_round_trip(make_send_data(7, 1), {0x42});
  bytes big(max_len - max_frame_overhead);
  for (size_t i = 0; i < big.size(); ++i)
    big[i] = static_cast<uint8_t>(i * 7);
  check_round_trip(make_send_data(u64_max, big.size()), big);
}

BOOST_AUTO_TEST_CASE(responses) {
  auto token = make_token(0x1000, 256, 99);
  check_round_trip(make_alloc_mr_response(1, OK, "", token));
  check_round_trip(make_alloc_mr_response(2, OUT_OF_MEMORY, "arena full"));
  check_round_trip(make_release_mr_response(3, OK, ""));
  check_round_trip(make_release_mr_response(4, UNKNOWN_TOKEN, "no such MR"));
  check_round_trip(make_send_mr_response(5, OK, ""));
  check_round_trip(make_send_mr_response(6, ALREADY_SENT, "sent before"));
  check_round_trip(make_send_data_response(7, OK, ""));
  check_round_trip(make_send_data_response(8, QUOTA_EXCEEDED, "quota"));
  auto msg = make_alloc_mr_response(9, OK, "fine", token);
  BOOST_CHECK_EQUAL(status_of(msg.response()), OK);
  BOOST_CHECK_EQUAL(detail_of(msg.response()), "fine");
  BOOST_CHECK(msg.response().alloc_mr().token().rkey() == 99u);
  // A token given with an error status is not sent.
  auto err = make_alloc_mr_response(10, SIZE_LIMIT, "too big", token);
  BOOST_CHECK(!err.response().alloc_mr().has_token());
  BOOST_CHECK_EQUAL(status_of(err.response()), SIZE_LIMIT);
}

BOOST_AUTO_TEST_CASE(cumulative_acks_round_trip_and_fit_a_header_only_send) {
  check_round_trip(make_hello(protocol_version, 65536, 128, true));
  check_round_trip(make_send_data_acks({42}));
  // The largest cumulative response: every id as large as ids get.
  std::vector<uint64_t> ids(rdmactor::tuning::max_acks_per_response,
                            ~uint64_t{0} >> 1);
  auto msg = make_send_data_acks(ids);
  check_round_trip(msg);
  BOOST_TEST(msg.response().send_data().also_acked_size() + 1
             == int(ids.size()));
  std::vector<uint8_t> buf(4096);
  auto res = encode(msg, buf.data(), buf.size(), 4096);
  BOOST_REQUIRE(res.code == errc::none);
  // transport::max_send_header_bytes: a response is a header-only send.
  BOOST_TEST(res.header_len <= 256u);
}

BOOST_AUTO_TEST_CASE(hello) {
  check_round_trip(make_hello(protocol_version, 65536, 128));
  check_round_trip(make_hello(u32_max, u32_max, u32_max));
  // The largest Hello fits rdma_cm private data on RC connect (56 bytes).
  bytes buf(max_len);
  auto res = encode(make_hello(u32_max, u32_max, u32_max), buf.data(),
                    buf.size(), max_len);
  BOOST_CHECK_LE(res.header_len, 56u);
}

BOOST_AUTO_TEST_CASE(unknown_status_values_are_accepted) {
  // A newer peer may answer with a status this version does not know.
  auto msg = make_send_mr_response(11, static_cast<Status>(77), "new");
  check_round_trip(msg);
  BOOST_CHECK_EQUAL(name(to_errc(status_of(msg.response()))),
                    name(errc::peer_error));
}

BOOST_AUTO_TEST_CASE(decode_resets_the_output) {
  auto first = make_frame(make_alloc_mr(1, 2, 4));
  auto second = make_frame(make_hello(1, 2, 3));
  Message out;
  BOOST_REQUIRE(decode(first.data(), first.size(), max_len, out).code
                == errc::none);
  BOOST_REQUIRE(decode(second.data(), second.size(), max_len, out).code
                == errc::none);
  BOOST_CHECK(same(out, make_hello(1, 2, 3)));
}

BOOST_AUTO_TEST_CASE(kind_names) {
  BOOST_CHECK_EQUAL(kind_name(make_alloc_mr(1, 1, 1)), "request.alloc_mr");
  BOOST_CHECK_EQUAL(kind_name(make_send_data(1, 1)), "request.send_data");
  BOOST_CHECK_EQUAL(kind_name(make_send_mr_response(1, OK, "")),
                    "response.send_mr");
  BOOST_CHECK_EQUAL(kind_name(make_hello(1, 1, 1)), "hello");
  BOOST_CHECK_EQUAL(kind_name(Message{}), "unknown");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(decode_rejects)

BOOST_AUTO_TEST_CASE(truncated_header) {
  const bytes full = make_frame(make_alloc_mr(1, 2, 4));
  for (size_t n = 0; n < frame_header_len; ++n) {
    BOOST_TEST_CONTEXT("n = " << n) {
      BOOST_CHECK_EQUAL(decode_code(bytes(full.begin(), full.begin() + n)),
                        name(errc::truncated_frame));
    }
  }
  Message out;
  BOOST_CHECK(decode(nullptr, 0, max_len, out).code == errc::truncated_frame);
}

BOOST_AUTO_TEST_CASE(header_announces_more_than_arrived) {
  const bytes full = make_frame(make_alloc_mr(1, 2, 4));
  for (size_t n = frame_header_len; n < full.size(); ++n) {
    BOOST_TEST_CONTEXT("n = " << n) {
      BOOST_CHECK_EQUAL(decode_code(bytes(full.begin(), full.begin() + n)),
                        name(errc::truncated_frame));
    }
  }
  BOOST_CHECK_EQUAL(decode_code(header(100)), name(errc::truncated_frame));
}

BOOST_AUTO_TEST_CASE(header_length_over_the_maximum) {
  // Rejected before the (missing) bytes are looked at.
  BOOST_CHECK_EQUAL(decode_code(header(u32_max)), name(errc::frame_too_large));
  BOOST_CHECK_EQUAL(decode_code(header(max_len - frame_header_len + 1)),
                    name(errc::frame_too_large));
  // Exactly at the limit is only truncated.
  BOOST_CHECK_EQUAL(decode_code(header(max_len - frame_header_len)),
                    name(errc::truncated_frame));
}

BOOST_AUTO_TEST_CASE(frame_over_the_maximum) {
  bytes payload(100, 0xab);
  auto frame = make_frame(make_send_data(1, payload.size()), payload);
  BOOST_CHECK_EQUAL(decode_code(frame, frame.size()), name(errc::none));
  BOOST_CHECK_EQUAL(decode_code(frame, frame.size() - 1),
                    name(errc::frame_too_large));
  // Even the header + Message alone exceed a tiny maximum.
  BOOST_CHECK_EQUAL(decode_code(frame, 8), name(errc::frame_too_large));
  BOOST_CHECK_EQUAL(decode_code(frame, 0), name(errc::frame_too_large));
}

BOOST_AUTO_TEST_CASE(garbage) {
  // Unterminated varint tag.
  BOOST_CHECK_EQUAL(decode_code(raw_frame({0xff, 0xff, 0xff})),
                    name(errc::malformed_message));
  // Field 1 claims 5 bytes, 1 follows.
  BOOST_CHECK_EQUAL(decode_code(raw_frame({0x0a, 0x05, 0x01})),
                    name(errc::malformed_message));
  // Tag 0 is invalid.
  BOOST_CHECK_EQUAL(decode_code(raw_frame({0x00, 0x01})),
                    name(errc::malformed_message));
  // Wire type 7 does not exist.
  BOOST_CHECK_EQUAL(decode_code(raw_frame({0x0f, 0x01})),
                    name(errc::malformed_message));
  // A response detail that is not UTF-8 (protobuf logs it; keep quiet).
  google::protobuf::LogSilencer quiet;
  auto msg = make_send_data_response(1, MALFORMED, "x");
  auto encoded = msg.SerializeAsString();
  auto pos = encoded.rfind('x');
  BOOST_REQUIRE(pos != std::string::npos);
  encoded[pos] = '\xff';
  BOOST_CHECK_EQUAL(
      decode_code(raw_frame(bytes(encoded.begin(), encoded.end()))),
      name(errc::malformed_message));
}

BOOST_AUTO_TEST_CASE(unknown_kinds) {
  // An empty Message has no body.
  BOOST_CHECK_EQUAL(decode_code(raw_frame({})),
                    name(errc::unknown_message_kind));
  // Message with only field 9 (a newer peer's kind).
  BOOST_CHECK_EQUAL(decode_code(raw_frame({0x48, 0x01})),
                    name(errc::unknown_message_kind));
  // Request{request_id = 7, field 9 = 1}.
  BOOST_CHECK_EQUAL(
      decode_code(raw_frame({0x0a, 0x04, 0x08, 0x07, 0x48, 0x01})),
      name(errc::unknown_message_kind));
  // Request{request_id = 7, field 12 (a response body) = {}}.
  BOOST_CHECK_EQUAL(
      decode_code(raw_frame({0x0a, 0x04, 0x08, 0x07, 0x62, 0x00})),
      name(errc::unknown_message_kind));
  // Response{request_id = 7, field 2 (a request body) = {}}.
  BOOST_CHECK_EQUAL(
      decode_code(raw_frame({0x12, 0x04, 0x08, 0x07, 0x12, 0x00})),
      name(errc::unknown_message_kind));
  // Response{request_id = 7} without a body.
  BOOST_CHECK_EQUAL(decode_code(raw_frame({0x12, 0x02, 0x08, 0x07})),
                    name(errc::unknown_message_kind));
}

BOOST_AUTO_TEST_CASE(unknown_send_mr_kind_keeps_the_request_id) {
  // Request{request_id = 1, send_mr = {kind = 5}}.
  auto frame = raw_frame({0x0a, 0x06, 0x08, 0x01, 0x22, 0x02, 0x08, 0x05});
  Message out;
  auto res = decode(frame.data(), frame.size(), max_len, out);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::unknown_message_kind));
  BOOST_CHECK(res.payload == nullptr);
  BOOST_CHECK_EQUAL(out.request().request_id(), 1u);
}

BOOST_AUTO_TEST_CASE(send_data_length_disagrees_with_payload) {
  bytes payload(10, 0x5a);
  auto shorter = make_frame(make_send_data(1, 11), payload);
  BOOST_CHECK_EQUAL(decode_code(shorter), name(errc::payload_mismatch));
  auto longer = make_frame(make_send_data(1, 9), payload);
  BOOST_CHECK_EQUAL(decode_code(longer), name(errc::payload_mismatch));
  auto none = make_frame(make_send_data(1, 1));
  BOOST_CHECK_EQUAL(decode_code(none), name(errc::payload_mismatch));
  // A huge announced length costs nothing.
  auto huge = make_frame(make_send_data(1, u64_max), payload);
  Message out;
  auto res = decode(huge.data(), huge.size(), max_len, out);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::payload_mismatch));
  BOOST_CHECK_EQUAL(res.payload_len, 0u);
  BOOST_CHECK_EQUAL(out.request().request_id(), 1u);
}

BOOST_AUTO_TEST_CASE(payload_behind_a_message_without_payload) {
  const bytes one{0x01};
  auto token = make_token(1, 2, 3);
  for (const auto& msg :
       {make_alloc_mr(1, 2, 4), make_release_mr(1, token),
        make_send_mr(1, SendMR::LOCAL, token),
        make_alloc_mr_response(1, OK, "", token),
        make_send_data_response(1, OK, ""), make_hello(1, 2, 3)}) {
    BOOST_TEST_CONTEXT(kind_name(msg)) {
      BOOST_CHECK_EQUAL(decode_code(make_frame(msg, one)),
                        name(errc::payload_mismatch));
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(encoding)

BOOST_AUTO_TEST_CASE(buffer_too_small) {
  auto msg = make_release_mr(1, make_token(0x1000, 4096, 7));
  const size_t needed = frame_header_len + msg.ByteSizeLong();
  bytes buf(needed + 8, 0xee);
  auto res = encode(msg, buf.data(), needed - 1, max_len);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::buffer_too_small));
  BOOST_CHECK_EQUAL(res.header_len, 0u);
  BOOST_CHECK_EQUAL(res.payload_capacity, 0u);
  BOOST_CHECK(buf == bytes(needed + 8, 0xee));
  BOOST_CHECK(encode(msg, buf.data(), 0, max_len).code
              == errc::buffer_too_small);
  BOOST_CHECK(encode(msg, nullptr, 0, max_len).code == errc::buffer_too_small);
  // Exactly enough: no room for payload, nothing written beyond.
  res = encode(msg, buf.data(), needed, max_len);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::none));
  BOOST_CHECK_EQUAL(res.header_len, needed);
  BOOST_CHECK_EQUAL(res.payload_capacity, 0u);
  BOOST_CHECK(bytes(buf.begin() + needed, buf.end()) == bytes(8, 0xee));
}

BOOST_AUTO_TEST_CASE(frame_too_large) {
  auto msg = make_alloc_mr(1, 2, 4);
  const size_t needed = frame_header_len + msg.ByteSizeLong();
  bytes buf(max_len);
  BOOST_CHECK_EQUAL(name(encode(msg, buf.data(), buf.size(), needed - 1).code),
                    name(errc::frame_too_large));
  BOOST_CHECK_EQUAL(name(encode(msg, buf.data(), buf.size(), 0).code),
                    name(errc::frame_too_large));
  // Too large wins over a too small buffer.
  BOOST_CHECK_EQUAL(name(encode(msg, buf.data(), 1, needed - 1).code),
                    name(errc::frame_too_large));
  BOOST_CHECK_EQUAL(name(encode(msg, buf.data(), buf.size(), needed).code),
                    name(errc::none));
}

BOOST_AUTO_TEST_CASE(payload_capacity) {
  auto msg = make_send_data(1, 0);
  bytes buf(2 * max_len);
  // The buffer limits.
  auto res = encode(msg, buf.data(), 100, max_len);
  BOOST_REQUIRE(res.code == errc::none);
  BOOST_CHECK_EQUAL(res.payload_capacity, 100 - res.header_len);
  // The maximum limits.
  res = encode(msg, buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(res.code == errc::none);
  BOOST_CHECK_EQUAL(res.payload_capacity, max_len - res.header_len);
  // Header: little-endian Message length.
  const size_t msg_len = res.header_len - frame_header_len;
  BOOST_CHECK_EQUAL(buf[0], msg_len);
  BOOST_CHECK_EQUAL(buf[1], 0u);
  BOOST_CHECK_EQUAL(buf[2], 0u);
  BOOST_CHECK_EQUAL(buf[3], 0u);
}

BOOST_AUTO_TEST_CASE(max_frame_overhead_bounds_send_data) {
  bytes buf(max_len);
  auto res = encode(make_send_data(u64_max, u64_max), buf.data(), buf.size(),
                    max_len);
  BOOST_REQUIRE(res.code == errc::none);
  // The bound is tight.
  BOOST_CHECK_EQUAL(res.header_len, max_frame_overhead);
  res = encode(make_send_data(0, 0), buf.data(), buf.size(), max_len);
  BOOST_CHECK_LE(res.header_len, max_frame_overhead);
  // So max_len - max_frame_overhead payload bytes always fit.
  const size_t fits = max_len - max_frame_overhead;
  res = encode(make_send_data(u64_max, fits), buf.data(), buf.size(), max_len);
  BOOST_REQUIRE(res.code == errc::none);
  BOOST_CHECK_GE(res.payload_capacity, fits);
}

BOOST_AUTO_TEST_CASE(piggyback_ack_overhead_bounds_acks_on_send_data) {
  bytes buf(max_len);
  for (size_t n = 1; n <= rdmactor::tuning::max_acks_per_response; ++n) {
    for (bool imm : {false, true}) {
      auto msg = imm ? make_send_data(u64_max, u64_max, 0xffffffffu)
                     : make_send_data(u64_max, u64_max);
      for (size_t i = 0; i < n; ++i)
        msg.mutable_request()->mutable_send_data()->add_acked(u64_max - i);
      auto res = encode(msg, buf.data(), buf.size(), max_len);
      BOOST_REQUIRE(res.code == errc::none);
      auto bound = max_frame_overhead + piggyback_ack_overhead(n)
                   + (imm ? imm_frame_overhead : 0);
      BOOST_TEST_CONTEXT("acks " << n << ", imm " << imm) {
        BOOST_CHECK_LE(res.header_len, bound);
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(status_mapping)

BOOST_AUTO_TEST_CASE(status_to_errc_and_back) {
  int known = 0;
  for (int i = Status_MIN; i <= Status_MAX; ++i) {
    if (!Status_IsValid(i))
      continue;
    ++known;
    auto s = static_cast<Status>(i);
    BOOST_TEST_CONTEXT(Status_Name(s)) {
      BOOST_CHECK_EQUAL(to_string(s), Status_Name(s));
      if (s == NOT_OWNED) {
        // errc has no not_owned code.
        BOOST_CHECK_EQUAL(name(to_errc(s)), name(errc::peer_error));
      } else {
        BOOST_CHECK_EQUAL(to_string(to_status(to_errc(s))), to_string(s));
      }
    }
  }
  BOOST_CHECK_EQUAL(known, 11);
  BOOST_CHECK_EQUAL(name(to_errc(OK)), name(errc::none));
  BOOST_CHECK_EQUAL(name(to_errc(INTERNAL)), name(errc::internal_error));
  BOOST_CHECK_EQUAL(name(to_errc(MALFORMED)), name(errc::malformed_message));
  BOOST_CHECK_EQUAL(name(to_errc(static_cast<Status>(1000))),
                    name(errc::peer_error));
  BOOST_CHECK_EQUAL(name(to_errc(static_cast<Status>(-1))),
                    name(errc::peer_error));
  BOOST_CHECK_EQUAL(to_string(static_cast<Status>(1000)), "UNKNOWN_STATUS");
}

BOOST_AUTO_TEST_CASE(errc_to_status_and_back) {
  for (auto e : {errc::none, errc::unknown_token, errc::already_sent,
                 errc::invalid_layout, errc::size_limit, errc::out_of_memory,
                 errc::quota_exceeded, errc::length_mismatch,
                 errc::malformed_message, errc::internal_error}) {
    BOOST_TEST_CONTEXT(name(e)) {
      BOOST_CHECK_EQUAL(name(to_errc(to_status(e))), name(e));
    }
  }
  for (auto e : {errc::truncated_frame, errc::frame_too_large,
                 errc::unknown_message_kind, errc::payload_mismatch}) {
    BOOST_TEST_CONTEXT(name(e)) {
      BOOST_CHECK_EQUAL(to_string(to_status(e)), "MALFORMED");
    }
  }
  for (auto e : {errc::peer_gone, errc::peer_error, errc::invalid_argument,
                 errc::request_timeout, errc::remote_access_error}) {
    BOOST_TEST_CONTEXT(name(e)) {
      BOOST_CHECK_EQUAL(to_string(to_status(e)), "INTERNAL");
    }
  }
  // Out-of-range values do not crash either.
  BOOST_CHECK_EQUAL(to_string(to_status(static_cast<errc>(255))), "INTERNAL");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(fuzz_seeds)

BOOST_AUTO_TEST_CASE(every_seed_decodes) {
  namespace fs = std::filesystem;
  size_t count = 0;
  for (const auto& entry : fs::directory_iterator(RDMACTOR_DECODE_CORPUS)) {
    std::ifstream in{entry.path(), std::ios::binary};
    bytes frame{std::istreambuf_iterator<char>{in},
                std::istreambuf_iterator<char>{}};
    BOOST_TEST_CONTEXT(entry.path().filename().string()) {
      // As every rdmactor agent decodes: it offers packed frames.
      BOOST_CHECK_EQUAL(decode_code(frame, max_len, true), name(errc::none));
    }
    ++count;
  }
  BOOST_CHECK_GE(count, 12u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(packed_frames)

namespace {

/// `first` marked as followed by `second` (EXT_PACKED_FRAMES).
bytes pack(bytes first, const bytes& second) {
  mark_more_frames(first.data());
  first.insert(first.end(), second.begin(), second.end());
  return first;
}

} // namespace

BOOST_AUTO_TEST_CASE(two_frames_in_one_message_decode_in_turn) {
  bytes a(3, 0x11);
  bytes b(5, 0x22);
  auto first = make_frame(make_send_data(1, a.size()), a);
  auto second = make_frame(make_send_data(2, b.size()), b);
  auto msg = pack(first, second);
  Message out;
  auto res = decode(msg.data(), msg.size(), max_len, out, true);
  BOOST_REQUIRE_EQUAL(name(res.code), name(errc::none));
  BOOST_TEST(res.more);
  BOOST_TEST(res.frame_len == first.size());
  BOOST_TEST(out.request().request_id() == 1u);
  BOOST_TEST(bytes(res.payload, res.payload + res.payload_len) == a);
  auto rest = msg.size() - res.frame_len;
  res = decode(msg.data() + res.frame_len, rest, max_len, out, true);
  BOOST_REQUIRE_EQUAL(name(res.code), name(errc::none));
  BOOST_TEST(!res.more);
  BOOST_TEST(res.frame_len == second.size());
  BOOST_TEST(out.request().request_id() == 2u);
  BOOST_TEST(bytes(res.payload, res.payload + res.payload_len) == b);
}

BOOST_AUTO_TEST_CASE(frames_without_payload_pack_too) {
  auto first = make_frame(make_send_data_response(7, OK, ""));
  auto second = make_frame(make_send_data_response(8, OK, ""));
  auto msg = pack(first, second);
  Message out;
  auto res = decode(msg.data(), msg.size(), max_len, out, true);
  BOOST_REQUIRE_EQUAL(name(res.code), name(errc::none));
  BOOST_TEST(res.more);
  BOOST_TEST(res.payload_len == 0u);
  BOOST_TEST(res.frame_len == first.size());
}

BOOST_AUTO_TEST_CASE(a_receiver_that_did_not_offer_packing_refuses_the_mark) {
  auto first = make_frame(make_send_data_response(7, OK, ""));
  auto msg = pack(first, make_frame(make_send_data_response(8, OK, "")));
  BOOST_CHECK_EQUAL(decode_code(msg), name(errc::frame_too_large));
}

BOOST_AUTO_TEST_CASE(a_marked_frame_must_leave_room_for_the_next) {
  bytes a(3, 0x11);
  // Marked, but its payload is all that follows: nothing is packed behind.
  auto alone = make_frame(make_send_data(1, a.size()), a);
  mark_more_frames(alone.data());
  Message out;
  auto res = decode(alone.data(), alone.size(), max_len, out, true);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::payload_mismatch));
  // Marked, and it announces more payload than arrived.
  auto over = make_frame(make_send_data(1, 100), a);
  mark_more_frames(over.data());
  res = decode(over.data(), over.size(), max_len, out, true);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::payload_mismatch));
  // An unmarked frame keeps the strict rule: its payload fills the rest.
  auto loose = make_frame(make_send_data(1, 2), a);
  res = decode(loose.data(), loose.size(), max_len, out, true);
  BOOST_CHECK_EQUAL(name(res.code), name(errc::payload_mismatch));
}

BOOST_AUTO_TEST_SUITE_END()
