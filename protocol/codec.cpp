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

/// Bytes of `x` as a varint.
size_t varint_len(uint64_t x) noexcept {
  // Seven bits per byte: ceil(significant bits / 7), one byte for 0.
  const auto bits = static_cast<size_t>(64 - __builtin_clzll(x | 1));
  return (bits + 6) / 7;
}

/// Writes `x` as a varint at `out`; returns the byte after it.
uint8_t* write_varint(uint8_t* out, uint64_t x) noexcept {
  while (x >= 0x80) {
    *out++ = static_cast<uint8_t>(x | 0x80);
    x >>= 7;
  }
  *out++ = static_cast<uint8_t>(x);
  return out;
}

/// Wire-format tags (field number << 3 | wire type) of the eager SendData
/// frame's fields (agent.proto).
constexpr uint8_t tag_varint(uint32_t field) noexcept {
  return static_cast<uint8_t>(field << 3);
}
constexpr uint8_t tag_len(uint32_t field) noexcept {
  return static_cast<uint8_t>(field << 3 | 2);
}
static_assert(Message::kRequestFieldNumber < 16
                  && Request::kRequestIdFieldNumber < 16
                  && Request::kSendDataFieldNumber < 16
                  && SendData::kLenFieldNumber < 16
                  && SendData::kImmFieldNumber < 16
                  && SendData::kHasImmFieldNumber < 16
                  && SendData::kAckedFieldNumber < 16,
              "one-byte tags");

} // namespace

size_t encode_send_data(const send_data_fields& f, uint8_t* buf, size_t buf_len,
                        size_t max_message_len) noexcept {
  // Sizes inside out: SendData, Request, Message.
  const bool has_imm = f.imm.has_value();
  const uint32_t imm = f.imm.value_or(0);
  const size_t acked_bytes = 8 * f.acked_count;
  size_t sd_len = 0;
  if (f.len != 0)
    sd_len += 1 + varint_len(f.len);
  if (imm != 0)
    sd_len += 1 + varint_len(imm);
  if (has_imm)
    sd_len += 2;
  if (f.acked_count != 0)
    sd_len += 1 + varint_len(acked_bytes) + acked_bytes;
  size_t req_len = 1 + varint_len(sd_len) + sd_len;
  if (f.request_id != 0)
    req_len += 1 + varint_len(f.request_id);
  const size_t msg_len = 1 + varint_len(req_len) + req_len;
  const size_t header_len = frame_header_len + msg_len;
  if (buf == nullptr || header_len > buf_len || header_len > max_message_len
      || msg_len > std::numeric_limits<uint32_t>::max())
    return 0;
  // Then outside in, each field in number order.
  write_le32(buf, static_cast<uint32_t>(msg_len));
  auto* out = buf + frame_header_len;
  *out++ = tag_len(Message::kRequestFieldNumber);
  out = write_varint(out, req_len);
  if (f.request_id != 0) {
    *out++ = tag_varint(Request::kRequestIdFieldNumber);
    out = write_varint(out, f.request_id);
  }
  *out++ = tag_len(Request::kSendDataFieldNumber);
  out = write_varint(out, sd_len);
  if (f.len != 0) {
    *out++ = tag_varint(SendData::kLenFieldNumber);
    out = write_varint(out, f.len);
  }
  if (imm != 0) {
    *out++ = tag_varint(SendData::kImmFieldNumber);
    out = write_varint(out, imm);
  }
  if (has_imm) {
    *out++ = tag_varint(SendData::kHasImmFieldNumber);
    *out++ = 1;
  }
  if (f.acked_count != 0) {
    *out++ = tag_len(SendData::kAckedFieldNumber);
    out = write_varint(out, acked_bytes);
    for (size_t i = 0; i < f.acked_count; ++i) {
      auto x = f.acked[i]; // fixed64: 8 bytes, little endian
      for (int b = 0; b < 8; ++b) {
        *out++ = static_cast<uint8_t>(x);
        x >>= 8;
      }
    }
  }
  return header_len;
}

