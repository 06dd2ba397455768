#pragma once

// What the agent_core_test suites share (the module is agent_core_test.cpp).
//
// The agent's protocol (actors/core/agent_core.hpp) without a network or
// actors: frames from the peer go straight into the core, its effects land in a
// recording sink, memory comes from a pool on the fuzz target's fake
// device, and the tests drive time themselves.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "actors/core/agent_core.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;
namespace pb = rdmactor::protocol;
using std::chrono::milliseconds;

inline constexpr uint32_t max_message_len = 4096;
inline constexpr uint32_t recv_depth = 8;

/// One frame the core posted, decoded.
struct posted_frame {
  pb::Message msg;
  local_mr payload;
  /// The payload that rode in the header's buffer (small actor messages).
  std::string inline_payload;
};

/// Records every effect of the core.
class recording_sink : public agent_core::sink {
public:
  void post(std::vector<uint8_t> header, local_mr payload) override {
    posted_frame f;
    if (header.empty()) {
      // A frame whose header is larger than a send's header slot goes
      // whole from pool memory (agent_core::post_frame).
      auto res
          = pb::decode(payload.data(), payload.size(), max_message_len, f.msg);
      BOOST_REQUIRE(res.code == errc::none);
      if (res.payload_len > 0)
        f.payload = *payload.slice(
            static_cast<size_t>(res.payload - payload.data()), res.payload_len);
      posted.push_back(std::move(f));
      ++spilled;
      spilled_bytes = payload.size();
      return;
    }
    BOOST_REQUIRE(header.size() >= pb::frame_header_len);
    if (!payload.valid()) {
      // The whole frame, its payload (an eager actor message's) inline.
      auto res
          = pb::decode(header.data(), header.size(), max_message_len, f.msg);
      BOOST_REQUIRE(res.code == errc::none);
      f.inline_payload.assign(reinterpret_cast<const char*>(res.payload),
                              res.payload_len);
      posted.push_back(std::move(f));
      return;
    }
    BOOST_REQUIRE(f.msg.ParseFromArray(
        header.data() + pb::frame_header_len,
        static_cast<int>(header.size() - pb::frame_header_len)));
    f.payload = std::move(payload);
    posted.push_back(std::move(f));
  }

  void post_upkeep(std::vector<uint8_t> header) override {
    ++upkeep_posts;
    post(std::move(header), local_mr{});
  }

  void upkeep_frame() override {
    ++upkeep_frames;
  }

  void pack_frames(size_t max_bytes) override {
    pack_limit = max_bytes;
  }

  void deliver_data(local_mr chunk) override {
    queued_bytes += chunk.size();
    data.push_back(std::move(chunk));
  }

  void deliver_local_mr(local_mr mr) override {
    local_mrs.push_back(std::move(mr));
  }

  void deliver_remote_mr(const mr_token& token) override {
    remote_mrs.push_back(token);
  }

  void disconnect(const caf::error& reason) override {
    disconnects.push_back(reason);
  }

  void schedule_ack_flush() override {
    ++ack_flushes;
  }

  void schedule_sweep() override {
    ++sweeps;
  }

  uint64_t queued_data_bytes() const override {
    return queued_bytes;
  }

  size_t queued_remote_mrs() const override {
    return remote_mrs.size();
  }

  void deliver_write_imm(uint32_t imm, uint64_t) override {
    imms.push_back(imm);
  }

  size_t queued_imms() const override {
    return imms.size();
  }

  /// The fixture's frames are pool allocations, not receive slots: every
  /// delivered chunk still in `data` counts as a held receive buffer, and
  /// the frame being handled as one more.
  uint32_t receive_buffers_held() const override {
    return static_cast<uint32_t>(data.size()) + 1;
  }

  /// A READ the core asked for (rendezvous); the test completes it.
  struct pending_read {
    local_mr dst;
    mr_token src;
    std::function<void(const caf::error&)> done;
  };

  void read(local_mr dst, const mr_token& src,
            std::function<void(const caf::error&)> done) override {
    reads.push_back(pending_read{std::move(dst), src, std::move(done)});
  }

  std::vector<pending_read> reads;

  /// An actor message the core handed over (whole or a chunk), or refused.
  struct actor_frame {
    pb::ActorMessage head;
    std::string bytes;
    bool refused = false;
    caf::error why;
  };

  caf::error deliver_actor_message(const pb::ActorMessage& m,
                                   const uint8_t* bytes, size_t len) override {
    actor_frame f;
    f.head = m;
    f.bytes.assign(reinterpret_cast<const char*>(bytes), len);
    actor_frames.push_back(std::move(f));
    // remote_actors' reassembly, reduced to its bookkeeping: a frame that
    // announces more than it carries starts a message, the frames after
    // it continue that one until it is whole.
    if (partial_on) {
      partial_held += len;
      if (partial_held >= partial_total) {
        partial_on = false;
        partial_held = 0;
      }
    } else if (m.total_len() > len) {
      partial_on = true;
      partial_total = m.total_len();
      partial_held = len;
    }
    return caf::none;
  }

  partial_actor_state partial_actor() const override {
    return {partial_on, partial_held};
  }

  void drop_partial_actor(const caf::error& why) override {
    partial_on = false;
    partial_held = 0;
    partial_drops.push_back(why);
  }

  bool partial_on = false;
  uint64_t partial_total = 0;
  uint64_t partial_held = 0;
  std::vector<caf::error> partial_drops;

