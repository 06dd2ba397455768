// The agent: the operations users call on a connection.

#include "actors/agent_state.hpp"

#include "common/logging.hpp"

namespace rdmactor::agent_detail {

// -- user operations
// -----------------------------------------------------------

caf::typed_response_promise<remote_mr>
request_remote_mr(self_ptr self, uint64_t size, uint64_t align) {
  auto rp = self->make_response_promise<remote_mr>();
  auto id = new_request_id(self);
  send_request(
      self, pb::make_alloc_mr(id, size, align), local_mr{},
      [self, rp, id](const pb::Response* res, const caf::error& err) mutable {
        if (err) {
          auto& late = self->state.late_allocs;
          if (code_of(err) == errc::request_timeout) {
            late.push_back(id);
            if (late.size() > tuning::max_late_allocs)
              late.pop_front();
          }
          rp.deliver(err);
          return;
        }
        if (auto e = check_response(*res, pb::Response::kAllocMr, "AllocMR")) {
          rp.deliver(e);
          return;
        }
        auto token = to_token(res->alloc_mr().token());
        auto st = std::make_shared<remote_mr_state>(
            token, caf::actor_cast<caf::actor_addr>(self));
        rp.deliver(remote_mr{std::move(st)});
      });
  return rp;
}

caf::typed_response_promise<mr_token> send_local_mr(self_ptr self,
                                                    local_mr mr) {
  auto rp = self->make_response_promise<mr_token>();
  auto& st = self->state;
  if (!mr.valid()) {
    rp.deliver(make_error(errc::invalid_argument, "empty local_mr"));
    return rp;
  }
  auto token = mr.token();
  if (st.owned.count(token) != 0) {
    rp.deliver(make_error(errc::already_sent,
                          "this memory region was already sent to the peer "
                          "and not released yet"));
    return rp;
  }
  st.owned.emplace(token, owned_mr{mr, false});
  auto id = new_request_id(self);
  send_request(self, pb::make_send_mr(id, pb::SendMR::LOCAL, to_pb(token)),
               local_mr{},
               [self, rp, token](const pb::Response* res,
                                 const caf::error& err) mutable {
                 auto e = err ? err
                              : check_response(*res, pb::Response::kSendMr,
                                               "SendMR LOCAL");
                 if (!e) {
                   rp.deliver(token);
                   return;
                 }
                 // Not lent: unless the connection is going (then shut_down
                 // holds the memory until the queue pair is closed).
                 if (!self->state.down)
                   self->state.owned.erase(token);
                 rp.deliver(e);
               });
  return rp;
}

caf::typed_response_promise<mr_token> send_remote_mr(self_ptr self,
                                                     remote_mr mr) {
  auto rp = self->make_response_promise<mr_token>();
  if (!mr.valid() || mr.state()->agent() != self->address()) {
    rp.deliver(make_error(errc::invalid_argument,
                          "this remote_mr belongs to another connection"));
    return rp;
  }
  if (!mr.whole()) {
    rp.deliver(make_error(errc::invalid_argument,
                          "send the whole remote_mr back, not a slice"));
    return rp;
  }
  if (!mr.state()->take()) {
    rp.deliver(make_error(errc::already_sent,
                          "this remote_mr was already released or sent"));
    return rp;
  }
  auto token = mr.token();
  auto id = new_request_id(self);
  send_request(
      self, pb::make_send_mr(id, pb::SendMR::REMOTE, to_pb(token)), local_mr{},
      [rp, token](const pb::Response* res, const caf::error& err) mutable {
        auto e = err ? err
                     : check_response(*res, pb::Response::kSendMr,
                                      "SendMR REMOTE");
        if (e)
          rp.deliver(e);
        else
          rp.deliver(token);
      });
  return rp;
}

caf::typed_response_promise<uint64_t> release(self_ptr self, mr_token token,
                                              bool answer) {
  auto rp = self->make_response_promise<uint64_t>();
  auto id = new_request_id(self);
  send_request(self, pb::make_release_mr(id, to_pb(token)), local_mr{},
               [self, rp, token, answer](const pb::Response* res,
                                         const caf::error& err) mutable {
                 caf::error e = err;
                 if (!e)
                   e = check_response(*res, pb::Response::kReleaseMr,
                                      "ReleaseMR");
                 if (e && !answer && code_of(e) != errc::peer_gone
                     && code_of(e) != errc::closed)
                   log().warn("agent {}: ReleaseMR failed: {}",
                              self->state.link.peer, render(e));
                 if (!answer)
                   return;
                 if (e)
                   rp.deliver(e);
                 else
                   rp.deliver(token.len);
               });
  return rp;
}

/// Issues the next chunks of `job` while fewer than its window are in
/// flight.  Each chunk's request timer starts when the chunk is issued, so
/// a long transfer never times out for chunks that merely waited here.
void pump(self_ptr self, const std::shared_ptr<send_data_job>& job) {
  while (!job->failed && job->outstanding < job->window
         && (job->offset < job->mr.size() || job->chunks == 0)) {
    auto len = std::min(job->chunk_max, job->mr.size() - job->offset);
    auto chunk = job->mr.slice(job->offset, len);
    job->offset += len;
    ++job->chunks;
    ++job->outstanding;
    auto id = new_request_id(self);
    send_request(
        self, pb::make_send_data(id, len), std::move(*chunk),
        [self, job, len](const pb::Response* res, const caf::error& err) {
          --job->outstanding;
          if (job->failed)
            return;
          caf::error e = err;
          if (!e)
            e = check_response(*res, pb::Response::kSendData, "SendData");
          if (e) {
            job->failed = true;
            job->rp.deliver(e);
            return;
          }
          job->bytes += len;
          if (job->outstanding == 0 && job->offset >= job->mr.size()) {
            job->rp.deliver(job->bytes);
            return;
          }
          pump(self, job);
        });
  }
}

caf::typed_response_promise<uint64_t> send_data(self_ptr self, local_mr mr) {
  auto rp = self->make_response_promise<uint64_t>();
  auto& st = self->state;
  if (!mr.valid()) {
    rp.deliver(
        make_error(errc::invalid_argument, "send_data needs a valid local_mr"));
    return rp;
  }
  auto job = std::make_shared<send_data_job>();
  job->rp = rp;
  job->mr = std::move(mr);
  job->chunk_max
      = size_t{st.link.max_message_len_bytes} - pb::max_frame_overhead;
  job->window = tuning::send_data_window(st.link.recv_depth);
  pump(self, job);
  return rp;
}

/// Checks a one-sided operation locally before anything is posted.
caf::error check_one_sided(self_ptr self, const char* what,
                           const local_mr& local, const remote_mr& remote) {
  if (!local.valid() || !remote.valid())
    return make_error(errc::invalid_argument,
                      std::string{what} + " needs a valid local_mr and "
                          + "remote_mr");
  if (remote.state()->agent() != self->address())
    return make_error(errc::invalid_argument,
                      std::string{what}
                          + ": the remote_mr belongs to another connection");
  if (remote.state()->done())
    return make_error(errc::invalid_argument,
                      std::string{what}
                          + ": the remote_mr was released or sent back");
  if (local.size() != remote.size())
    return make_error(errc::length_mismatch,
                      std::string{what} + " of " + std::to_string(local.size())
                          + " local bytes to a remote range of "
                          + std::to_string(remote.size())
                          + " bytes; slice them to the same length");
  return {};
}

/// Posts a WRITE or READ and keeps `remote` alive until the transport
/// answers: a user may drop its `remote_mr` right after the call, and the
/// ReleaseMR that its last handle sends must not overtake the operation
/// (the peer would reuse the memory while we still access it).  The
/// transport answers every operation, or fails it when the connection
/// goes, so the request needs no timeout of its own; the user's request
/// has one.
template <class Atom>
caf::result<uint64_t> one_sided(self_ptr self, Atom a, const char* what,
                                local_mr local, remote_mr remote) {
  if (auto err = check_one_sided(self, what, local, remote))
    return err;
  auto& st = self->state;
  if (st.down)
    return make_error(errc::peer_gone, "the peer " + st.link.peer + " is gone");
  auto rp = self->make_response_promise<uint64_t>();
  auto id = st.next_one_sided++;
  st.one_sided.emplace(id, rp);
  auto finish = [self, id, remote](auto&& result) mutable {
    auto i = self->state.one_sided.find(id);
    if (i == self->state.one_sided.end())
      return;
    i->second.deliver(std::forward<decltype(result)>(result));
    self->state.one_sided.erase(i);
  };
  self->request(st.transport, caf::infinite, a, std::move(local),
                remote.token())
      .then([finish](uint64_t n) mutable { finish(n); },
            [finish](caf::error& err) mutable { finish(err); });
  return rp;
}

/// Sets (or, with an invalid handle, ends) the data subscription; hands
/// the queued chunks over first.  Returns how many.
uint64_t subscribe_data(self_ptr self, data_subscriber sub) {
  auto& st = self->state;
  if (st.subscriber)
    self->demonitor(st.subscriber.address());
  st.subscriber = std::move(sub);
  if (!st.subscriber)
    return 0;
  self->monitor(st.subscriber);
  auto queued = std::move(st.data.items);
  fail_all(st.data, make_error(errc::invalid_argument,
                               "a data subscriber took over the data of "
                               "this connection (subscribe_data)"));
  for (auto& chunk : queued)
    self->send(st.subscriber, data_atom::value, std::move(chunk));
  return queued.size();
}

caf::result<uint64_t> write_to_peer(self_ptr self, local_mr src,
                                    remote_mr dst) {
  return one_sided(self, write_atom::value, "write", std::move(src),
                   std::move(dst));
}

caf::result<uint64_t> read_from_peer(self_ptr self, local_mr dst,
                                     remote_mr src) {
  return one_sided(self, read_atom::value, "read", std::move(dst),
                   std::move(src));
}

} // namespace rdmactor::agent_detail