size_t encode_actor_message(const actor_message_fields& f, uint8_t* buf,
                            size_t buf_len, size_t max_message_len) noexcept {
  static_assert(Message::kActorMessageFieldNumber < 16
                    && ActorMessage::kDownFieldNumber < 16,
                "one-byte tags");
  const uint64_t values[]
      = {f.target, f.sender, f.message_id, f.len, f.total_len};
  constexpr uint32_t numbers[]
      = {ActorMessage::kTargetFieldNumber, ActorMessage::kSenderFieldNumber,
         ActorMessage::kMessageIdFieldNumber, ActorMessage::kLenFieldNumber,
         ActorMessage::kTotalLenFieldNumber};
  size_t am_len = 0;
  for (auto x : values)
    if (x != 0)
      am_len += 1 + varint_len(x);
  if (f.down)
    am_len += 2;
  const size_t msg_len = 1 + varint_len(am_len) + am_len;
  const size_t header_len = frame_header_len + msg_len;
  if (buf == nullptr || header_len > buf_len || header_len > max_message_len)
    return 0;
  write_le32(buf, static_cast<uint32_t>(msg_len));
  auto* out = buf + frame_header_len;
  *out++ = tag_len(Message::kActorMessageFieldNumber);
  out = write_varint(out, am_len);
  for (size_t i = 0; i < 5; ++i) {
    if (values[i] != 0) {
      *out++ = tag_varint(numbers[i]);
      out = write_varint(out, values[i]);
    }
  }
  if (f.down) {
    *out++ = tag_varint(ActorMessage::kDownFieldNumber);
    *out++ = 1;
  }
  return header_len;
}

namespace {

/// Reads a minimal varint of at most 64 bits from [*pos, end); false for
/// anything else (too long, overlong, cut off).
bool read_minimal_varint(const uint8_t*& pos, const uint8_t* end,
                         uint64_t& x) noexcept {
  if (pos < end && *pos < 0x80) {
    x = *pos++; // one byte: minimal by construction
    return true;
  }
  x = 0;
  for (unsigned shift = 0; shift < 64 && pos < end; shift += 7) {
    uint8_t byte = *pos++;
    // The tenth byte holds one bit of the value.
    if (shift == 63 && byte > 1)
      return false;
    x |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0)
      return byte != 0 || shift == 0; // a last byte of 0 is overlong
  }
  return false;
}

/// Reads the tag `tag` of a length-delimited field and a minimal length
/// that is exactly what is left: the one field of an eager form's level.
bool read_last_field(const uint8_t*& pos, const uint8_t* end,
                     uint8_t tag) noexcept {
  uint64_t n = 0;
  return pos < end && *pos++ == tag && read_minimal_varint(pos, end, n)
         && n == static_cast<uint64_t>(end - pos);
}

/// Reads one varint field of an eager form: wire type 0, a number above
/// `last` (fields in number order, each once) and at most `max_number`,
/// a minimal nonzero value (encode leaves zeros out).  Sets `number`.
bool read_ordered_field(uint8_t tag, uint32_t max_number, uint32_t& last,
                        const uint8_t*& pos, const uint8_t* end,
                        uint32_t& number, uint64_t& x) noexcept {
  number = tag >> 3;
  if ((tag & 7) != 0 || number <= last || number > max_number
      || !read_minimal_varint(pos, end, x) || x == 0)
    return false;
  last = number;
  return true;
}

/// `spare` when it lives on `arena` (not null), cleared; else null.
template <class T>
T* take_spare(T*& spare, google::protobuf::Arena* arena) noexcept {
  if (spare == nullptr || arena == nullptr || spare->GetArena() != arena)
    return nullptr;
  T* x = spare;
  spare = nullptr;
  x->Clear();
  return x;
}

/// Reads 8 bytes little endian (a fixed64).
uint64_t read_le64(const uint8_t* p) noexcept {
  uint64_t x = 0;
  for (int b = 7; b >= 0; --b)
    x = x << 8 | p[b];
  return x;
}

} // namespace

bool parse_eager_actor_message(const uint8_t* data, size_t len, Message& out,
                               eager_spares* spares) noexcept {
  const uint8_t* pos = data;
  const uint8_t* end = data + len;
  if (!read_last_field(pos, end, tag_len(Message::kActorMessageFieldNumber)))
    return false;
  uint64_t values[ActorMessage::kDownFieldNumber + 1] = {};
  uint32_t last = 0;
  while (pos < end) {
    uint32_t number = 0;
    uint64_t x = 0;
    if (!read_ordered_field(*pos++, ActorMessage::kDownFieldNumber, last, pos,
                            end, number, x)
        || (number == ActorMessage::kDownFieldNumber && x != 1))
      return false;
    values[number] = x;
  }
  out.Clear();
  ActorMessage* am = nullptr;
  if (spares != nullptr
      && (am = take_spare(spares->actor_message, out.GetArena())))
    out.unsafe_arena_set_allocated_actor_message(am);
  else
    am = out.mutable_actor_message();
  am->set_target(values[ActorMessage::kTargetFieldNumber]);
  am->set_sender(values[ActorMessage::kSenderFieldNumber]);
  am->set_message_id(values[ActorMessage::kMessageIdFieldNumber]);
  am->set_len(values[ActorMessage::kLenFieldNumber]);
  am->set_total_len(values[ActorMessage::kTotalLenFieldNumber]);
  am->set_down(values[ActorMessage::kDownFieldNumber] != 0);
  return true;
}

