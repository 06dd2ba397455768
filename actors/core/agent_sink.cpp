// What a sink of the agent's protocol core does where its owner does not
// say otherwise.

#include "actors/core/agent_sink.hpp"

#include "rdmactor/error.hpp"

namespace rdmactor {

agent_sink::~agent_sink() = default;

void agent_sink::read(local_mr dst, const mr_token& src,
                      std::function<void(const caf::error&)> done) {
  static_cast<void>(dst);
  static_cast<void>(src);
  done(make_error(errc::unsupported,
                  "this agent cannot read the peer's memory (a sink without "
                  "RDMA READ)"));
}

caf::error agent_sink::deliver_actor_message(const protocol::ActorMessage&,
                                             const uint8_t*, size_t) {
  return make_error(errc::unsupported, "this node takes no actor messages");
}

actor_lookup_result agent_sink::find_actor(const std::string&) {
  return {};
}

caf::error agent_sink::take_actor_ack(uint64_t, uint64_t) {
  return make_error(errc::unsupported, "this node sends no actor messages");
}

} // namespace rdmactor
