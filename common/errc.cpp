#include "rdmactor/errc.hpp"

namespace rdmactor {

const char* to_string(errc x) noexcept {
  switch (x) {
#define RDMACTOR_ERRC_CASE(name)                                               \
  case errc::name:                                                             \
    return #name;
    RDMACTOR_ERRC_CASE(none)
    RDMACTOR_ERRC_CASE(truncated_frame)
    RDMACTOR_ERRC_CASE(frame_too_large)
    RDMACTOR_ERRC_CASE(malformed_message)
    RDMACTOR_ERRC_CASE(unknown_message_kind)
    RDMACTOR_ERRC_CASE(payload_mismatch)
    RDMACTOR_ERRC_CASE(buffer_too_small)
    RDMACTOR_ERRC_CASE(fabric_unavailable)
    RDMACTOR_ERRC_CASE(device_not_found)
    RDMACTOR_ERRC_CASE(registration_failed)
    RDMACTOR_ERRC_CASE(connect_failed)
    RDMACTOR_ERRC_CASE(connect_timeout)
    RDMACTOR_ERRC_CASE(handshake_failed)
    RDMACTOR_ERRC_CASE(version_mismatch)
    RDMACTOR_ERRC_CASE(invalid_address)
    RDMACTOR_ERRC_CASE(local_length_error)
    RDMACTOR_ERRC_CASE(local_protection_error)
    RDMACTOR_ERRC_CASE(remote_access_error)
    RDMACTOR_ERRC_CASE(remote_operation_error)
    RDMACTOR_ERRC_CASE(rnr_retry_exceeded)
    RDMACTOR_ERRC_CASE(transport_retry_exceeded)
    RDMACTOR_ERRC_CASE(work_request_flushed)
    RDMACTOR_ERRC_CASE(completion_error)
    RDMACTOR_ERRC_CASE(qp_error)
    RDMACTOR_ERRC_CASE(peer_gone)
    RDMACTOR_ERRC_CASE(request_timeout)
    RDMACTOR_ERRC_CASE(closed)
    RDMACTOR_ERRC_CASE(invalid_layout)
    RDMACTOR_ERRC_CASE(size_limit)
    RDMACTOR_ERRC_CASE(out_of_memory)
    RDMACTOR_ERRC_CASE(quota_exceeded)
    RDMACTOR_ERRC_CASE(unknown_token)
    RDMACTOR_ERRC_CASE(already_sent)
    RDMACTOR_ERRC_CASE(length_mismatch)
    RDMACTOR_ERRC_CASE(out_of_bounds)
    RDMACTOR_ERRC_CASE(invalid_argument)
    RDMACTOR_ERRC_CASE(peer_error)
    RDMACTOR_ERRC_CASE(internal_error)
    RDMACTOR_ERRC_CASE(misaligned)
    RDMACTOR_ERRC_CASE(unsupported)
    RDMACTOR_ERRC_CASE(peer_closed)
    RDMACTOR_ERRC_CASE(not_negotiated)
    RDMACTOR_ERRC_CASE(lease_expired)
    RDMACTOR_ERRC_CASE(unknown_actor)
    RDMACTOR_ERRC_CASE(serialization_failed)
    RDMACTOR_ERRC_CASE(handler_failed)
    RDMACTOR_ERRC_CASE(unexpected_message)
#undef RDMACTOR_ERRC_CASE
  }
  return "unknown_errc";
}

const char* describe(errc x) noexcept {
  switch (x) {
    case errc::none:
      return "no error";
    case errc::truncated_frame:
      return "frame shorter than its header says; the peer sent a broken "
             "frame or the connection was cut";
    case errc::frame_too_large:
      return "frame larger than the negotiated max message length; the peer "
             "ignores the negotiated limit";
    case errc::malformed_message:
      return "bytes do not parse as an agent Message; the peer is not an "
             "rdmactor peer or the data was corrupted";
    case errc::unknown_message_kind:
      return "message kind unknown to this version; upgrade the older side";
    case errc::payload_mismatch:
      return "SendData length disagrees with the payload that arrived";
    case errc::buffer_too_small:
      return "buffer too small for the frame; use a buffer of at least the "
             "max message length";
    case errc::fabric_unavailable:
      return "no RDMA fabric available; use fabric=soft, or load a driver "
             "(for Soft-RoCE: rdma link add rxe0 type rxe netdev ETH)";
    case errc::device_not_found:
      return "the configured RDMA device or port does not exist; check "
             "`ibv_devices` and the `device`/`port` options";
    case errc::registration_failed:
      return "memory registration failed; check memlock limits (ulimit -l)";
    case errc::connect_failed:
      return "could not connect or listen; check the address and that the "
             "peer is listening";
    case errc::connect_timeout:
      return "connection not established within connect_timeout_ms";
    case errc::handshake_failed:
      return "handshake failed; the other side is not an rdmactor endpoint "
             "of the same fabric";
    case errc::version_mismatch:
      return "protocol version mismatch; run the same rdmactor version on "
             "both sides";
    case errc::invalid_address:
      return "address must be HOST:PORT with a resolvable host";
    case errc::local_length_error:
      return "a received message was larger than the receive buffer";
    case errc::local_protection_error:
      return "a local buffer is not registered or lacks the access rights";
    case errc::remote_access_error:
      return "remote access denied: bad rkey, range outside the region or "
             "missing access flags";
    case errc::remote_operation_error:
      return "the remote side failed to execute the operation";
    case errc::rnr_retry_exceeded:
      return "receiver not ready: the peer had no receive posted in time";
    case errc::transport_retry_exceeded:
      return "transport retries exceeded: the peer does not answer";
    case errc::work_request_flushed:
      return "work request flushed because the queue pair entered the "
             "error state";
    case errc::completion_error:
      return "work completion failed";
    case errc::qp_error:
      return "the queue pair is in the error state; reconnect";
    case errc::peer_gone:
      return "the peer disconnected or died; pending requests failed";
    case errc::request_timeout:
      return "no answer within request_timeout_ms; the peer is slow or gone";
    case errc::closed:
      return "the connection or endpoint was closed (locally, or by the peer "
             "with a graceful close); open a new one to go on";
    case errc::peer_closed:
      return "the peer closed the connection on purpose (graceful close); "
             "connect again if you need it";
    case errc::invalid_layout:
      return "invalid layout: size must be > 0 and alignment a power of two";
    case errc::size_limit:
      return "size over max_alloc_bytes; raise the limit or allocate less";
    case errc::out_of_memory:
      return "the allocator could not satisfy the request";
    case errc::quota_exceeded:
      return "a per-peer limit was exceeded";
    case errc::unknown_token:
      return "memory-region token not known to the owner";
    case errc::already_sent:
      return "this memory region was already sent to the peer";
    case errc::length_mismatch:
      return "local and remote lengths differ; slice them to the same length";
    case errc::out_of_bounds:
      return "offset/length outside the memory region";
    case errc::invalid_argument:
      return "argument outside its documented range";
    case errc::peer_error:
      return "the peer answered with an error";
    case errc::internal_error:
      return "internal error in rdmactor; please report it";
    case errc::misaligned:
      return "an atomic operation needs an 8-byte aligned word; slice the "
             "remote_mr at a multiple of 8";
    case errc::unsupported:
      return "the fabric or device does not support this operation";
    case errc::not_negotiated:
      return "the peer did not offer this feature in its Hello (an older "
             "rdmactor or one configured without it); upgrade or enable "
             "it on the peer";
    case errc::lease_expired:
      return "the lease of this memory region ended and its owner revoked "
             "it; renew leases before they end (renew_lease) or ask for the "
             "region again";
    case errc::unknown_actor:
      return "no actor is published under this name (or the actor is gone) "
             "on the peer; publish it there first (publish_atom) and check "
             "the name";
    case errc::serialization_failed:
      return "a message type could not be (de)serialized: register every "
             "type of remote messages with add_message_type in the "
             "actor_system_config of both sides, under the same name and "
             "with the same layout; actor handles cannot travel";
    case errc::handler_failed:
      return "a data handler threw from on_data and was detached; later "
             "data queues for receive_data: catch errors inside the handler, "
             "or subscribe it again";
    case errc::unexpected_message:
      return "the remote actor is typed and its interface takes no message "
             "of these types; check the handle's type and the argument "
             "types (an int32_t is not an int64_t), and that both sides "
             "register the types under the same names";
  }
  return "unknown error code";
}

} // namespace rdmactor
