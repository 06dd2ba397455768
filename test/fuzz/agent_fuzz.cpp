// libFuzzer target for the agent's handling of everything a peer sends.
//
// One agent and its real transport actor run over a fake queue pair
// (fake_fabric.hpp) whose peer is the fuzzer.  CAF's test coordinator runs
// every actor on the fuzzer's thread and fires timers on demand, so one
// input is one deterministic run: no sockets, no sleeps.  The input is a
// program (agent_program.hpp): frames from the peer (raw bytes, or valid
// requests with fuzzed fields), answers to the agent's own requests, calls
// of the local user, timer expiries and a disconnect.
//
// Reset instead of respawn: what does not belong to one connection lives
// across inputs (the actor system, the fake device, the memory pool and the
// allocator actor); each input spawns a fresh transport and agent over a
// fresh queue pair, and an actor per user call.  Every input
// starts from the same state all the same: the pool holds the same empty
// arenas (rebuilt when an input grew it) filled with the same pattern, the
// device hands out the same keys, and the simulated clock starts at the
// same time with no timer pending.
//
// Besides crashes and sanitizer reports, these invariants are findings:
// - every frame the agent sends decodes, within the negotiated maximum;
// - every response answers a request the peer sent, at most once, with the
//   body of the request's kind; an accepted AllocMR hands out exactly the
//   size asked for, inside a registration with remote read and write;
// - the transport never posts memory that is not registered as needed;
// - the per-peer limits hold (agent_stats);
// - every user call is answered once the timers fired, with a value or an
//   error that carries an rdmactor code (CAF's own errors only when the
//   agent is gone: request_receiver_down);
// - when the peer is gone and the user dropped its handles, every byte
//   returns to the pool and every registration is gone.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <caf/send.hpp>

#include <google/protobuf/stubs/logging.h>

#include "common/logging.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/config.hpp"
#include "rdmactor/detail/agent.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/fuzz/agent_program.hpp"
#include "test/support/agent_world.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;
using namespace rdmactor::fuzz;
namespace pb = rdmactor::protocol;

namespace {

/// One run of a program against a fresh agent.
class session {
public:
  explicit session(world& w) : w_(w) {
    link_ = std::make_shared<fake_link>(
        w_.dev->registry, transport::conn_params{max_message_len, recv_depth});
    // Events, not polling: the test coordinator runs until no message is
    // left, and a polling transport always has its next poll queued.
    auto lent = transport::spawn_lending_transport(
        w_.sys, w_.dev, std::make_unique<fake_queue_pair>(link_),
        transport::polling{transport::completion_mode::event, 0});
    tr_ = lent.transport;
    agent_ = spawn_agent(
        w_.sys, std::move(lent),
        transport::link_params{max_message_len, recv_depth, "fuzzer"}, w_.pool,
        w_.allocator, opts_);
    settle();
  }

  void run(program_reader& in) {
    while (!in.done()) {
      auto code = static_cast<op>(in.u8() % static_cast<uint8_t>(op::count));
      if (tracing)
        std::fprintf(stderr, "op %d\n", static_cast<int>(code));
      step(code, in);
      settle();
    }
  }

  /// Checks what must hold once every timer fired, then tears the
  /// connection down, checks that nothing is left and resets the world.
  void finish() {
    fire_timers(0);
    require(book_->outstanding == 0, "a user call was never answered");
    call<agent_stats>(stats_atom::value);
    settle();
    if (book_->stats)
      check_limits(*book_->stats);
    require(link_->protection_errors == 0,
            "the transport posted memory not registered as needed");
    // The user lets go; then the connection closes.
    book_->locals.clear();
    book_->remotes.clear();
    settle();
    caf::anon_send_exit(agent_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(tr_, caf::exit_reason::user_shutdown);
    // The exits run first: a graceful close arms the transport's close
    // timeout, which fire_timers must find (with no timer pending before
    // the exits, it would return at once and leave the transport, its
    // link and the link's registrations alive).
    settle();
    fire_timers(0);
    book_->locals.clear();
    book_->remotes.clear();
    agent_ = nullptr;
    tr_ = nullptr;
    settle();
    w_.after_input();
  }

private:
  // -- running the actors ---------------------------------------------------

  /// Runs every actor until nothing moves; wakes the link's driver (the
  /// agent, or the transport once it took the link over) while its CQ
  /// holds completions (the fake CQ fd never signals).
  void settle() {
    uint64_t kicked_at = ~uint64_t{0};
    for (int round = 0; round < max_rounds; ++round) {
      w_.sched.run();
      collect();
      if (link_->has_completions() && tr_ && link_->polls != kicked_at) {
        kicked_at = link_->polls;
        if (agent_)
          caf::anon_send(caf::actor_cast<caf::actor>(agent_),
                         transport::cq_event_atom::value);
        caf::anon_send(tr_, transport::cq_event_atom::value);
        continue;
      }
      if (!w_.sched.has_job())
        return;
    }
    require(false, "the actors never became idle");
  }

  /// Fires `count` pending timers (0: all of them), settling after each.
  void fire_timers(unsigned count) {
    for (int i = 0; i < max_rounds; ++i) {
      if (count != 0 && static_cast<unsigned>(i) >= count)
        return;
      if (!w_.sched.trigger_timeout())
        return;
      if (tracing)
        std::fprintf(stderr, "timer fired at %lld ms\n",
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::milliseconds>(
                             w_.sched.clock().now().time_since_epoch())
                             .count()));
      settle();
    }
    require(count != 0, "timers keep rearming forever");
  }

