// libFuzzer target for the frame decoder: any input is a frame from an
// untrusted peer. Accepted frames must survive encode + decode unchanged.

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"

#include <google/protobuf/stubs/logging.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace rdmactor;
using namespace rdmactor::protocol;

namespace {

/// The negotiated maximum the fuzzed frames are decoded against.
constexpr size_t max_len = 1024;

/// Room for re-encoding: a proto3 enum with a negative value from the wire
/// re-encodes in 10 bytes, so an accepted Message may grow slightly.
constexpr size_t reencode_max_len = 2 * max_len;

/// Aborts with `what` unless `ok`: a broken invariant is a finding.
void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "decode_fuzz: %s\n", what);
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Invalid UTF-8 in a string field makes protobuf log every time.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // As a receiver that offered packed frames: every frame of the message,
  // in turn, stays inside it, and only a marked one leaves room behind.
  for (size_t offset = 0;;) {
    Message one;
    auto r = decode(data + offset, size - offset, max_len, one, true);
    if (r.code != errc::none)
      break;
    require(r.frame_len > 0 && r.frame_len <= size - offset,
            "a packed frame reaches outside the message");
    require(r.payload >= data + offset && r.payload_len <= r.frame_len
                && r.payload + r.payload_len == data + offset + r.frame_len,
            "a packed frame's payload lies outside it");
    require(r.more == (r.frame_len < size - offset),
            "a frame leaves bytes behind without its mark");
    if (!r.more)
      break;
    offset += r.frame_len;
  }
  Message first;
  auto res = decode(data, size, max_len, first);
  if (res.code != errc::none) {
    require(res.payload == nullptr && res.payload_len == 0,
            "a rejected frame exposes payload");
    return 0;
  }
  require(size <= max_len, "accepted a frame over the maximum");
  require(res.payload >= data && res.payload_len <= size
              && res.payload + res.payload_len == data + size,
          "payload view outside the frame");
  // The helpers must cope with anything decode accepts.
  require(std::strlen(kind_name(first)) > 0, "empty kind name");
  if (first.has_response()) {
    auto status = status_of(first.response());
    require(std::strlen(to_string(status)) > 0, "empty status name");
    (void)to_errc(status);
  }
  // Re-encode with the payload behind it.
  std::vector<uint8_t> buf(reencode_max_len);
  auto enc = encode(first, buf.data(), buf.size(), reencode_max_len);
  require(enc.code == errc::none, "re-encoding an accepted Message failed");
  require(enc.payload_capacity >= res.payload_len, "payload does not fit");
  if (res.payload_len > 0)
    std::memcpy(buf.data() + enc.header_len, res.payload, res.payload_len);
  const size_t frame_len = enc.header_len + res.payload_len;
  // Decode again: same Message, same payload.
  Message second;
  auto res2 = decode(buf.data(), frame_len, reencode_max_len, second);
  require(res2.code == errc::none, "re-encoded frame rejected");
  require(res2.payload_len == res.payload_len, "payload length changed");
  require(res.payload_len == 0
              || std::memcmp(res2.payload, res.payload, res.payload_len) == 0,
          "payload bytes changed");
  require(first.SerializeAsString() == second.SerializeAsString(),
          "Message changed in the round trip");
  // The hand parser of eager ActorMessages takes only bytes that protobuf
  // parses to the same Message, and every eager ActorMessage that encode
  // writes; the hand encoder writes encode's bytes.
  if (size >= frame_header_len) {
    size_t msg_len
        = std::min<size_t>(size - frame_header_len, data[0] | (data[1] << 8));
    struct hand_parser {
      bool (*parse)(const uint8_t*, size_t, Message&, eager_spares*) noexcept;
      const char* refused;
      const char* differs;
    };
    const hand_parser parsers[]
        = {{parse_eager_actor_message,
            "the hand parser took what protobuf refuses",
            "the hand parser and protobuf disagree"},
           {parse_eager_send_data,
            "the SendData hand parser took what protobuf refuses",
            "the SendData hand parser and protobuf disagree"}};
    for (const auto& p : parsers) {
      Message by_hand;
      if (!p.parse(data + frame_header_len, msg_len, by_hand, nullptr))
        continue;
      Message by_protobuf;
      require(by_protobuf.ParseFromArray(data + frame_header_len,
                                         static_cast<int>(msg_len)),
              p.refused);
      require(by_hand.SerializeAsString() == by_protobuf.SerializeAsString(),
              p.differs);
    }
  }
  if (first.has_actor_message() && !first.actor_message().has_source()) {
    // The same fields without the unknown ones protobuf kept.
    const auto& am = first.actor_message();
    Message clean;
    auto* c = clean.mutable_actor_message();
    c->set_target(am.target());
    c->set_sender(am.sender());
    c->set_message_id(am.message_id());
    c->set_len(am.len());
    c->set_total_len(am.total_len());
    c->set_down(am.down());
    std::vector<uint8_t> want(actor_frame_overhead);
    auto want_enc = encode(clean, want.data(), want.size(), reencode_max_len);
    require(want_enc.code == errc::none, "encoding the fields failed");
    std::vector<uint8_t> by_hand(actor_frame_overhead);
    actor_message_fields f{am.target(), am.sender(),    am.message_id(),
                           am.len(),    am.total_len(), am.down()};
    auto n = encode_actor_message(f, by_hand.data(), by_hand.size(),
                                  reencode_max_len);
    require(n == want_enc.header_len
                && std::memcmp(by_hand.data(), want.data(), n) == 0,
            "the hand encoder and protobuf disagree");
    Message again;
    require(parse_eager_actor_message(by_hand.data() + frame_header_len,
                                      n - frame_header_len, again),
            "the hand parser refused what encode wrote");
    require(again.SerializeAsString() == clean.SerializeAsString(),
            "the hand parser changed the Message");
  }
  if (first.has_request() && first.request().has_send_data()
      && !first.request().send_data().has_source()) {
    // The hand encoder of the known fields, and the hand parser back.
    const auto& sd = first.request().send_data();
    std::vector<uint64_t> ids(sd.acked().begin(), sd.acked().end());
    send_data_fields f;
    f.request_id = first.request().request_id();
    f.len = sd.len();
    if (sd.has_imm())
      f.imm = sd.imm();
    f.acked = ids.data();
    f.acked_count = ids.size();
    std::vector<uint8_t> by_hand(max_send_data_header_len(ids.size()));
    auto n
        = encode_send_data(f, by_hand.data(), by_hand.size(), by_hand.size());
    require(n > 0, "the SendData hand encoder refused");
    Message again;
    require(parse_eager_send_data(by_hand.data() + frame_header_len,
                                  n - frame_header_len, again),
            "the SendData hand parser refused what encode_send_data wrote");
    Message clean;
    require(clean.ParseFromArray(by_hand.data() + frame_header_len,
                                 static_cast<int>(n - frame_header_len)),
            "protobuf refused what encode_send_data wrote");
    require(again.SerializeAsString() == clean.SerializeAsString(),
            "the SendData hand parser changed the Message");
  }
  // A second encode is byte for byte the first.
  std::vector<uint8_t> buf2(reencode_max_len);
  auto enc2 = encode(second, buf2.data(), buf2.size(), reencode_max_len);
  require(enc2.code == errc::none && enc2.header_len == enc.header_len
              && std::memcmp(buf2.data(), buf.data(), enc.header_len) == 0,
          "encoding is not stable");
  return 0;
}
