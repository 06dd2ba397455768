// The agent core's rules for rendezvous: whether we offer it, and the
// checks of a source the peer asks us to READ (its token, and the room for
// its bytes in peer-max-queued-bytes), shared by SendData
// (actors/core/data_channel.cpp) and actor messages
// (actors/core/actor_channel_rendezvous.cpp).

#include "actors/core/agent_core.hpp"

#include <limits>

namespace rdmactor {

namespace pb = protocol;

bool agent_core::offers_rendezvous() const noexcept {
  return opts_.eager_message_len_bytes < opts_.max_message_len_bytes;
}

caf::error agent_core::check_source(const pb::MrToken& src, uint64_t len,
                                    const char* what,
                                    pb::Status& status) const {
  if (src.len() != len) {
    status = pb::LENGTH_MISMATCH;
    return make_error(errc::length_mismatch,
                      std::string{what} + " is " + std::to_string(len)
                          + " but its source token names "
                          + std::to_string(src.len()) + " bytes");
  }
  if (src.addr() > std::numeric_limits<uint64_t>::max() - len) {
    status = pb::MALFORMED;
    return make_error(errc::malformed_message,
                      "the source token's range wraps around the address "
                      "space");
  }
  return {};
}

caf::error agent_core::check_queued(uint64_t len, pb::Status& status) const {
  auto queued = buffered_bytes();
  if (queued > opts_.peer_max_queued_bytes
      || len > opts_.peer_max_queued_bytes - queued) {
    status = pb::QUOTA_EXCEEDED;
    return make_error(errc::quota_exceeded,
                      std::to_string(queued)
                          + " bytes you sent are not claimed or still being "
                            "read (peer-max-queued-bytes="
                          + std::to_string(opts_.peer_max_queued_bytes) + ")");
  }
  return {};
}

} // namespace rdmactor
