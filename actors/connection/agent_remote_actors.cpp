// The agent actor's part of remote actors: publish, lookup, and the frames
// its proxies forward.  The protocol is in actor_channel.cpp, the CAF
// side of proxies and delivery in remote_actors*.cpp.

#include <caf/actor_cast.hpp>

#include "actors/connection/agent_state.hpp"
#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"

namespace rdmactor::agent_detail {

namespace {

/// Whether every signature the requester expects is in the published
/// actor's interface (CAF io's rule: a typed handle needs a typed actor
/// that handles at least what the handle names).
bool assignable(const std::vector<std::string>& published,
                const std::vector<std::string>& expected) {
  if (expected.empty())
    return true;
  if (published.empty())
    return false;
  for (auto& sig : expected)
    if (std::find(published.begin(), published.end(), sig) == published.end())
      return false;
  return true;
}

} // namespace

caf::error actor_sink::deliver_actor_message(const protocol::ActorMessage& m,
                                             const uint8_t* data, size_t len) {
  auto& st = self_->state;
  st.activation_delivered_bytes += len;
  // Inside a poll: past the activation's budget, the poll ends here so the
  // targets (queued on this worker) free the messages before more come
  // (agent_runner::resume).
  if (st.activation_delivered_bytes >= tuning::agent_yield_after_bytes
      && st.driver.driving())
    st.driver.path().pause();
  return st.actors->on_frame(m, data, len, self_->context());
}

void actor_sink::refuse_actor_message(const protocol::ActorMessage& m,
                                      const caf::error& why) {
  self_->state.actors->refuse_frame(m, why, self_->context());
}

agent_core::sink::partial_actor_state actor_sink::partial_actor() const {
  auto& actors = self_->state.actors;
  if (!actors)
    return {};
  auto bytes = actors->partial_bytes();
  if (!bytes)
    return {};
  return {true, *bytes};
}

void actor_sink::drop_partial_actor(const caf::error& why) {
  if (auto& actors = self_->state.actors)
    actors->drop_partial(why, self_->context());
}

void actor_sink::actor_flow(bool flow, uint64_t window_messages,
                            uint64_t window_bytes) {
  self_->state.actors->start_flow(flow, window_messages, window_bytes);
}

caf::error actor_sink::take_actor_ack(uint64_t messages, uint64_t bytes) {
  return self_->state.actors->take_ack(messages, bytes);
}

actor_lookup_result actor_sink::find_actor(const std::string& name) {
  auto found = self_->state.actors->find(name);
  return actor_lookup_result{found.id, std::move(found.interface)};
}

void start_remote_actors(self_ptr self, actor_directory_ptr node_actors) {
  auto& st = self->state;
  st.actors = std::make_shared<remote_actors>(self->system(), st.core->opts(),
                                              st.core->link().peer,
                                              std::move(node_actors));
  // Serializations that will not fit one eager frame go to the agent in
  // registered memory (posted from there without another copy).
  size_t eager = st.core->link().max_message_len_bytes;
  size_t region_from = eager > protocol::actor_frame_overhead
                           ? eager - protocol::actor_frame_overhead + 1
                           : size_t{1};
  st.actors->set_agent(caf::actor_cast<caf::strong_actor_ptr>(self),
                       st.core->pool(), region_from);
}

caf::result<bool> publish_actor(self_ptr self, const std::string& name,
                                const caf::actor& actor) {
  auto res = self->state.actors->published().publish(name, actor);
  if (!res)
    return std::move(res.error());
  return *res;
}

caf::typed_response_promise<caf::actor>
lookup_actor(self_ptr self, const std::string& name,
             std::vector<std::string> expected_interface) {
  auto rp = self->make_response_promise<caf::actor>();
  auto expected = expected_interface;
  self->state.core->actors().lookup(
      name, std::move(expected_interface), self->clock().now(),
      [self, rp, name,
       expected](caf::expected<actor_lookup_result> res) mutable {
        if (!res) {
          rp.deliver(res.error());
          return;
        }
        if (res->id == 0) {
          rp.deliver(make_error(errc::unknown_actor,
                                "the peer " + self->state.core->link().peer
                                    + " has no actor published under '" + name
                                    + "'; publish it there first"));
          return;
        }
        if (!assignable(res->interface, expected)) {
          rp.deliver(make_error(errc::invalid_argument,
                                "the actor published under '" + name
                                    + "' does not have the expected "
                                      "interface (a typed handle needs a "
                                      "typed actor handling all of it)"));
          return;
        }
        auto proxy = self->state.actors->proxy_for(res->id);
        if (!proxy) {
          rp.deliver(peer_is_gone(self));
          return;
        }
        rp.deliver(std::move(proxy));
      });
  return rp;
}

void post_actor_messages(self_ptr self) {
  auto& st = self->state;
  auto& batch = st.actor_batch;
  st.actors->take_outbox(batch);
  auto& actors = st.core->actors();
  for (auto& m : batch.messages()) {
    // Fails only once the connection ended (the router then failed the
    // pending requests) or for a peer without remote actors (no proxy of
    // its actors exists then).
    auto err = m.region.valid() ? actors.post(m.target, m.sender, m.mid,
                                              std::move(m.region), m.down)
                                : actors.post(m.target, m.sender, m.mid,
                                              batch.data(m), m.len, m.down);
    if (err) {
      log().debug("agent {}: actor message not sent: {}", st.core->link().peer,
                  render(err));
      // Its credit returns, and a request fails now rather than at its
      // timeout.
      st.actors->not_posted(m.sender, m.mid, m.len, m.down, err);
    }
  }
  batch.clear();
}

} // namespace rdmactor::agent_detail
