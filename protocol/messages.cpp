#include "protocol/messages.hpp"

#include <utility>

namespace rdmactor::protocol {

namespace {

/// Fills the status and detail of a response body.
template <class Body>
void set_outcome(Body& body, Status status, std::string&& detail) {
  body.set_status(status);
  body.set_detail(std::move(detail));
}

/// Returns the empty string that `detail_of` hands out for unset bodies.
const std::string& empty_string() noexcept {
  static const std::string result;
  return result;
}

} // namespace

MrToken make_token(uint64_t addr, uint64_t len, uint32_t rkey) {
  MrToken result;
  result.set_addr(addr);
  result.set_len(len);
  result.set_rkey(rkey);
  return result;
}

MrToken make_token(const mr_token& token) {
  return make_token(token.addr, token.len, token.rkey);
}

mr_token token_of(const MrToken& token) {
  return mr_token{token.addr(), token.len(), token.rkey()};
}

Message make_alloc_mr(uint64_t request_id, uint64_t size, uint64_t align) {
  Message result;
  auto* req = result.mutable_request();
  req->set_request_id(request_id);
  auto* body = req->mutable_alloc_mr();
  body->set_size(size);
  body->set_align(align);
  return result;
}

Message make_release_mr(uint64_t request_id, const MrToken& token) {
  Message result;
  auto* req = result.mutable_request();
  req->set_request_id(request_id);
  *req->mutable_release_mr()->mutable_token() = token;
  return result;
}

Message make_send_mr(uint64_t request_id, SendMR::Kind kind,
                     const MrToken& token, uint64_t tag, uint32_t lease_ms) {
  Message result;
  auto* req = result.mutable_request();
  req->set_request_id(request_id);
  auto* body = req->mutable_send_mr();
  body->set_kind(kind);
  *body->mutable_token() = token;
  body->set_tag(tag);
  body->set_lease_ms(lease_ms);
  return result;
}

Message make_renew_lease(uint64_t request_id, const MrToken& token,
                         uint32_t lease_ms) {
  Message result;
  auto* req = result.mutable_request();
  req->set_request_id(request_id);
  auto* body = req->mutable_renew_lease();
  *body->mutable_token() = token;
  body->set_lease_ms(lease_ms);
  return result;
}

Message make_renew_lease_response(uint64_t request_id, Status status,
                                  std::string detail, uint32_t lease_ms) {
  Message result;
  auto* res = result.mutable_response();
  res->set_request_id(request_id);
  auto* body = res->mutable_renew_lease();
  body->set_status(status);
  body->set_detail(std::move(detail));
  body->set_lease_ms(lease_ms);
  return result;
}

Message make_send_data(uint64_t request_id, uint64_t len) {
  Message result;
  auto* req = result.mutable_request();
  req->set_request_id(request_id);
  req->mutable_send_data()->set_len(len);
  return result;
}

Message make_send_data(uint64_t request_id, uint64_t len, uint32_t imm) {
  auto result = make_send_data(request_id, len);
  auto* body = result.mutable_request()->mutable_send_data();
  body->set_imm(imm);
  body->set_has_imm(true);
  return result;
}

Message make_send_data_rendezvous(uint64_t request_id, const MrToken& source,
                                  std::optional<uint32_t> imm) {
  auto result = imm ? make_send_data(request_id, source.len(), *imm)
                    : make_send_data(request_id, source.len());
  *result.mutable_request()->mutable_send_data()->mutable_source() = source;
  return result;
}

Message make_alloc_mr_response(uint64_t request_id, Status status,
                               std::string detail, const MrToken& token) {
  Message result;
  auto* res = result.mutable_response();
  res->set_request_id(request_id);
  auto* body = res->mutable_alloc_mr();
  set_outcome(*body, status, std::move(detail));
  if (status == OK)
    *body->mutable_token() = token;
  return result;
}

Message make_release_mr_response(uint64_t request_id, Status status,
                                 std::string detail) {
  Message result;
  auto* res = result.mutable_response();
  res->set_request_id(request_id);
  set_outcome(*res->mutable_release_mr(), status, std::move(detail));
  return result;
}

Message make_send_mr_response(uint64_t request_id, Status status,
                              std::string detail) {
  Message result;
  auto* res = result.mutable_response();
  res->set_request_id(request_id);
  set_outcome(*res->mutable_send_mr(), status, std::move(detail));
  return result;
}

Message make_send_data_response(uint64_t request_id, Status status,
                                std::string detail) {
  Message result;
  auto* res = result.mutable_response();
  res->set_request_id(request_id);
  set_outcome(*res->mutable_send_data(), status, std::move(detail));
  return result;
}

Status status_of(const Response& res) noexcept {
  switch (res.body_case()) {
    case Response::kAllocMr:
      return res.alloc_mr().status();
    case Response::kReleaseMr:
      return res.release_mr().status();
    case Response::kSendMr:
      return res.send_mr().status();
    case Response::kSendData:
      return res.send_data().status();
    case Response::kPong:
      return res.pong().status();
    case Response::kRenewLease:
      return res.renew_lease().status();
    case Response::kActorLookup:
      return res.actor_lookup().status();
    case Response::BODY_NOT_SET:
      break;
  }
  return INTERNAL;
}

const std::string& detail_of(const Response& res) noexcept {
  switch (res.body_case()) {
    case Response::kAllocMr:
      return res.alloc_mr().detail();
    case Response::kReleaseMr:
      return res.release_mr().detail();
    case Response::kSendMr:
      return res.send_mr().detail();
    case Response::kSendData:
      return res.send_data().detail();
    case Response::kPong:
      return res.pong().detail();
    case Response::kRenewLease:
      return res.renew_lease().detail();
    case Response::kActorLookup:
      return res.actor_lookup().detail();
    case Response::BODY_NOT_SET:
      break;
  }
  return empty_string();
}

Message make_send_data_acks(const std::vector<uint64_t>& ids) {
  Message result;
  fill_send_data_acks(ids, result);
  return result;
}

void fill_send_data_acks(const std::vector<uint64_t>& ids, Message& out) {
  auto* res = out.mutable_response();
  res->set_request_id(ids.empty() ? 0 : ids.front());
  auto* body = res->mutable_send_data();
  body->set_status(OK);
  if (ids.size() > 1)
    body->mutable_also_acked()->Reserve(static_cast<int>(ids.size() - 1));
  for (size_t i = 1; i < ids.size(); ++i)
    body->add_also_acked(ids[i]);
}

Message make_hello(uint32_t version, uint32_t max_message_len,
                   uint32_t recv_depth, bool cumulative_acks,
                   uint32_t extensions) {
  Message result;
  auto* hello = result.mutable_hello();
  hello->set_version(version);
  hello->set_max_message_len(max_message_len);
  hello->set_recv_depth(recv_depth);
  hello->set_cumulative_acks(cumulative_acks);
  hello->set_extensions(extensions);
  return result;
}

Message make_goodbye(std::string reason) {
  Message result;
  result.mutable_goodbye()->set_reason(std::move(reason));
  return result;
}

Message make_ping(uint64_t request_id) {
  Message result;
  auto* req = result.mutable_request();
  req->set_request_id(request_id);
  req->mutable_ping();
  return result;
}

Message make_pong(uint64_t request_id) {
  Message result;
  auto* res = result.mutable_response();
  res->set_request_id(request_id);
  res->mutable_pong()->set_status(OK);
  return result;
}

const char* kind_name(const Message& msg) noexcept {
  switch (msg.body_case()) {
    case Message::kRequest:
      switch (msg.request().body_case()) {
        case Request::kAllocMr:
          return "request.alloc_mr";
        case Request::kReleaseMr:
          return "request.release_mr";
        case Request::kSendMr:
          return "request.send_mr";
        case Request::kSendData:
          return "request.send_data";
        case Request::kPing:
          return "request.ping";
        case Request::kRenewLease:
          return "request.renew_lease";
        case Request::kActorLookup:
          return "request.actor_lookup";
        case Request::kActorMessage:
          return "request.actor_message";
        case Request::BODY_NOT_SET:
          break;
      }
      return "request.unknown";
    case Message::kResponse:
      switch (msg.response().body_case()) {
        case Response::kAllocMr:
          return "response.alloc_mr";
        case Response::kReleaseMr:
          return "response.release_mr";
        case Response::kSendMr:
          return "response.send_mr";
        case Response::kSendData:
          return "response.send_data";
        case Response::kPong:
          return "response.pong";
        case Response::kRenewLease:
          return "response.renew_lease";
        case Response::kActorLookup:
          return "response.actor_lookup";
        case Response::BODY_NOT_SET:
          break;
      }
      return "response.unknown";
    case Message::kHello:
      return "hello";
    case Message::kGoodbye:
      return "goodbye";
    case Message::kActorMessage:
      return "actor_message";
    case Message::kActorAck:
      return "actor_ack";
    case Message::BODY_NOT_SET:
      break;
  }
  return "unknown";
}

const char* to_string(Status x) noexcept {
  switch (x) {
    case OK:
      return "OK";
    case UNKNOWN_TOKEN:
      return "UNKNOWN_TOKEN";
    case ALREADY_SENT:
      return "ALREADY_SENT";
    case INVALID_LAYOUT:
      return "INVALID_LAYOUT";
    case SIZE_LIMIT:
      return "SIZE_LIMIT";
    case OUT_OF_MEMORY:
      return "OUT_OF_MEMORY";
    case QUOTA_EXCEEDED:
      return "QUOTA_EXCEEDED";
    case LENGTH_MISMATCH:
      return "LENGTH_MISMATCH";
    case NOT_OWNED:
      return "NOT_OWNED";
    case MALFORMED:
      return "MALFORMED";
    case INTERNAL:
      return "INTERNAL";
    default:
      // Covers the generated sentinels and values of newer peers.
      break;
  }
  return "UNKNOWN_STATUS";
}

errc to_errc(Status x) noexcept {
  switch (x) {
    case OK:
      return errc::none;
    case UNKNOWN_TOKEN:
      return errc::unknown_token;
    case ALREADY_SENT:
      return errc::already_sent;
    case INVALID_LAYOUT:
      return errc::invalid_layout;
    case SIZE_LIMIT:
      return errc::size_limit;
    case OUT_OF_MEMORY:
      return errc::out_of_memory;
    case QUOTA_EXCEEDED:
      return errc::quota_exceeded;
    case LENGTH_MISMATCH:
      return errc::length_mismatch;
    case MALFORMED:
      return errc::malformed_message;
    case INTERNAL:
      return errc::internal_error;
    case NOT_OWNED:
    default:
      break;
  }
  return errc::peer_error;
}

Status to_status(errc x) noexcept {
  switch (x) {
    case errc::none:
      return OK;
    case errc::unknown_token:
      return UNKNOWN_TOKEN;
    case errc::already_sent:
      return ALREADY_SENT;
    case errc::invalid_layout:
      return INVALID_LAYOUT;
    case errc::size_limit:
      return SIZE_LIMIT;
    case errc::out_of_memory:
      return OUT_OF_MEMORY;
    case errc::quota_exceeded:
      return QUOTA_EXCEEDED;
    case errc::length_mismatch:
      return LENGTH_MISMATCH;
    case errc::truncated_frame:
    case errc::frame_too_large:
    case errc::malformed_message:
    case errc::unknown_message_kind:
    case errc::payload_mismatch:
      return MALFORMED;
    default:
      break;
  }
  return INTERNAL;
}

} // namespace rdmactor::protocol
