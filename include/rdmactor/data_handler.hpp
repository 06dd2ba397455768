#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <caf/fwd.hpp>

#include "rdmactor/local_mr.hpp"
#include "rdmactor/remote_mr.hpp"

namespace rdmactor {

/// What a data handler may do on its connection without a message to the
/// connection actor.
///
/// Handed to `on_attach` and to every `on_data`; the same object for the
/// handler's whole subscription, valid until `on_detach` is called (not
/// inside it).  Call it only from the handler's calls and from the `done`
/// callbacks of its operations (the connection's agent, on its worker):
/// never from another thread.
class data_context {
public:
  virtual ~data_context() = default;

  /// What an operation's `done` gets: the bytes moved (send_data: once the
  /// peer acknowledged every chunk), or why it failed.  Called once, later,
  /// by the agent inside one of its activations (on a CAF worker), within
  /// request-timeout-ms or with the close error when the connection ends
  /// first; at once, before the call returns, when the operation fails
  /// before anything is posted (invalid arguments, a closed connection):
  /// do not retry from `done` on such an error.  An exception from it is
  /// logged and dropped.  May be empty.
  using op_done = std::function<void(caf::expected<uint64_t>)>;

  /// Sends `chunk` to the peer, as `(send_data_atom, local_mr)` on the
  /// connection does (chunked by the max message length, the same errors),
  /// but from inside the agent's activation: an echo or a reply leaves in
  /// the activation that delivered the data and carries the peer's
  /// acknowledgements.
  virtual void send_data(local_mr chunk, op_done done = {}) = 0;

  /// RDMA WRITE of `src` into the peer's `dst`, as `(write_atom, local_mr,
  /// remote_mr)` does (the same checks and errors), posted from inside the
  /// agent's activation.
  virtual void write(local_mr src, remote_mr dst, op_done done) = 0;

  /// RDMA READ of the peer's `src` into `dst`, as `(read_atom, local_mr,
  /// remote_mr)` does, posted from inside the agent's activation: a loop
  /// of READs issued from `done` runs without a message per operation.
  virtual void read(local_mr dst, remote_mr src, op_done done) = 0;

  /// The connection's actor id (`conn->id()` of its handle), as a
  /// chunk_subscriber's `conn`.
  virtual uint64_t connection() const noexcept = 0;
};

/// Takes the data a peer sends inside the activation of the connection's
/// agent: no message per chunk and no hop to a user actor, the cheapest
/// way to serve a stream or answer each message (an echo, an RPC reply).
/// Set with `(subscribe_data_atom, data_handler_ptr) -> chunks` on a
/// connection; it then plays the role of a data_subscriber (and replaces
/// any subscriber): `receive_data` is refused while it is set, and
/// immediate values still queue for `receive_imm`.  A null pointer ends
/// the subscription (data queues for `receive_data` again).
///
/// Threads: every call comes from the connection's agent, on the CAF
/// worker that runs its activation, one at a time.  A handler that serves
/// several connections is called from several workers at once and must
/// guard state shared between them.  The agent keeps the handler alive
/// (a shared_ptr) until `on_detach`.
class data_handler {
public:
  virtual ~data_handler() = default;

  /// Called by the agent once, when the subscription is set (before the
  /// queued chunks are handed over): the place to start operations of
  /// its own, e.g. a loop of READs.  `ctx` stays valid until `on_detach`.
  /// An exception detaches the handler as one from `on_data` does.
  virtual void on_attach(data_context& ctx) {
    static_cast<void>(ctx);
  }

  /// Called by the agent once per chunk, in arrival order, after it read
  /// the frames of one poll of its completion queue (so that a
  /// `ctx.send_data` from here carries their acknowledgements).  Queued
  /// chunks are handed over when the handler is set.  Must return soon
  /// and never block: the connection does nothing else meanwhile.  The
  /// chunk is the handler's: keep it, send it on, or drop it (its receive
  /// buffer returns to the connection when the last handle goes).  An
  /// exception ends the subscription: `on_detach` gets
  /// `errc::handler_failed`, and later chunks queue for `receive_data`.
  virtual void on_data(data_context& ctx, local_mr chunk) = 0;

  /// Called by the agent once, when the handler gets no more data:
  /// replaced by another subscription or a null pointer (`reason` empty),
  /// after an exception from `on_data` (`errc::handler_failed`), or when
  /// the connection ends (its end reason, as in the connection's down
  /// message).  `done` callbacks of operations still in flight run after
  /// it, with their results.
  virtual void on_detach(const caf::error& reason) {
    static_cast<void>(reason);
  }
};

/// The handle a connection takes in `(subscribe_data_atom, ...)`.
using data_handler_ptr = std::shared_ptr<data_handler>;

namespace detail {

template <class F>
class function_data_handler final : public data_handler {
public:
  explicit function_data_handler(F f) : f_(std::move(f)) {}

  void on_data(data_context& ctx, local_mr chunk) override {
    f_(ctx, std::move(chunk));
  }

private:
  F f_;
};

} // namespace detail

/// Makes a data handler of `f`, a callable `void(data_context&, local_mr)`
/// (called as `data_handler::on_data`; `on_detach` does nothing):
///
///     auto echo = rdmactor::make_data_handler(
///         [](rdmactor::data_context& ctx, rdmactor::local_mr chunk) {
///           ctx.send_data(std::move(chunk));
///         });
///     self->request(conn, 5s, subscribe_data_atom::value, echo);
template <class F>
data_handler_ptr make_data_handler(F f) {
  static_assert(std::is_invocable_v<F&, data_context&, local_mr>,
                "make_data_handler takes a void(data_context&, local_mr)");
  return std::make_shared<detail::function_data_handler<F>>(std::move(f));
}

} // namespace rdmactor

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(rdmactor::data_handler_ptr)