  actor_lookup_result find_actor(const std::string& name) override {
    return name == published_name ? published : actor_lookup_result{};
  }

  void refuse_actor_message(const pb::ActorMessage& m,
                            const caf::error& why) override {
    actor_frame f;
    f.head = m;
    f.refused = true;
    f.why = why;
    actor_frames.push_back(std::move(f));
  }

  std::vector<actor_frame> actor_frames;

  std::vector<uint32_t> imms;

  std::vector<posted_frame> posted;
  std::vector<local_mr> data;
  std::vector<local_mr> local_mrs;
  std::vector<mr_token> remote_mrs;
  std::vector<caf::error> disconnects;
  int ack_flushes = 0;
  int spilled = 0;            ///< frames posted whole from pool memory
  size_t spilled_bytes = 0;   ///< the size of the last one
  size_t upkeep_posts = 0;    ///< of `posted`: keepalive Pings and Pongs
  size_t upkeep_frames = 0;   ///< frames received that were upkeep
  size_t pack_limit = 0;      ///< what pack_frames said (0: not called)
  std::string published_name; ///< what find_actor finds
  actor_lookup_result published;
  int sweeps = 0;
  uint64_t queued_bytes = 0;
};

/// What a completion callback received.
struct outcome {
  bool called = false;
  caf::error err;
};

struct fixture {
  std::shared_ptr<fuzz::fake_device> dev
      = std::make_shared<fuzz::fake_device>();
  memory_pool_ptr pool = std::make_shared<memory_pool>(dev, 1 << 20, 1 << 24);
  recording_sink out;
  options opts;
  std::unique_ptr<agent_core> core;
  agent_core::time_point t0 = agent_core::clock_type::now();

  fixture() {
    opts.request_timeout_ms = 1000;
    opts.peer_max_mrs = 4;
    opts.peer_max_alloc_bytes = 4096;
    opts.peer_max_queued_bytes = 1000;
    opts.peer_max_queued_mrs = 2;
    opts.peer_max_violations = 3;
    // Each test starts with fresh budgets shared by every agent.
    shared_log_budget("agent").reset(
        tuning::shared_log_lines, milliseconds{tuning::shared_log_window_ms});
    make_core();
  }

  /// (Re)builds the core after a test changed `opts`.
  void make_core() {
    core.reset();
    core = std::make_unique<agent_core>(
        out, opts, transport::link_params{max_message_len, recv_depth, "peer"},
        pool);
  }

  /// Encodes `msg` with `payload` behind it into a registered buffer, as
  /// the transport would hand it over.
  local_mr frame(const pb::Message& msg, const std::string& payload = {}) {
    auto header = pb::frame_header_len + msg.ByteSizeLong();
    auto buf = pool->allocate(header + payload.size(), 64,
                              transport::access::local_write);
    BOOST_REQUIRE(buf);
    auto res = pb::encode(msg, buf->data(), buf->size(), max_message_len);
    BOOST_REQUIRE(res.code == errc::none);
    BOOST_REQUIRE(res.header_len == header);
    if (!payload.empty())
      std::memcpy(buf->data() + header, payload.data(), payload.size());
    return std::move(*buf);
  }

  /// The frames of `parts` (each a Message and its payload) packed into
  /// one registered buffer, every frame but the last marked.
  local_mr
  packed(const std::vector<std::pair<pb::Message, std::string>>& parts) {
    std::vector<uint8_t> bytes;
    for (size_t i = 0; i < parts.size(); ++i) {
      auto one = frame(parts[i].first, parts[i].second);
      if (i + 1 < parts.size())
        pb::mark_more_frames(one.data());
      bytes.insert(bytes.end(), one.data(), one.data() + one.size());
    }
    auto buf = pool->allocate(bytes.size(), 64, transport::access::local_write);
    BOOST_REQUIRE(buf);
    std::memcpy(buf->data(), bytes.data(), bytes.size());
    return std::move(*buf);
  }

  /// Hands one frame from the peer to the core at time `t0`.
  void receive(const pb::Message& msg, const std::string& payload = {}) {
    core->on_frame(frame(msg, payload), t0);
  }

  /// Starts the core and returns the Hello it posted.
  const pb::Hello& our_hello() {
    core->start();
    BOOST_REQUIRE(!out.posted.empty());
    BOOST_REQUIRE(out.posted.front().msg.has_hello());
    return out.posted.front().msg.hello();
  }

  /// The response of the last posted frame.
  const pb::Response& last_response() {
    BOOST_REQUIRE(!out.posted.empty());
    BOOST_REQUIRE(out.posted.back().msg.has_response());
    return out.posted.back().msg.response();
  }

  /// A completion that records what it got in `o`.
  static agent_core::completion_fn record(outcome& o) {
    return [&o](const pb::Response*, const caf::error& err) {
      o.called = true;
      o.err = err;
    };
  }

  /// Sends a SendData of `len` bytes (no answer expected) and returns its
  /// id.
  uint64_t pending_send_data(outcome& o, size_t len = 0) {
    auto id = core->new_request_id();
    local_mr payload;
    if (len > 0) {
      auto mr = pool->allocate(len, 64, transport::access::local_write);
      BOOST_REQUIRE(mr);
      payload = std::move(*mr);
    }
    core->send_request(pb::make_send_data(id, len), std::move(payload),
                       record(o), t0);
    return id;
  }
};

inline pb::Message hello(uint32_t version, bool cumulative_acks) {
  return pb::make_hello(version, max_message_len, recv_depth, cumulative_acks);
}
