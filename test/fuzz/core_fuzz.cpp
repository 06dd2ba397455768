// libFuzzer target for the agent's protocol core alone (agent_core): the
// code that validates everything a peer sends, without actors, threads or
// a transport.  rdmactor_fuzz_agent runs the same core inside the agent
// actor over a fake queue pair; it also covers the actor glue but manages
// only ~1,000 inputs/s on this machine (docs/reliability.md).  Here one
// input costs tens of microseconds, so a campaign reaches far more states.
//
// The input is a program; each operation is one byte (modulo the count of
// `core_op`) followed by its operands; past the end every read is zero
// (agent_program.hpp's reader):
// - frame: u16 length, bytes: the peer's raw frame;
// - message: u8 kind, operands: a well-formed frame of that kind with
//   fuzzed fields (Hello with fuzzed extensions, every request, responses
//   to the core's own requests or to unknown ids, actor frames, Goodbye);
// - user: u8 call, u16 operand: the local user calls the core;
// - time: u16 milliseconds: the clock advances, the sweep and keepalive run;
// - read: u8 pick, u8 outcome: a READ the core asked for completes;
// - drop: u8 pick: the user drops something the core delivered;
// - close: the connection ends (the program stops there).
//
// Findings besides crashes and sanitizer reports:
// - a frame the core sends does not decode, or exceeds the max message
//   length;
// - a response answers an id the peer never used;
// - a completion is called twice, or a user call is not answered once the
//   core closed;
// - after close and dropping every handle, pool memory is still in use.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "actors/core/agent_core.hpp"
#include "common/logging.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/fuzz/agent_program.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;
using namespace rdmactor::fuzz;
namespace pb = rdmactor::protocol;

namespace {

constexpr uint32_t max_message_len = 1024;
constexpr uint32_t eager_len = 256; // < max: the core offers rendezvous
constexpr uint32_t recv_depth = 8;
constexpr size_t max_ops = 256;

void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "core_fuzz: %s\n", what);
    std::abort();
  }
}

options core_options() {
  options o;
  o.fabric = "soft";
  o.max_message_len_bytes = max_message_len;
  o.eager_message_len_bytes = eager_len;
  o.recv_depth = recv_depth;
  o.request_timeout_ms = 1000;
  o.keepalive_ms = 500;
  o.arena_size_bytes = 16 * 1024;
  o.max_alloc_bytes = 64 * 1024;
  o.peer_max_alloc_bytes = 32 * 1024;
  o.peer_max_mrs = 16;
  o.peer_max_queued_bytes = 4096;
  o.peer_max_queued_mrs = 4;
  o.peer_max_pending_requests = 8;
  o.peer_max_violations = 8;
  o.actor_window_messages = 4;
  o.actor_window_bytes = 4096;
  o.remote_actors = true;
  o.log_level = "off";
  return o;
}

enum class core_op : uint8_t { frame, message, user, time, read, drop, close };
constexpr uint8_t core_op_count = 7;

enum class msg_kind : uint8_t {
  hello,
  alloc_mr,
  release_mr,
  send_mr,
  send_data,
  send_data_rendezvous,
  ping,
  respond,
  actor_lookup,
  actor_message,
  actor_rendezvous,
  actor_ack,
  goodbye,
  count,
};

enum class call : uint8_t {
  alloc_remote,
  lend,
  give_back,
  release_remote,
  send_data,
  lookup,
  post_actor,
  post_actor_ack,
  count,
};

/// The effects of the core, checked as they happen.
class checking_sink : public agent_core::sink {
public:
  struct pending_read {
    local_mr dst;
    std::function<void(const caf::error&)> done;
  };

  std::set<uint64_t> peer_ids;     ///< request ids the peer used
  std::vector<uint64_t> our_ids;   ///< request ids the core sent
  std::vector<pending_read> reads; ///< READs not completed yet
  std::vector<local_mr> held;      ///< what the core delivered
  std::vector<mr_token> tokens;    ///< tokens the peer lent us
  uint64_t held_bytes = 0;
  bool disconnected = false;
  bool ack_flush = false;

  void post(std::vector<uint8_t> header, local_mr payload) override {
    std::vector<uint8_t> frame = std::move(header);
    frame.insert(frame.end(), payload.data(), payload.data() + payload.size());
    require(frame.size() <= max_message_len,
            "a frame over the max message length");
    pb::Message msg;
    auto res = pb::decode(frame.data(), frame.size(), max_message_len, msg);
    require(res.code == errc::none, "a frame of the core does not decode");
    if (msg.has_request())
      our_ids.push_back(msg.request().request_id());
    if (msg.has_response())
      require(peer_ids.count(msg.response().request_id()) > 0,
              "a response to an id the peer never used");
  }

