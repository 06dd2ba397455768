#pragma once

// The fixtures of the rendezvous suites of agent_core_test: rendezvous,
// actor_rendezvous and partial_work.

#include <string>
#include <utility>
#include <vector>

#include "test/actors/core/agent_core_fixture.hpp"

/// The fixture with room for rendezvous pieces: this node offers them
/// (eager 4 KiB below a 64 KiB max message length, the defaults).
struct rendezvous_fixture : fixture {
  rendezvous_fixture() {
    opts.peer_max_queued_bytes = 1 << 20;
    make_core();
  }

  pb::Message rendezvous(uint64_t id, uint64_t addr, uint64_t len) {
    return pb::make_send_data_rendezvous(id, pb::make_token(addr, len, 9));
  }

  /// The SendDataResponses posted so far: id and status, in order.
  std::vector<std::pair<uint64_t, pb::Status>> answers() {
    std::vector<std::pair<uint64_t, pb::Status>> result;
    for (auto& f : out.posted)
      if (f.msg.has_response() && f.msg.response().has_send_data())
        result.emplace_back(f.msg.response().request_id(),
                            pb::status_of(f.msg.response()));
    return result;
  }
};

/// The rendezvous fixture with remote actors on (this node offers
/// EXT_ACTOR_RENDEZVOUS).
struct actor_rendezvous_fixture : rendezvous_fixture {
  actor_rendezvous_fixture() {
    opts.remote_actors = true;
    make_core();
  }

  /// The peer's Hello offering remote actors and, with `rendezvous`,
  /// rendezvous actor messages.
  void peer_hello(bool rendezvous) {
    auto h = hello(pb::protocol_version, false);
    uint32_t ext = pb::EXT_REMOTE_ACTORS | pb::EXT_RENDEZVOUS;
    if (rendezvous)
      ext |= pb::EXT_ACTOR_RENDEZVOUS;
    h.mutable_hello()->set_extensions(ext);
    h.mutable_hello()->set_max_rendezvous_bytes(65536);
    receive(h);
  }

  /// The peer's rendezvous actor message `id` for target 5: `len` bytes
  /// at `addr`, the token naming `token_len` bytes.
  pb::Message actor_rendezvous(uint64_t id, uint64_t addr, uint64_t len,
                               uint64_t token_len) {
    pb::Message msg;
    auto* req = msg.mutable_request();
    req->set_request_id(id);
    auto* m = req->mutable_actor_message();
    m->set_target(5);
    m->set_sender(6);
    m->set_message_id(7);
    m->set_len(len);
    *m->mutable_source() = pb::make_token(addr, token_len, 9);
    return msg;
  }

  /// An eager actor message for target 5 carrying `bytes`.
  pb::Message actor_eager(size_t len) {
    pb::Message msg;
    auto* m = msg.mutable_actor_message();
    m->set_target(5);
    m->set_sender(6);
    m->set_len(len);
    return msg;
  }
};
