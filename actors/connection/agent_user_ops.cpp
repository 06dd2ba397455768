// The agent: the operations users call on a connection, as response
// promises over the protocol core (actors/core/agent_core.hpp).

#include "actors/connection/agent_state.hpp"
#include "actors/node/remote_mr_access.hpp"

#include "common/logging.hpp"
#include "common/tuning.hpp"

namespace rdmactor::agent_detail {

namespace {

/// A completion for the core that answers `rp` with the value or the error.
template <class T>
auto deliver_to(caf::typed_response_promise<T> rp) {
  return [rp](caf::expected<T> x) mutable {
    if (x)
      rp.deliver(std::move(*x));
    else
      rp.deliver(std::move(x.error()));
  };
}

} // namespace

// -- user operations ----------------------------------------------------------

caf::typed_response_promise<remote_mr>
request_remote_mr(self_ptr self, uint64_t size, uint64_t align) {
  auto rp = self->make_response_promise<remote_mr>();
  auto asked = self->clock().now();
  self->state.core->regions().alloc_leased(
      size, align, asked,
      [self, rp, asked](caf::expected<mr_token> token,
                        uint32_t lease_ms) mutable {
        if (!token) {
          rp.deliver(token.error());
          return;
        }
        auto st = std::make_shared<remote_mr_state>(
            *token, caf::actor_cast<caf::actor_addr>(self));
        if (lease_ms != 0) {
          // Counted from when we asked: the lender's clock started later.
          auto end = asked
                     + std::chrono::milliseconds{
                         lease_ms - tuning::lease_margin_ms(lease_ms)};
          st->set_lease_end_ns(
              std::chrono::duration_cast<std::chrono::nanoseconds>(
                  end.time_since_epoch())
                  .count());
        }
        rp.deliver(remote_mr{std::move(st)});
      });
  return rp;
}

caf::result<local_mr> alloc_for_peer(self_ptr self, uint64_t size,
                                     uint64_t align) {
  auto& core = *self->state.core;
  auto claimed = self->state.claimed;
  const auto limit = core.opts().peer_max_claim_bytes;
  // A bad layout keeps its own error (invalid_layout, size_limit).
  if (auto err = core.pool()->check_layout(size, align))
    return err;
  // Only this actor adds to the count (release actions subtract, on any
  // thread), so a check before the addition cannot let it pass the limit.
  const auto held = claimed->load();
  if (held > limit || size > limit - held)
    return make_error(errc::quota_exceeded,
                      "reading what the peer " + core.link().peer
                          + " lends would hold " + std::to_string(held) + " + "
                          + std::to_string(size)
                          + " bytes for it, over peer-max-claim-bytes="
                          + std::to_string(limit)
                          + "; release earlier regions, read in pieces, or "
                            "raise the option");
  *claimed += size;
  auto inner = core.pool()->allocate(size, align, transport::access::all);
  if (!inner) {
    *claimed -= size;
    return std::move(inner.error());
  }
  // The region first, then the count: once the count reads 0 the memory is
  // back in the pool.
  auto mr = std::move(*inner);
  auto block
      = std::make_shared<mr_block>(mr.data(), mr.size(), mr.lkey(), mr.rkey(),
                                   [mr, claimed, size]() mutable {
                                     mr = local_mr{};
                                     *claimed -= size;
                                   });
  return local_mr{std::move(block)};
}

caf::typed_response_promise<mr_token> send_local_mr(self_ptr self,
                                                    local_mr mr) {
  return send_local_mr(self, std::move(mr), 0);
}

caf::typed_response_promise<mr_token> send_local_mr(self_ptr self, local_mr mr,
                                                    uint64_t tag) {
  return send_local_mr(self, std::move(mr), tag, 0);
}

caf::typed_response_promise<mr_token>
send_local_mr(self_ptr self, local_mr mr, uint64_t tag, uint32_t lease_ms) {
  auto rp = self->make_response_promise<mr_token>();
  self->state.core->regions().lend(std::move(mr), self->clock().now(),
                                   deliver_to(rp), tag, lease_ms);
  return rp;
}

caf::error check_remote(self_ptr self, const remote_mr& mr, remote_use use,
                        std::string_view what) {
  auto now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                 self->clock().now().time_since_epoch())
                 .count();
  return check_remote(mr, self->address(), now, use, what);
}