  void deliver_data(local_mr chunk) override {
    held_bytes += chunk.size();
    held.push_back(std::move(chunk));
  }

  void deliver_local_mr(local_mr mr) override {
    held.push_back(std::move(mr));
  }

  void deliver_remote_mr(const mr_token& token) override {
    tokens.push_back(token);
  }

  void disconnect(const caf::error&) override {
    disconnected = true;
  }

  void schedule_ack_flush() override {
    ack_flush = true;
  }

  void schedule_sweep() override {}

  uint64_t queued_data_bytes() const override {
    return held_bytes;
  }

  size_t queued_remote_mrs() const override {
    return tokens.size();
  }

  void read(local_mr dst, const mr_token&,
            std::function<void(const caf::error&)> done) override {
    reads.push_back(pending_read{std::move(dst), std::move(done)});
  }

  caf::error deliver_actor_message(const pb::ActorMessage&, const uint8_t*,
                                   size_t) override {
    return caf::none;
  }

  actor_lookup_result find_actor(const std::string& name) override {
    if (name == "a")
      return {5, {"caf::replies_to<@i32>::with<@i32>"}};
    return {};
  }

  caf::error take_actor_ack(uint64_t, uint64_t) override {
    return caf::none;
  }
};

/// Counts answers of user calls: each exactly once.
struct answers {
  int issued = 0;
  int answered = 0;

  template <class... Ts>
  std::function<void(Ts...)> make() {
    ++issued;
    auto once = std::make_shared<bool>(false);
    return [this, once](Ts...) {
      require(!*once, "a user call answered twice");
      *once = true;
      ++answered;
    };
  }
};

struct harness {
  std::shared_ptr<fake_device> dev = std::make_shared<fake_device>();
  options opts = core_options();
  memory_pool_ptr pool = std::make_shared<memory_pool>(
      dev, opts.arena_size_bytes, opts.max_alloc_bytes);
  checking_sink out;
  answers calls;
  std::unique_ptr<agent_core> core;
  agent_core::time_point now
      = agent_core::clock_type::time_point{} + std::chrono::hours(24);

  harness() {
    core = std::make_unique<agent_core>(
        out, opts, transport::link_params{max_message_len, recv_depth, "peer"},
        pool);
    core->start();
  }

  void feed(const std::vector<uint8_t>& bytes) {
    if (bytes.empty() || bytes.size() > max_message_len)
      return;
    // A raw frame that names a request may be answered (also when its
    // payload disagrees with its length): the peer used that id.
    pb::Message seen;
    auto code
        = pb::decode(bytes.data(), bytes.size(), max_message_len, seen).code;
    if ((code == errc::none || code == errc::unknown_message_kind
         || code == errc::payload_mismatch)
        && seen.has_request())
      out.peer_ids.insert(seen.request().request_id());
    auto buf = pool->allocate(bytes.size(), 64, transport::access::local_write,
                              false);
    if (!buf)
      return;
    std::memcpy(buf->data(), bytes.data(), bytes.size());
    core->on_frame(*buf, now);
    if (out.ack_flush) {
      out.ack_flush = false;
      core->data().flush_acks();
    }
  }

