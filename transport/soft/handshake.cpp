#include "transport/soft/handshake.hpp"

#include <algorithm>
#include <array>

#include "rdmactor/error.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "transport/soft/limits.hpp"
#include "transport/soft/socket_ops.hpp"

namespace rdmactor::transport::soft {

caf::error check_offer(const conn_params& offer) {
  if (offer.max_message_len_bytes < limits::min_message_len_bytes
      || offer.max_message_len_bytes > limits::max_message_len_bytes)
    return make_error(errc::invalid_argument,
                      "max_message_len_bytes must be in ["
                          + std::to_string(limits::min_message_len_bytes)
                          + ", 2^30], got "
                          + std::to_string(offer.max_message_len_bytes));
  if (offer.recv_depth < min_recv_depth
      || offer.recv_depth > limits::max_recv_depth)
    return make_error(errc::invalid_argument,
                      "recv_depth must be in [" + std::to_string(min_recv_depth)
                          + ", " + std::to_string(limits::max_recv_depth)
                          + "], got " + std::to_string(offer.recv_depth));
  return {};
}

conn_params negotiate(const conn_params& ours,
                      const wire::hello& theirs) noexcept {
  conn_params out;
  out.max_message_len_bytes
      = std::min(ours.max_message_len_bytes, theirs.max_message_len_bytes);
  out.recv_depth = std::min(ours.recv_depth, theirs.recv_depth);
  return out;
}

const char* describe(wire::hello_status st) noexcept {
  switch (st) {
    case wire::hello_status::ok:
      return "ok";
    case wire::hello_status::bad_magic:
      return "not an rdmactor soft-fabric peer (bad magic)";
    case wire::hello_status::bad_version:
      return "protocol version mismatch";
    case wire::hello_status::bad_params:
      return "connection parameters out of range (a max message length or "
             "a receive depth outside what the soft fabric supports; the "
             "receive depth must be at least 4)";
    case wire::hello_status::refused:
      return "handshake refused";
  }
  return "invalid hello";
}

caf::expected<handshake_result>
client_handshake(int fd, const wire::hello& ours, const conn_params& offer,
                 time_point deadline, const std::string& peer) {
  std::array<uint8_t, wire::hello_size> buf{};
  wire::encode(ours, buf.data());
  if (auto err = send_all(fd, buf.data(), buf.size(), deadline))
    return err;
  if (auto err = recv_all(fd, buf.data(), buf.size(), deadline))
    return err;
  wire::hello theirs;
  auto st = wire::decode(buf.data(), theirs);
  if (st == wire::hello_status::refused) {
    if (theirs.rnr_timeout_ms == static_cast<uint32_t>(wire::refusal::busy))
      return make_error(errc::connect_failed,
                        peer
                            + " dropped our handshake: too many handshakes "
                              "in progress there (a flood of connections "
                              "from our address?); retry later");
    return make_error(errc::connect_timeout,
                      peer
                          + " dropped our handshake: our hello did not "
                            "reach it within its connect-timeout-ms; check "
                            "the network or raise connect-timeout-ms there");
  }
  if (st == wire::hello_status::bad_version)
    return make_error(errc::version_mismatch,
                      peer + " speaks soft-fabric protocol version "
                          + std::to_string(theirs.version) + ", we speak "
                          + std::to_string(wire::version)
                          + "; run the same rdmactor version on both sides");
  if (st != wire::hello_status::ok)
    return make_error(errc::handshake_failed,
                      peer + ": " + describe(st)
                          + "; is it an rdmactor listener of the soft fabric?");
  return handshake_result{negotiate(offer, theirs), theirs.rnr_timeout_ms};
}

} // namespace rdmactor::transport::soft
