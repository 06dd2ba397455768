// The agent's inline data handler (include/rdmactor/data_handler.hpp): the
// chunks of one poll go to a user's handler inside the agent's activation,
// after the core read the frames, and what the handler sends leaves in the
// same activation with the acknowledgements of those frames.

#include <exception>
#include <optional>
#include <string>

#include "actors/connection/agent_state.hpp"
#include "common/logging.hpp"

namespace rdmactor::agent_detail {

namespace {

/// Runs the user's `f`; returns what it threw, if anything.
template <class F>
std::optional<std::string> caught(F&& f) noexcept {
  try {
    f();
    return std::nullopt;
  } catch (const std::exception& e) {
    return std::string{e.what()};
  } catch (...) {
    return std::string{"an exception that is not a std::exception"};
  }
}

/// `done` for the core, or the link: an exception from the user's callback
/// must not unwind into them.  Empty: nothing to call.
std::function<void(caf::expected<uint64_t>)>
guarded(data_context::op_done done) {
  if (!done)
    return [](caf::expected<uint64_t>) {};
  return [done = std::move(done)](caf::expected<uint64_t> result) {
    if (auto what = caught([&] { done(std::move(result)); }))
      log().error("a data handler's operation callback threw: {}", *what);
  };
}

/// Detaches the handler after an exception from it.
void handler_threw(self_ptr self, const std::string& what) {
  auto err
      = make_error(errc::handler_failed,
                   "the data handler of the connection to "
                       + self->state.core->link().peer + " threw: " + what);
  log().warn("{}; detached, data queues for receive_data", render(err));
  detach_handler(self, err);
}

/// Calls `on_attach`; false when it threw (the handler is detached then).
bool attach(self_ptr self) {
  auto& st = self->state;
  auto what = caught([&] { st.handler->on_attach(st.handler_ctx); });
  if (what)
    handler_threw(self, *what);
  return !what;
}

/// Hands `chunks` to the handler in order.  When it throws, it is detached
/// and the chunks after the one it failed on queue for receive_data.
template <class Chunks>
void hand_over(self_ptr self, Chunks& chunks) {
  auto& st = self->state;
  auto i = chunks.begin();
  auto what = caught([&] {
    for (; i != chunks.end(); ++i)
      st.handler->on_data(st.handler_ctx, std::move(*i));
  });
  if (!what)
    return;
  handler_threw(self, *what);
  for (++i; i != chunks.end(); ++i)
    st.data.put(std::move(*i));
}

} // namespace

// -- handler_context ----------------------------------------------------------

void handler_context::send_data(local_mr chunk, op_done done) {
  // The stream catches what `done` throws (no wrapper: no allocation).
  self_->state.core->data().send(std::move(chunk), self_->clock().now(),
                                 std::move(done));
}

void handler_context::write(local_mr src, remote_mr dst, op_done done) {
  one_sided_for_handler(self_, transport::op_kind::write, "write",
                        std::move(src), std::move(dst),
                        guarded(std::move(done)));
}

void handler_context::read(local_mr dst, remote_mr src, op_done done) {
  one_sided_for_handler(self_, transport::op_kind::read, "read", std::move(dst),
                        std::move(src), guarded(std::move(done)));
}

uint64_t handler_context::connection() const noexcept {
  return self_->id();
}

// -- subscription -------------------------------------------------------------

uint64_t subscribe_handler(self_ptr self, data_handler_ptr handler) {
  auto& st = self->state;
  unsubscribe(self);
  if (!handler)
    return 0;
  st.handler = std::move(handler);
  auto queued = st.data.take_all();
  st.data.fail_all(make_error(errc::invalid_argument,
                              "a data handler took over the data of this "
                              "connection (subscribe_data)"));
  if (!attach(self)) {
    for (auto& chunk : queued)
      st.data.put(std::move(chunk));
    return 0;
  }
  hand_over(self, queued);
  return queued.size();
}

void notify_detach(data_handler_ptr handler,
                   const caf::error& reason) noexcept {
  if (auto what = caught([&] { handler->on_detach(reason); }))
    log().error("a data handler's on_detach threw: {}", *what);
}

void detach_handler(self_ptr self, const caf::error& reason) {
  auto& st = self->state;
  if (!st.handler)
    return;
  auto handler = std::move(st.handler);
  st.handler = nullptr;
  for (auto& chunk : st.handler_chunks)
    st.data.put(std::move(chunk));
  st.handler_chunks.clear();
  notify_detach(std::move(handler), reason);
}

void run_data_handler(self_ptr self) {
  auto& st = self->state;
  // Only deliver_data fills the batch, and only while a handler is set;
  // detach_handler empties it.
  if (st.handler_chunks.empty())
    return;
  // The handler's sends cannot poll (posts only), so no chunk joins the
  // batch while it runs; the vector keeps its capacity across polls.
  std::vector<local_mr> batch;
  batch.swap(st.handler_chunks);
  hand_over(self, batch);
  batch.clear();
  if (st.handler_chunks.empty())
    st.handler_chunks.swap(batch);
}

} // namespace rdmactor::agent_detail