caf::result<uint32_t> renew_lease(self_ptr self, remote_mr mr,
                                  uint32_t lease_ms) {
  if (auto err = check_remote(self, mr, remote_use::renew, "renew_lease"))
    return err;
  if (lease_ms == 0)
    return make_error(errc::invalid_argument, "renew_lease: a renewal of 0 ms");
  auto rp = self->make_response_promise<uint32_t>();
  auto sent = self->clock().now();
  auto st = detail::state_of(mr);
  self->state.core->regions().renew_lease(
      st->token(), lease_ms, sent,
      [rp, st, sent](caf::expected<uint32_t> granted) mutable {
        if (!granted) {
          rp.deliver(granted.error());
          return;
        }
        // Counted from when we asked: the lender's clock started later.
        auto end = sent
                   + std::chrono::milliseconds{
                       *granted - tuning::lease_margin_ms(*granted)};
        st->set_lease_end_ns(
            std::chrono::duration_cast<std::chrono::nanoseconds>(
                end.time_since_epoch())
                .count());
        rp.deliver(*granted);
      });
  return rp;
}

caf::typed_response_promise<mr_token> send_remote_mr(self_ptr self,
                                                     remote_mr mr) {
  return send_remote_mr(self, std::move(mr), 0);
}

caf::typed_response_promise<mr_token>
send_remote_mr(self_ptr self, remote_mr mr, uint64_t tag) {
  auto rp = self->make_response_promise<mr_token>();
  if (auto err = check_remote(self, mr, remote_use::send_back, "send_mr")) {
    rp.deliver(std::move(err));
    return rp;
  }
  if (!detail::state_of(mr)->take()) {
    rp.deliver(make_error(errc::already_sent,
                          "this remote_mr was already released or sent"));
    return rp;
  }
  auto token = mr.token();
  self->state.core->regions().give_back(
      token, self->clock().now(),
      [rp, token](const caf::error& err) mutable {
        if (err)
          rp.deliver(err);
        else
          rp.deliver(token);
      },
      tag);
  return rp;
}

caf::typed_response_promise<uint64_t> release(self_ptr self, mr_token token,
                                              bool answer) {
  auto rp = self->make_response_promise<uint64_t>();
  std::function<void(const caf::error&)> done;
  if (answer)
    done = [rp, token](const caf::error& err) mutable {
      if (err)
        rp.deliver(err);
      else
        rp.deliver(token.len);
    };
  // Without `done` the core logs a failure.
  self->state.core->regions().release(token, self->clock().now(),
                                      std::move(done));
  return rp;
}

caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr) {
  auto rp = self->make_response_promise<uint64_t>();
  self->state.core->data().send(std::move(mr), self->clock().now(),
                                deliver_to(rp));
  return rp;
}

caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr,
                                                uint32_t imm) {
  auto rp = self->make_response_promise<uint64_t>();
  self->state.core->data().send(std::move(mr), self->clock().now(),
                                deliver_to(rp), imm);
  return rp;
}

caf::result<local_mr> alloc_local_mr(self_ptr self, uint64_t size,
                                     uint64_t align, uint32_t access) {
  if ((access & ~transport::access::all) != 0)
    return make_error(errc::invalid_argument,
                      "alloc_local_mr: unknown access bits "
                          + std::to_string(access)
                          + "; combine rdmactor::transport::access values");
  // The owner always writes its own memory (and receives READs into it).
  access |= transport::access::local_write;
  return self->delegate(self->state.allocator, alloc_atom::value, size, align,
                        access);
}

/// Checks a one-sided operation locally before anything is posted.
caf::error check_one_sided(self_ptr self, const char* what,
                           const local_mr& local, const remote_mr& remote) {
  if (!local.valid())
    return make_error(errc::invalid_argument,
                      std::string{what} + " needs a valid local_mr");
  if (auto err = check_remote(self, remote, remote_use::post, what))
    return err;
  if (local.size() != remote.size())
    return make_error(errc::length_mismatch,
                      std::string{what} + " of " + std::to_string(local.size())
                          + " local bytes to a remote range of "
                          + std::to_string(remote.size())
                          + " bytes; slice them to the same length");
  return {};
}

namespace {

/// The `start` of a WRITE or READ of `local` for run_one_sided and
/// start_one_sided: posts it on the agent's link.
auto post_one_sided(self_ptr self, transport::op_kind kind, local_mr& local,
                    const mr_token& token) {
  return [self, kind, &local, token](auto finish) {
    submit_op(self, kind, std::move(local), token, std::nullopt,
              finish_with(finish));
  };
}

} // namespace