  // -- what the agent sends -------------------------------------------------

  void collect() {
    auto sent = std::move(link_->sent);
    link_->sent.clear();
    for (auto& m : sent) {
      if (m.imm && (*m.imm & credit_only_bit)) {
        require(m.bytes.empty(), "a credit-only message carries bytes");
        continue;
      }
      // Several frames when the agent packs them (a fuzzed Hello may
      // offer EXT_PACKED_FRAMES).
      for (size_t offset = 0;;) {
        pb::Message msg;
        auto res = pb::decode(m.bytes.data() + offset, m.bytes.size() - offset,
                              max_message_len, msg, true);
        require(res.code == errc::none, "the agent sent an invalid frame");
        if (tracing)
          std::fprintf(stderr, "  agent sent %s\n",
                       msg.ShortDebugString().c_str());
        if (msg.has_request()) {
          auto& req = msg.request();
          agent_requests_.emplace_back(req.request_id());
          if (req.has_send_mr() && req.send_mr().kind() == pb::SendMR::LOCAL)
            known_tokens_.push_back(req.send_mr().token());
        } else if (msg.has_response()) {
          check_response(msg.response());
        }
        if (!res.more)
          break;
        offset += res.frame_len;
      }
    }
  }

  void check_response(const pb::Response& res) {
    auto i = inbound_.find(res.request_id());
    require(i != inbound_.end(), "the agent answered a request never sent");
    auto& info = i->second;
    ++info.answered;
    require(info.answered <= info.sent, "the agent answered a request twice");
    if (info.ambiguous)
      return;
    require(static_cast<int>(res.body_case()) == info.kind + 10,
            "the agent answered with the body of another kind");
    if (res.has_alloc_mr() && res.alloc_mr().status() == pb::OK) {
      auto& t = res.alloc_mr().token();
      require(t.len() == info.alloc_size,
              "AllocMR handed out another size than asked for");
      require(w_.dev->registry->covers(t.rkey(), t.addr(), t.len(),
                                       transport::access::remote_write
                                           | transport::access::remote_read),
              "AllocMR handed out a token outside a remote registration");
      known_tokens_.push_back(t);
    }
  }

  void check_limits(const agent_stats& s) {
    require(s.peer_alloc_bytes <= opts_.peer_max_alloc_bytes,
            "peer-max-alloc-bytes exceeded");
    require(s.queued_data_bytes <= opts_.peer_max_queued_bytes,
            "peer-max-queued-bytes exceeded");
    require(s.queued_remote_mrs <= opts_.peer_max_queued_mrs,
            "peer-max-queued-mrs exceeded");
    require(s.pending_requests <= opts_.peer_max_pending_requests,
            "peer-max-pending-requests exceeded");
  }

  // -- what the peer sends --------------------------------------------------

  /// Remembers a request the peer sent, so its answer can be checked.
  void note_request(const pb::Message& msg) {
    auto& req = msg.request();
    auto& info = inbound_[req.request_id()];
    auto kind = static_cast<int>(req.body_case());
    uint64_t size = req.has_alloc_mr() ? req.alloc_mr().size() : 0;
    if (info.sent > 0 && (info.kind != kind || info.alloc_size != size))
      info.ambiguous = true;
    info.kind = kind;
    info.alloc_size = size;
    ++info.sent;
  }

