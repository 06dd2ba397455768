#include "protocol/codec.hpp"

#include <algorithm>
#include <limits>

namespace rdmactor::protocol {

namespace {

/// Stores `x` at `out` as 4 bytes, little endian.
void write_le32(uint8_t* out, uint32_t x) noexcept {
  out[0] = static_cast<uint8_t>(x);
  out[1] = static_cast<uint8_t>(x >> 8);
  out[2] = static_cast<uint8_t>(x >> 16);
  out[3] = static_cast<uint8_t>(x >> 24);
}

/// Loads 4 little-endian bytes from `in`.
uint32_t read_le32(const uint8_t* in) noexcept {
  return static_cast<uint32_t>(in[0]) | (static_cast<uint32_t>(in[1]) << 8)
         | (static_cast<uint32_t>(in[2]) << 16)
         | (static_cast<uint32_t>(in[3]) << 24);
}

/// Checks that every oneof on the path is set to a case this version knows.
bool known_kind(const Message& msg) noexcept {
  switch (msg.body_case()) {
    case Message::kRequest: {
      const auto& req = msg.request();
      switch (req.body_case()) {
        case Request::kAllocMr:
        case Request::kReleaseMr:
        case Request::kSendData:
        case Request::kPing:
        case Request::kRenewLease:
        case Request::kActorLookup:
        case Request::kActorMessage:
          return true;
        case Request::kSendMr:
          return SendMR::Kind_IsValid(req.send_mr().kind());
        case Request::BODY_NOT_SET:
          return false;
      }
      return false;
    }
    case Message::kResponse:
      switch (msg.response().body_case()) {
        case Response::kAllocMr:
        case Response::kReleaseMr:
        case Response::kSendMr:
        case Response::kSendData:
        case Response::kPong:
        case Response::kRenewLease:
        case Response::kActorLookup:
          return true;
        case Response::BODY_NOT_SET:
          return false;
      }
      return false;
    case Message::kHello:
    case Message::kGoodbye:
    case Message::kActorMessage:
    case Message::kActorAck:
      return true;
    case Message::BODY_NOT_SET:
      return false;
  }
  return false;
}

/// Returns whether `msg` is a SendData request (the only carrier of payload).
bool is_send_data(const Message& msg) noexcept {
  return msg.body_case() == Message::kRequest
         && msg.request().body_case() == Request::kSendData;
}

} // namespace

encode_result encode(const Message& msg, uint8_t* buf, size_t buf_len,
                     size_t max_message_len) {
  encode_result res;
  const size_t msg_len = msg.ByteSizeLong();
  if (msg_len > std::numeric_limits<uint32_t>::max()
      || msg_len > static_cast<size_t>(std::numeric_limits<int>::max())
      || max_message_len < frame_header_len
      || msg_len > max_message_len - frame_header_len) {
    res.code = errc::frame_too_large;
    return res;
  }
  const size_t header_len = frame_header_len + msg_len;
  if (buf == nullptr || buf_len < header_len) {
    res.code = errc::buffer_too_small;
    return res;
  }
  write_le32(buf, static_cast<uint32_t>(msg_len));
  // ByteSizeLong() above cached the sizes the serializer relies on.
  msg.SerializeWithCachedSizesToArray(buf + frame_header_len);
  res.header_len = header_len;
  res.payload_capacity = std::min(buf_len, max_message_len) - header_len;
  return res;
}

decode_result decode(const uint8_t* data, size_t len, size_t max_message_len,
                     Message& out) {
  decode_result res;
  if (data == nullptr || len < frame_header_len) {
    res.code = errc::truncated_frame;
    return res;
  }
  if (len > max_message_len) {
    res.code = errc::frame_too_large;
    return res;
  }
  // From here on frame_header_len <= len <= max_message_len.
  const size_t msg_len = read_le32(data);
  if (msg_len > max_message_len - frame_header_len
      || msg_len > static_cast<size_t>(std::numeric_limits<int>::max())) {
    res.code = errc::frame_too_large;
    return res;
  }
  if (msg_len > len - frame_header_len) {
    res.code = errc::truncated_frame;
    return res;
  }
  const uint8_t* msg_begin = data + frame_header_len;
  if (!out.ParseFromArray(msg_begin, static_cast<int>(msg_len))) {
    res.code = errc::malformed_message;
    return res;
  }
  if (!known_kind(out)) {
    res.code = errc::unknown_message_kind;
    return res;
  }
  const size_t payload_len = len - frame_header_len - msg_len;
  // A rendezvous SendData (source set) names its payload in the sender's
  // memory: nothing follows it in the frame.
  uint64_t announced = 0;
  if (is_send_data(out)) {
    if (!out.request().send_data().has_source())
      announced = out.request().send_data().len();
  } else if (out.body_case() == Message::kActorMessage) {
    announced = out.actor_message().len();
  }
  if (announced != payload_len) {
    res.code = errc::payload_mismatch;
    return res;
  }
  res.payload = msg_begin + msg_len;
  res.payload_len = payload_len;
  return res;
}

} // namespace rdmactor::protocol
