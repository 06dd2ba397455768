// The agent's inline data handler (include/rdmactor/data_handler.hpp): the
// chunks of one poll go to a user's handler inside the agent's activation,
// after the core read the frames, and what the handler sends leaves in the
// same activation with the acknowledgements of those frames.

#include <exception>

#include "actors/agent_state.hpp"
#include "common/logging.hpp"

namespace rdmactor::agent_detail {

namespace {

/// The context a handler gets: sends go straight to the core.
class handler_context final : public data_context {
public:
  explicit handler_context(self_ptr self) : self_(self) {}

  void send_data(local_mr chunk, send_done done) override {
    std::function<void(caf::expected<uint64_t>)> fn;
    if (done) {
      // Called later from the core: an exception must not unwind into it.
      fn = [done = std::move(done)](caf::expected<uint64_t> result) {
        try {
          done(std::move(result));
        } catch (const std::exception& e) {
          log().error("a data handler's send_data callback threw: {}",
                      e.what());
        } catch (...) {
          log().error("a data handler's send_data callback threw");
        }
      };
    } else {
      fn = [](caf::expected<uint64_t>) {};
    }
    self_->state.core->send_data(std::move(chunk), self_->clock().now(),
                                 std::move(fn));
  }

  uint64_t connection() const noexcept override {
    return self_->id();
  }

private:
  self_ptr self_;
};

/// Calls `on_detach(reason)`, which must not unwind into the agent.
void notify_detach(const data_handler_ptr& handler, const caf::error& reason) {
  try {
    handler->on_detach(reason);
  } catch (const std::exception& e) {
    log().error("a data handler's on_detach threw: {}", e.what());
  } catch (...) {
    log().error("a data handler's on_detach threw");
  }
}

/// Hands `chunks` to the handler in order.  When it throws, it is detached
/// and the chunks after the one it failed on queue for receive_data.
template <class Chunks>
void hand_over(self_ptr self, Chunks& chunks) {
  auto& st = self->state;
  handler_context ctx{self};
  auto i = chunks.begin();
  std::string what;
  try {
    for (; i != chunks.end(); ++i)
      st.handler->on_data(ctx, std::move(*i));
    return;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
    what = "an exception that is not a std::exception";
  }
  auto err = make_error(errc::handler_failed,
                        "the data handler of the connection to "
                            + st.core->link().peer + " threw: " + what);
  log().warn("{}; detached, data queues for receive_data", render(err));
  detach_handler(self, err);
  for (++i; i != chunks.end(); ++i)
    put(self, st.data, std::move(*i));
}

} // namespace

uint64_t subscribe_handler(self_ptr self, data_handler_ptr handler) {
  auto& st = self->state;
  if (handler == st.handler)
    return 0; // already set: nothing queued for it
  unsubscribe(self);
  if (!handler)
    return 0;
  st.handler = std::move(handler);
  auto queued = std::move(st.data.items);
  fail_all(st.data, make_error(errc::invalid_argument,
                               "a data handler took over the data of this "
                               "connection (subscribe_data)"));
  hand_over(self, queued);
  return queued.size();
}

void detach_handler(self_ptr self, const caf::error& reason) {
  auto& st = self->state;
  if (!st.handler)
    return;
  auto handler = std::move(st.handler);
  st.handler = nullptr;
  for (auto& chunk : st.handler_chunks)
    put(self, st.data, std::move(chunk));
  st.handler_chunks.clear();
  notify_detach(handler, reason);
}

void run_data_handler(self_ptr self) {
  auto& st = self->state;
  if (st.handler_chunks.empty())
    return;
  if (!st.handler) {
    for (auto& chunk : st.handler_chunks)
      put(self, st.data, std::move(chunk));
    st.handler_chunks.clear();
    return;
  }
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