  /// The peer SENDs `frame`; decodable requests are noted first: each one
  /// of a packed message (the agent offers EXT_PACKED_FRAMES), walked as
  /// the agent walks it (it stops at the first frame it refuses, behind a
  /// Goodbye and after tuning::max_packed_frames).
  void deliver(const std::vector<uint8_t>& frame, std::optional<uint32_t> imm) {
    std::vector<pb::Message> requests;
    size_t offset = 0;
    for (size_t n = 0; n < tuning::max_packed_frames; ++n) {
      pb::Message msg;
      auto res = pb::decode(frame.data() + offset, frame.size() - offset,
                            max_message_len, msg, true);
      if (tracing)
        std::fprintf(stderr, "  peer sends %zu bytes (%s): %s\n",
                     frame.size() - offset, to_string(res.code),
                     msg.ShortDebugString().c_str());
      bool ok = res.code == errc::none;
      if ((ok || res.code == errc::payload_mismatch) && msg.has_request())
        requests.push_back(std::move(msg));
      if (!ok || !res.more || msg.has_goodbye())
        break;
      offset += res.frame_len;
    }
    // A receive holds at most max_message_len bytes: longer frames end
    // the connection before the agent sees them.
    if (!link_->deliver(frame.data(), frame.size(), imm))
      return;
    if (frame.size() <= max_message_len)
      for (const auto& msg : requests)
        note_request(msg);
  }

  /// Encodes `msg` with `payload_len` payload bytes behind it and sends it
  /// with one returned credit (as a peer that reposts its receives).
  void send_frame(const pb::Message& msg, size_t payload_len = 0) {
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
    auto res = pb::encode(msg, buf.data(), buf.size(), buf.size());
    if (res.code != errc::none)
      return;
    buf.resize(res.header_len);
    for (size_t i = 0; i < payload_len; ++i)
      buf.push_back(static_cast<uint8_t>(i * 7 + 1));
    deliver(buf, 1u);
  }

  pb::MrToken pick_token(program_reader& in) {
    auto sel = in.u8();
    auto how = static_cast<token_pick>(
        sel % static_cast<uint8_t>(token_pick::count));
    if (how != token_pick::explicit_fields && !known_tokens_.empty()) {
      auto t = known_tokens_[(sel >> 2) % known_tokens_.size()];
      if (how == token_pick::mutated) {
        auto delta = in.u8();
        switch (delta % 3) {
          case 0:
            t.set_addr(t.addr() + (delta >> 2) - 32);
            break;
          case 1:
            t.set_len(t.len() + (delta >> 2) - 32);
            break;
          default:
            t.set_rkey(t.rkey() ^ (delta >> 2));
        }
      }
      return t;
    }
    auto addr = in.u64();
    auto len = in.u64();
    auto rkey = in.u32();
    return pb::make_token(addr, len, rkey);
  }

  /// Sizes from a byte: small multiples, powers of two, or raw.
  static uint64_t pick_size(program_reader& in) {
    auto k = in.u8();
    if (k < 0x80)
      return uint64_t{k} * 37;
    if (k < 0xf0)
      return uint64_t{1} << (k & 63);
    return in.u64();
  }

  static uint64_t pick_align(program_reader& in) {
    auto a = in.u8();
    if (a < 0x40)
      return uint64_t{1} << (a % 16);
    if (a < 0x80)
      return uint64_t{1} << (a & 63);
    return in.u64();
  }

  /// One of the agent's requests (u8 which), or an explicit u64 id after
  /// 0xff or while the agent has sent none.
  uint64_t pick_request_id(program_reader& in) {
    auto which = in.u8();
    if (agent_requests_.empty() || which == 0xff)
      return in.u64();
    return agent_requests_[which % agent_requests_.size()];
  }

  void respond(program_reader& in) {
    auto id = pick_request_id(in);
    auto body = in.u8() % 5;
    auto status_byte = in.u8() % 13;
    auto status = status_byte <= pb::INTERNAL
                      ? static_cast<pb::Status>(status_byte)
                      : static_cast<pb::Status>(status_byte == 11 ? 77 : -1);
    pb::Message msg;
    auto* res = msg.mutable_response();
    res->set_request_id(id);
    switch (body) {
      case 0: {
        auto* b = res->mutable_alloc_mr();
        b->set_status(status);
        *b->mutable_token() = pick_token(in);
        break;
      }
      case 1:
        res->mutable_release_mr()->set_status(status);
        break;
      case 2:
        res->mutable_send_mr()->set_status(status);
        break;
      case 3:
        res->mutable_send_data()->set_status(status);
        break;
      default:
        break; // no body
    }
    send_frame(msg);
  }