  void feed(const pb::Message& msg, size_t payload_len = 0, uint8_t fill = 0) {
    if (msg.has_request())
      out.peer_ids.insert(msg.request().request_id());
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong()
                             + payload_len);
    auto res = pb::encode(msg, buf.data(), buf.size(), max_message_len);
    if (res.code != errc::none)
      return;
    buf.resize(res.header_len + payload_len);
    std::memset(buf.data() + res.header_len, fill, payload_len);
    feed(buf);
  }

  /// A token: one the peer lent us, one of ours, or fuzzed fields.
  pb::MrToken token(program_reader& in) {
    auto pick = in.u8();
    if (pick % 3 == 0 && !out.tokens.empty()) {
      auto& t = out.tokens[in.u8() % out.tokens.size()];
      return pb::make_token(t.addr, t.len, t.rkey);
    }
    if (pick % 3 == 1 && !out.held.empty()) {
      auto t = out.held[in.u8() % out.held.size()].token();
      return pb::make_token(t.addr + in.u8(), t.len, t.rkey);
    }
    auto addr = in.u64();
    auto len = in.u16();
    return pb::make_token(addr, len, in.u32());
  }

  uint64_t peer_id(program_reader& in) {
    return in.u8() % 4 == 0 ? in.u64() : 1000 + in.u8();
  }

  void message(program_reader& in) {
    auto kind = static_cast<msg_kind>(in.u8()
                                      % static_cast<uint8_t>(msg_kind::count));
    pb::Message m;
    switch (kind) {
      case msg_kind::hello: {
        auto ext = in.u32();
        auto flags = in.u8();
        m = pb::make_hello(flags & 0x80 ? in.u32() : pb::protocol_version,
                           flags & 0x40 ? in.u16() : max_message_len,
                           1 + in.u8() % 16, (flags & 1) != 0, ext);
        auto* h = m.mutable_hello();
        h->set_goodbye((flags & 2) != 0);
        h->set_max_rendezvous_bytes(in.u32());
        break;
      }
      case msg_kind::alloc_mr:
        m = pb::make_alloc_mr(peer_id(in), in.u16(),
                              uint64_t{1} << (in.u8() % 14));
        break;
      case msg_kind::release_mr: {
        auto id = peer_id(in);
        m = pb::make_release_mr(id, token(in));
        break;
      }
      case msg_kind::send_mr: {
        auto id = peer_id(in);
        auto k = in.u8() % 2 == 0 ? pb::SendMR::LOCAL : pb::SendMR::REMOTE;
        auto t = token(in);
        auto tag = in.u8() % 2 ? in.u64() : 0;
        m = pb::make_send_mr(id, k, t, tag, in.u8() % 4 == 0 ? in.u16() : 0);
        break;
      }
      case msg_kind::send_data: {
        auto id = peer_id(in);
        auto len = in.u16() % max_message_len;
        auto skew = in.u8();
        m = in.u8() % 2 ? pb::make_send_data(id, len, in.u32())
                        : pb::make_send_data(id, len);
        feed(m, skew == 0 ? len : (skew & 0x80 ? len + (skew & 7) : len / 2),
             0x5a);
        return;
      }
      case msg_kind::send_data_rendezvous: {
        auto id = peer_id(in);
        m = pb::make_send_data_rendezvous(id, token(in));
        break;
      }
      case msg_kind::ping:
        m = pb::make_ping(peer_id(in));
        break;
      case msg_kind::respond: {
        uint64_t id = out.our_ids.empty() || in.u8() % 8 == 0
                          ? in.u64()
                          : out.our_ids[in.u8() % out.our_ids.size()];
        auto status = static_cast<pb::Status>(in.u8() % 16);
        switch (in.u8() % 6) {
          case 0:
            m = pb::make_alloc_mr_response(id, status, "", token(in));
            break;
          case 1:
            m = pb::make_release_mr_response(id, status, "");
            break;
          case 2:
            m = pb::make_send_mr_response(id, status, "");
            break;
          case 3:
            m = pb::make_send_data_response(id, status, "");
            break;
          case 4:
            m = pb::make_pong(id);
            break;
          default: {
            auto* r = m.mutable_response();
            r->set_request_id(id);
            auto* b = r->mutable_actor_lookup();
            b->set_status(status);
            b->set_actor_id(in.u8());
            for (int i = in.u8() % 4; i > 0; --i)
              b->add_interface(std::string(in.u8(), 's'));
          }
        }
        break;
      }
      case msg_kind::actor_lookup: {
        auto* r = m.mutable_request();
        r->set_request_id(peer_id(in));
        auto* b = r->mutable_actor_lookup();
        b->set_name(in.u8() % 2 ? "a" : std::string(in.u16() % 300, 'n'));
        for (int i = in.u8() % 3; i > 0; --i)
          b->add_expected_interface(std::string(in.u8(), 'i'));
        break;
      }
      case msg_kind::actor_message: {
        auto* a = m.mutable_actor_message();
        a->set_target(in.u8() % 8);
        a->set_sender(in.u8());
        a->set_message_id(in.u8() % 2 ? 0 : in.u64());
        auto len = in.u16() % eager_len;
        a->set_len(len);
        if (in.u8() % 4 == 0)
          a->set_total_len(in.u32());
        a->set_down(in.u8() % 8 == 0);
        feed(m, len, 0x33);
        return;
      }
      case msg_kind::actor_rendezvous: {
        auto* r = m.mutable_request();
        r->set_request_id(peer_id(in));
        auto* a = r->mutable_actor_message();
        a->set_target(in.u8() % 8);
        a->set_sender(in.u8());
        auto t = token(in);
        a->set_len(in.u8() % 2 ? t.len() : in.u32());
        *a->mutable_source() = t;
        break;
      }
      case msg_kind::actor_ack: {
        auto* a = m.mutable_actor_ack();
        a->set_messages(in.u16());
        a->set_bytes(in.u32());
        break;
      }
      default:
        m = pb::make_goodbye(std::string(in.u8(), 'g'));
    }
    feed(m);
  }

  local_mr fresh(uint16_t size) {
    auto mr = pool->allocate(1 + size % 4096, 64, transport::access::all);
    return mr ? std::move(*mr) : local_mr{};
  }

  mr_token some_token(uint16_t operand) {
    if (!out.tokens.empty())
      return out.tokens[operand % out.tokens.size()];
    return mr_token{operand, 64, operand};
  }

  void user(program_reader& in) {
    auto c = static_cast<call>(in.u8() % static_cast<uint8_t>(call::count));
    auto operand = in.u16();
    switch (c) {
      case call::alloc_remote:
        core->regions().alloc(1 + operand % 8192, 64, now,
                              calls.make<caf::expected<mr_token>>());
        break;
      case call::lend:
        if (auto mr = fresh(operand); mr.valid())
          core->regions().lend(std::move(mr), now,
                               calls.make<caf::expected<mr_token>>(),
                               operand % 3, operand % 5 == 0 ? operand : 0);
        break;
      case call::give_back:
        core->regions().give_back(some_token(operand), now,
                                  calls.make<const caf::error&>(), operand % 2);
        break;
      case call::release_remote:
        core->regions().release(some_token(operand), now,
                                calls.make<const caf::error&>());
        break;
      case call::send_data:
        if (auto mr = fresh(operand); mr.valid())
          core->data().send(std::move(mr), now,
                            calls.make<caf::expected<uint64_t>>());
        break;
      case call::lookup:
        core->actors().lookup(operand % 2 ? "a"
                                          : std::string(operand % 300, 'x'),
                              {std::string(operand % 64, 'i')}, now,
                              calls.make<caf::expected<actor_lookup_result>>());
        break;
      case call::post_actor: {
        std::string data(operand % 2048, 'd');
        static_cast<void>(core->actors().post(5, 6,
                                              operand % 3 == 0 ? operand : 0,
                                              data.data(), data.size(), false));
        break;
      }
      default:
        core->actors().post_ack(operand % 8, operand);
    }
  }

  void run(const uint8_t* data, size_t size) {
    program_reader in{data, size};
    for (size_t n = 0; n < max_ops && !in.done() && !out.disconnected; ++n) {
      switch (static_cast<core_op>(in.u8() % core_op_count)) {
        case core_op::frame:
          feed(in.bytes(in.u16() % (max_message_len + 1)));
          break;
        case core_op::message:
          message(in);
          break;
        case core_op::user:
          user(in);
          break;
        case core_op::time: {
          now += std::chrono::milliseconds(in.u16());
          core->expire(now);
          auto k = core->live().keepalive(now);
          if (k.dead)
            out.disconnected = true;
          break;
        }
        case core_op::read: {
          if (out.reads.empty())
            break;
          auto i = in.u8() % out.reads.size();
          auto r = std::move(out.reads[i]);
          out.reads.erase(out.reads.begin() + static_cast<long>(i));
          auto fail = in.u8() % 4 == 0;
          if (!fail && r.dst.valid())
            std::memset(r.dst.data(), 0x77, r.dst.size());
          r.done(fail ? make_error(errc::remote_access_error, "fuzzed")
                      : caf::error{});
          if (out.ack_flush) {
            out.ack_flush = false;
            core->data().flush_acks();
          }
          break;
        }
        case core_op::drop: {
          if (out.held.empty())
            break;
          auto i = in.u8() % out.held.size();
          out.held_bytes
              -= std::min<uint64_t>(out.held_bytes, out.held[i].size());
          out.held.erase(out.held.begin() + static_cast<long>(i));
          break;
        }
        case core_op::close:
          out.disconnected = true;
          break;
      }
    }
    core->close(make_error(errc::peer_gone, "the program ended"));
    require(calls.answered == calls.issued,
            "a user call was not answered at close");
    // READs in flight at close are never completed (the connection went).
    out.reads.clear();
    out.held.clear();
    core.reset();
    require(pool->stats().bytes_in_use == 0,
            "pool memory still in use after close");
  }
};

} // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  set_log_level("off");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  harness h;
  h.run(data, size);
  return 0;
}