bool parse_eager_send_data(const uint8_t* data, size_t len, Message& out,
                           eager_spares* spares) noexcept {
  const uint8_t* pos = data;
  const uint8_t* end = data + len;
  if (!read_last_field(pos, end, tag_len(Message::kRequestFieldNumber)))
    return false;
  uint64_t request_id = 0;
  if (pos < end && *pos == tag_varint(Request::kRequestIdFieldNumber)) {
    ++pos;
    if (!read_minimal_varint(pos, end, request_id) || request_id == 0)
      return false;
  }
  if (!read_last_field(pos, end, tag_len(Request::kSendDataFieldNumber)))
    return false;
  uint64_t values[SendData::kHasImmFieldNumber + 1] = {};
  uint32_t last = 0;
  const uint8_t* acked = nullptr;
  size_t acked_count = 0;
  while (pos < end) {
    uint8_t tag = *pos++;
    if (tag == tag_len(SendData::kAckedFieldNumber)) {
      // Packed, not empty, and the last field.
      uint64_t bytes = 0;
      if (!read_minimal_varint(pos, end, bytes) || bytes == 0 || bytes % 8 != 0
          || bytes != static_cast<uint64_t>(end - pos))
        return false;
      acked = pos;
      acked_count = static_cast<size_t>(bytes / 8);
      pos = end;
      break;
    }
    uint32_t number = 0;
    uint64_t x = 0;
    if (!read_ordered_field(tag, SendData::kHasImmFieldNumber, last, pos, end,
                            number, x)
        || (number == SendData::kImmFieldNumber
            && x > std::numeric_limits<uint32_t>::max())
        || (number == SendData::kHasImmFieldNumber && x != 1))
      return false;
    values[number] = x;
  }
  out.Clear();
  auto* arena = out.GetArena();
  Request* req = nullptr;
  if (spares != nullptr && (req = take_spare(spares->request, arena)))
    out.unsafe_arena_set_allocated_request(req);
  else
    req = out.mutable_request();
  req->set_request_id(request_id);
  SendData* sd = nullptr;
  if (spares != nullptr && (sd = take_spare(spares->send_data, arena)))
    req->unsafe_arena_set_allocated_send_data(sd);
  else
    sd = req->mutable_send_data();
  sd->set_len(values[SendData::kLenFieldNumber]);
  sd->set_imm(static_cast<uint32_t>(values[SendData::kImmFieldNumber]));
  sd->set_has_imm(values[SendData::kHasImmFieldNumber] != 0);
  if (acked_count != 0) {
    auto* ids = sd->mutable_acked();
    ids->Resize(static_cast<int>(acked_count), 0);
    auto* dst = ids->mutable_data();
    for (size_t i = 0; i < acked_count; ++i)
      dst[i] = read_le64(acked + 8 * i);
  }
  return true;
}

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

void mark_more_frames(uint8_t* frame) noexcept {
  write_le32(frame, read_le32(frame) | more_frames_bit);
}

decode_result decode(const uint8_t* data, size_t len, size_t max_message_len,
                     Message& out, bool allow_more, eager_spares* spares) {
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
  uint32_t word = read_le32(data);
  const bool more = allow_more && (word & more_frames_bit) != 0;
  if (more)
    word &= ~more_frames_bit;
  const size_t msg_len = word;
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
  const bool by_hand
      = msg_len > 0 && *msg_begin == tag_len(Message::kRequestFieldNumber)
            ? parse_eager_send_data(msg_begin, msg_len, out, spares)
            : parse_eager_actor_message(msg_begin, msg_len, out, spares);
  if (!by_hand && !out.ParseFromArray(msg_begin, static_cast<int>(msg_len))) {
    res.code = errc::malformed_message;
    return res;
  }
  if (!known_kind(out)) {
    res.code = errc::unknown_message_kind;
    return res;
  }
  const size_t after_msg = len - frame_header_len - msg_len;
  // A rendezvous SendData (source set) names its payload in the sender's
  // memory: nothing follows it in the frame.
  uint64_t announced = 0;
  if (is_send_data(out)) {
    if (!out.request().send_data().has_source())
      announced = out.request().send_data().len();
  } else if (out.body_case() == Message::kActorMessage) {
    announced = out.actor_message().len();
  }
  // The payload fills the rest of the input, or (another frame follows)
  // ends before it.
  if (more ? announced >= after_msg : announced != after_msg) {
    res.code = errc::payload_mismatch;
    return res;
  }
  res.payload = msg_begin + msg_len;
  res.payload_len = static_cast<size_t>(announced);
  res.frame_len = frame_header_len + msg_len + res.payload_len;
  res.more = more;
  return res;
}

} // namespace rdmactor::protocol