  /// Calls the agent from a fresh actor, as a user would.  (The actor gets
  /// its state as spawn arguments: CAF 0.17 dereferences a null argument
  /// tuple when a function-based actor is spawned without arguments, which
  /// UBSan reports.)  A fresh actor per call, not one for all calls: CAF
  /// cancels a request's timeout only when its requester terminates, and
  /// the `timeouts` operation must find the timeout of a pending call only,
  /// as a user's would be.
  template <class T, class... Ts>
  void call(Ts... xs) {
    ++book_->outstanding;
    auto n = ++calls_;
    if (tracing)
      std::fprintf(stderr, "  user call #%d\n", n);
    w_.sys.spawn(
        [n](caf::event_based_actor* self, agent_actor agent,
            std::shared_ptr<user_book> book, Ts... args) {
          self->request(agent, std::chrono::seconds(3600), args...)
              .then(
                  [book, n](T& x) {
                    --book->outstanding;
                    if (tracing)
                      std::fprintf(stderr, "  user call #%d got a value\n", n);
                    book->keep(x);
                  },
                  [book, n](caf::error& err) {
                    --book->outstanding;
                    if (tracing)
                      std::fprintf(stderr, "  user call #%d got %s\n", n,
                                   render(err).c_str());
                    // An empty error means "no error": a failure must say
                    // what failed (tolerance name: empty-error).
                    require(static_cast<bool>(err) || tolerated("empty-error"),
                            "the agent failed a user call with an empty error");
                    // Every failure carries an rdmactor code; CAF's own
                    // errors may only say that the agent is gone (a call
                    // never answered ends in CAF's request_timeout).
                    auto receiver_down
                        = err && err.category() == caf::atom("system")
                          && err.code()
                                 == static_cast<uint8_t>(
                                     caf::sec::request_receiver_down);
                    require(!err || code_of(err) != errc::none || receiver_down
                                || tolerated("caf-error"),
                            "a user call ended in a CAF error, not an "
                            "rdmactor error (or was never answered)");
                  });
        },
        agent_, book_, xs...);
  }

  /// A fresh local region with every access right, filled with a pattern.
  std::optional<local_mr> local_region(uint64_t size) {
    auto mr = w_.pool->allocate(size, 64, transport::access::all);
    if (!mr)
      return std::nullopt;
    auto* p = mr->data();
    for (size_t i = 0; i < mr->size(); ++i)
      p[i] = static_cast<uint8_t>(i * 13 + 5);
    return std::move(*mr);
  }

  void user(program_reader& in) {
    auto what
        = static_cast<user_op>(in.u8() % static_cast<uint8_t>(user_op::count));
    uint64_t operand = in.u16();
    if (tracing)
      std::fprintf(stderr, "  user op %d (%llu)\n", static_cast<int>(what),
                   static_cast<unsigned long long>(operand));
    auto chunk = max_message_len - pb::max_frame_overhead;
    auto& remotes = book_->remotes;
    switch (what) {
      case user_op::request_remote_mr:
        call<remote_mr>(request_remote_mr_atom::value, operand, uint64_t{64});
        break;
      case user_op::send_local_mr:
        if (auto mr = local_region(operand % 4096))
          call<mr_token>(send_mr_atom::value, *mr);
        break;
      case user_op::send_remote_mr:
        if (!remotes.empty())
          call<mr_token>(send_mr_atom::value,
                         remotes[operand % remotes.size()]);
        break;
      case user_op::send_data:
        if (auto mr = local_region(operand % (3 * chunk + 1)))
          call<uint64_t>(send_data_atom::value, *mr);
        break;
      case user_op::receive_data:
        call<local_mr>(receive_data_atom::value);
        break;
      case user_op::receive_local_mr:
        call<local_mr>(receive_local_mr_atom::value);
        break;
      case user_op::receive_remote_mr:
        call<remote_mr>(receive_remote_mr_atom::value);
        break;
      case user_op::release:
        if (!remotes.empty())
          call<uint64_t>(release_atom::value,
                         remotes[operand % remotes.size()]);
        break;
      case user_op::drop_handle: {
        auto& locals = book_->locals;
        if (operand % 2 == 0 && !locals.empty())
          locals.erase(locals.begin() + (operand / 2) % locals.size());
        else if (!remotes.empty())
          remotes.erase(remotes.begin() + (operand / 2) % remotes.size());
        break;
      }
      default:
        call<agent_stats>(stats_atom::value);
    }
  }