/// Posts a WRITE or READ on the agent's link and keeps `remote` alive
/// until it completes: a user may drop its `remote_mr` right after the
/// call, and the ReleaseMR that its last handle sends must not overtake the
/// operation (the peer would reuse the memory while we still access it).
/// The link answers every operation, or the drain fails it when the
/// connection goes, so the request needs no timeout of its own; the user's
/// request has one.
caf::result<uint64_t> one_sided(self_ptr self, transport::op_kind kind,
                                const char* what, local_mr local,
                                remote_mr remote) {
  if (auto err = check_one_sided(self, what, local, remote))
    return err;
  auto token = remote.token();
  return run_one_sided(self, std::move(remote),
                       post_one_sided(self, kind, local, token));
}

void one_sided_for_handler(self_ptr self, transport::op_kind kind,
                           const char* what, local_mr local, remote_mr remote,
                           std::function<void(caf::expected<uint64_t>)> done) {
  auto& st = self->state;
  if (auto err = check_one_sided(self, what, local, remote)) {
    done(std::move(err));
    return;
  }
  if (st.core->closed()) {
    done(peer_is_gone(self));
    return;
  }
  auto token = remote.token();
  start_one_sided(self, one_sided_waiter{{}, std::move(done)},
                  std::move(remote), post_one_sided(self, kind, local, token));
}

void unsubscribe(self_ptr self) {
  auto& st = self->state;
  detach_handler(self, caf::error{});
  if (st.subscriber)
    self->demonitor(st.subscriber.address());
  if (st.chunk_sub)
    self->demonitor(st.chunk_sub.address());
  st.subscriber = data_subscriber{};
  st.chunk_sub = chunk_subscriber{};
}

/// Sets (or, with an invalid handle, ends) the data subscription; hands
/// the queued chunks over first.  Returns how many.
uint64_t subscribe_data(self_ptr self, data_subscriber sub) {
  auto& st = self->state;
  unsubscribe(self);
  st.subscriber = std::move(sub);
  if (!st.subscriber)
    return 0;
  self->monitor(st.subscriber);
  auto queued = st.data.take_all();
  st.data.fail_all(make_error(errc::invalid_argument,
                              "a data subscriber took over the data of "
                              "this connection (subscribe_data)"));
  for (auto& chunk : queued)
    self->send(st.subscriber, data_atom::value, std::move(chunk));
  return queued.size();
}

uint64_t subscribe_chunks(self_ptr self, chunk_subscriber sub) {
  auto& st = self->state;
  unsubscribe(self);
  st.chunk_sub = std::move(sub);
  if (!st.chunk_sub)
    return 0;
  self->monitor(st.chunk_sub);
  auto chunks = st.data.take_all();
  auto imms = st.imms.take_all();
  auto taken = make_error(errc::invalid_argument,
                          "a chunk subscriber took over the data of this "
                          "connection (subscribe_data)");
  st.data.fail_all(taken);
  st.imms.fail_all(taken);
  auto conn = self->id();
  for (auto& chunk : chunks)
    self->send(st.chunk_sub, data_atom::value, conn, std::move(chunk));
  for (auto& x : imms) {
    if (x.chunk.valid())
      self->send(st.chunk_sub, imm_atom::value, x.imm, conn,
                 std::move(x.chunk));
    else
      self->send(st.chunk_sub, imm_atom::value, x.imm, conn, x.bytes);
  }
  return chunks.size() + imms.size();
}

caf::result<uint64_t> write_with_imm(self_ptr self, local_mr src, remote_mr dst,
                                     uint32_t imm) {
  if (auto err = check_one_sided(self, "write_with_imm", src, dst))
    return err;
  auto token = dst.token();
  return run_one_sided(self, std::move(dst), [&](auto finish) {
    self->state.core->when_offered(
        protocol::EXT_IMMEDIATE_DATA, "write_with_imm", self->clock().now(),
        [self, finish, src = std::move(src), token,
         imm](const caf::error& err) mutable {
          if (err) {
            finish(err);
            return;
          }
          submit_op(self, transport::op_kind::write, std::move(src), token, imm,
                    finish_with(finish));
        });
  });
}

caf::result<uint64_t> write_to_peer(self_ptr self, local_mr src,
                                    remote_mr dst) {
  return one_sided(self, transport::op_kind::write, "write", std::move(src),
                   std::move(dst));
}

caf::result<uint64_t> read_from_peer(self_ptr self, local_mr dst,
                                     remote_mr src) {
  return one_sided(self, transport::op_kind::read, "read", std::move(dst),
                   std::move(src));
}

} // namespace rdmactor::agent_detail
