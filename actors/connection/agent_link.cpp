// The agent drives its connection's link (scheduling/link_driver.hpp): it
// posts from its own activations and polls its CQ itself, so frames reach
// the core without a message from a transport actor, and posts leave
// without one to it.
#include "actors/connection/agent_state.hpp"

namespace rdmactor::agent_detail {

// -- link_events --------------------------------------------------------------

void link_events::on_done(uint64_t cookie, caf::expected<uint64_t> result) {
  auto& st = self_->state;
  auto fn = st.ops.take(cookie);
  if (!fn)
    return;
  // The link is going down: the fabric may still place data until the
  // transport has closed the queue pair.  The operations of users are
  // failed by the drain once it has (drain_one_sided); the agent's own
  // READs end with it.
  if (!result && st.driver.down())
    return;
  fn(std::move(result));
}

namespace {

/// Whether what the peer sends still reaches the core: not once the link
/// failed, the core closed or the peer said Goodbye.
bool takes_frames(const agent_state& st) {
  return !st.link_failing && !st.core->closed()
         && !st.core->live().peer_said_goodbye();
}

} // namespace

void link_events::on_message(local_mr msg) {
  auto& st = self_->state;
  if (!takes_frames(st))
    return; // the buffer is reposted with `msg`
  auto now = self_->clock().now();
  st.core->on_frame(msg, now);
  st.frames_seen = true;
}

void link_events::on_imm(uint32_t imm, uint32_t bytes) {
  auto& st = self_->state;
  if (takes_frames(st))
    st.core->on_write_imm(imm, bytes, self_->clock().now());
}

void link_events::on_down(const caf::error& cause) {
  shut_down_later(self_, cause);
}

void shut_down_later(self_ptr self, const caf::error& cause) {
  auto& st = self->state;
  if (st.link_failing)
    return;
  st.link_failing = true;
  self->send(self, transport::qp_down_atom::value, cause);
}

// -- operations ---------------------------------------------------------------

namespace {

/// The error of an operation posted after the link went back to the
/// transport.
caf::error closed_link(self_ptr self) {
  return make_error(errc::closed, "the connection to "
                                      + self->state.core->link().peer
                                      + " is closing");
}

/// After a submit with a cookie: polling starts, or (event mode) the CQ's
/// arming is widened and polled once; frames that poll found are handled
/// by a `poll_atom` handler, outside the caller's handler.
void after_request(self_ptr self) {
  auto& st = self->state;
  st.driver.requested();
  if (st.frames_seen)
    self->send(self, transport::poll_atom::value);
}

} // namespace

namespace {

/// Registers `done` and calls `submit(cookie)` on the driven link, or
/// answers `done` with `closed` once the link went back to the transport.
template <class Submit>
void submit_waited(self_ptr self, op_done done, Submit submit) {
  auto& st = self->state;
  if (!st.driver.driving()) {
    done(closed_link(self));
    return;
  }
  submit(st.driver.path(), st.ops.add(std::move(done)));
  after_request(self);
}

} // namespace

void submit_op(self_ptr self, transport::op_kind kind, local_mr local,
               const mr_token& remote, std::optional<uint32_t> imm,
               op_done done) {
  submit_waited(self, std::move(done),
                [&](transport::link& path, uint64_t cookie) {
                  path.submit(kind, {}, std::move(local), remote, cookie, imm);
                });
}

void submit_atomic_op(self_ptr self, transport::op_kind kind,
                      const mr_token& word, uint64_t compare_add, uint64_t swap,
                      op_done done) {
  submit_waited(self, std::move(done),
                [&](transport::link& path, uint64_t cookie) {
                  path.submit_atomic(kind, word, compare_add, swap, cookie);
                });
}

void after_poll(self_ptr self, bool in_handler) {
  auto& st = self->state;
  // Before any acknowledgement is flushed: what the handler sends carries
  // them.
  run_data_handler(self);
  if (!st.frames_seen)
    return;
  if (!in_handler && st.core->live().peer_said_goodbye()
      && !st.core->closed()) {
    // The shutdown quits: from the poll handler, where CAF cleans up.
    self->send(self, transport::poll_atom::value);
    return;
  }
  st.frames_seen = false;
  after_frame(self);
}

} // namespace rdmactor::agent_detail