  void step(op code, program_reader& in) {
    switch (code) {
      case op::raw_frame: {
        auto len = in.u16() % (max_message_len + 16);
        auto bytes = in.bytes(len);
        auto c = in.u8();
        std::optional<uint32_t> imm;
        if (c == 0xff)
          imm = in.u32();
        else if (c != 0xfe)
          imm = c % 4u;
        deliver(bytes, imm);
        break;
      }
      case op::alloc_mr: {
        auto size = pick_size(in);
        auto align = pick_align(in);
        send_frame(pb::make_alloc_mr(next_id_++, size, align));
        break;
      }
      case op::release_mr:
        send_frame(pb::make_release_mr(next_id_++, pick_token(in)));
        break;
      case op::send_mr: {
        auto k = in.u8();
        auto kind = k == 0   ? pb::SendMR::LOCAL
                    : k == 1 ? pb::SendMR::REMOTE
                             : static_cast<pb::SendMR::Kind>(k);
        send_frame(pb::make_send_mr(next_id_++, kind, pick_token(in)));
        break;
      }
      case op::send_data: {
        uint64_t len = in.u16() % max_message_len;
        auto skew = in.u8();
        size_t payload = len;
        if (skew & 0x80)
          payload += skew & 0x7f;
        else
          payload -= std::min<size_t>(payload, skew);
        send_frame(pb::make_send_data(next_id_++, len), payload);
        break;
      }
      case op::respond:
        respond(in);
        break;
      case op::user:
        user(in);
        break;
      case op::timeouts:
        fire_timers(in.u8());
        break;
      case op::hello:
        send_frame(pb::make_hello(in.u32(), max_message_len, recv_depth));
        break;
      case op::credits:
        link_->deliver(nullptr, 0, credit_only_bit | in.u8());
        break;
      case op::actor_ack: {
        if (in.u8() & 1) {
          auto hello = pb::make_hello(
              pb::protocol_version, max_message_len, recv_depth, true,
              pb::EXT_REMOTE_ACTORS | pb::EXT_ACTOR_FLOW);
          hello.mutable_hello()->set_actor_window_messages(in.u8());
          hello.mutable_hello()->set_actor_window_bytes(in.u16());
          send_frame(hello);
        }
        pb::Message ack;
        ack.mutable_actor_ack()->set_messages(in.u32());
        ack.mutable_actor_ack()->set_bytes(in.u32());
        send_frame(ack);
        break;
      }
      case op::acked_send_data: {
        if (in.u8() & 1)
          send_frame(pb::make_hello(pb::protocol_version, max_message_len,
                                    recv_depth, true, pb::EXT_PIGGYBACK_ACKS));
        auto n = in.u8() % 20;
        std::vector<uint64_t> ids;
        for (int i = 0; i < n; ++i)
          ids.push_back(pick_request_id(in));
        uint64_t len = in.u16() % max_message_len;
        auto msg = pb::make_send_data(next_id_++, len);
        for (auto id : ids)
          msg.mutable_request()->mutable_send_data()->add_acked(id);
        send_frame(msg, len);
        break;
      }
      default:
        link_->close();
    }
  }

  world& w_;
  const options& opts_ = w_.opts;
  std::shared_ptr<fake_link> link_;
  transport::transport_actor tr_;
  agent_actor agent_;
  std::shared_ptr<user_book> book_ = std::make_shared<user_book>();
  std::map<uint64_t, inbound_request> inbound_;
  std::vector<uint64_t> agent_requests_;
  std::vector<pb::MrToken> known_tokens_;
  uint64_t next_id_ = 1;
  int calls_ = 0;
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  set_log_level("off");
  // Created once and never destroyed: reachable, so not a leak.
  the_world = new world;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  program_reader in{data, size};
  // Starts from the state after_input left (or the initial one).
  require(!the_world->sched.has_job(), "an input started with a job queued");
  session s{*the_world};
  s.run(in);
  s.finish();
  return 0;
}
