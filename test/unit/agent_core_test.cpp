#define BOOST_TEST_MODULE agent_core
#include <boost/test/unit_test.hpp>

// The agent's protocol (actors/agent_core.hpp) without a network or actors:
// frames from the peer go straight into the core, its effects land in a
// recording sink, memory comes from a pool on the fuzz target's fake
// device, and the tests drive time themselves.

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <spdlog/sinks/base_sink.h>

#include "actors/agent_core.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/fuzz/fake_fabric.hpp"

using namespace rdmactor;
namespace pb = rdmactor::protocol;
using std::chrono::milliseconds;

namespace {

constexpr uint32_t max_message_len = 4096;
constexpr uint32_t recv_depth = 8;

/// One frame the core posted, decoded.
struct posted_frame {
  pb::Message msg;
  local_mr payload;
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
    BOOST_REQUIRE(f.msg.ParseFromArray(
        header.data() + pb::frame_header_len,
        static_cast<int>(header.size() - pb::frame_header_len)));
    f.payload = std::move(payload);
    posted.push_back(std::move(f));
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
  std::string published_name; ///< what find_actor finds
  actor_lookup_result published;
  int sweeps = 0;
  uint64_t queued_bytes = 0;
};

/// Records the lines written to `log()` while it lives (besides stderr).
class log_capture : public spdlog::sinks::base_sink<std::mutex> {
public:
  /// The lines, without pattern (time, level).
  std::vector<std::string> lines;

  /// Lines that contain `part`.
  size_t count(const std::string& part) const {
    size_t n = 0;
    for (auto& line : lines)
      if (line.find(part) != std::string::npos)
        ++n;
    return n;
  }

protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines.emplace_back(msg.payload.data(), msg.payload.size());
  }

  void flush_() override {
    // nothing buffered
  }
};

/// Attaches a `log_capture` to `log()` for the life of a test.
struct attached_capture {
  std::shared_ptr<log_capture> sink = std::make_shared<log_capture>();

  attached_capture() {
    log().sinks().push_back(sink);
  }

  ~attached_capture() {
    auto& sinks = log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), sink), sinks.end());
  }
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

pb::Message hello(uint32_t version, bool cumulative_acks) {
  return pb::make_hello(version, max_message_len, recv_depth, cumulative_acks);
}

} // namespace

// -- regions the peer allocates and releases ----------------------------------

BOOST_FIXTURE_TEST_SUITE(alloc_and_release, fixture)

BOOST_AUTO_TEST_CASE(alloc_within_quota_answers_ok_with_a_token) {
  auto before = pool->stats().bytes_in_use;
  receive(pb::make_alloc_mr(7, 100, 64));
  auto& res = last_response();
  BOOST_TEST(res.request_id() == 7u);
  BOOST_REQUIRE(res.has_alloc_mr());
  BOOST_TEST(pb::status_of(res) == pb::OK);
  BOOST_REQUIRE(res.alloc_mr().has_token());
  BOOST_TEST(res.alloc_mr().token().len() == 100u);
  BOOST_TEST(res.alloc_mr().token().rkey() != 0u);
  BOOST_TEST(pool->stats().bytes_in_use >= before + 100);
  auto s = core->stats();
  BOOST_TEST(s.owned_mrs == 1u);
  BOOST_TEST(s.peer_alloc_bytes == 100u);
  BOOST_TEST(s.rejected_requests == 0u);
}

BOOST_AUTO_TEST_CASE(alloc_over_peer_max_mrs_is_quota_exceeded) {
  for (uint64_t id = 1; id <= opts.peer_max_mrs; ++id) {
    receive(pb::make_alloc_mr(id, 64, 64));
    BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  }
  receive(pb::make_alloc_mr(99, 64, 64));
  BOOST_TEST(last_response().request_id() == 99u);
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(!last_response().alloc_mr().has_token());
  BOOST_TEST(core->stats().owned_mrs == opts.peer_max_mrs);
  BOOST_TEST(core->stats().rejected_requests == 1u);
}

BOOST_AUTO_TEST_CASE(alloc_over_peer_max_alloc_bytes_is_quota_exceeded) {
  receive(pb::make_alloc_mr(1, 4000, 64));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  receive(pb::make_alloc_mr(2, 97, 64)); // 4097 > 4096
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  receive(pb::make_alloc_mr(3, 96, 64)); // exactly the limit
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(core->stats().peer_alloc_bytes == 4096u);
}

BOOST_AUTO_TEST_CASE(alloc_with_an_invalid_layout_is_refused) {
  receive(pb::make_alloc_mr(1, 64, 3)); // not a power of two
  BOOST_TEST(pb::status_of(last_response()) == pb::INVALID_LAYOUT);
  receive(pb::make_alloc_mr(2, 64, 8192)); // beyond what a peer may ask
  BOOST_TEST(pb::status_of(last_response()) == pb::INVALID_LAYOUT);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().rejected_requests == 2u);
}

BOOST_AUTO_TEST_CASE(release_of_an_unknown_token_is_unknown_token) {
  receive(pb::make_release_mr(5, pb::make_token(0x1000, 64, 42)));
  BOOST_TEST(last_response().request_id() == 5u);
  BOOST_REQUIRE(last_response().has_release_mr());
  BOOST_TEST(pb::status_of(last_response()) == pb::UNKNOWN_TOKEN);
}

BOOST_AUTO_TEST_CASE(release_returns_the_memory_and_the_quota) {
  auto before = pool->stats().bytes_in_use;
  receive(pb::make_alloc_mr(1, 4096, 64));
  auto token = last_response().alloc_mr().token();
  receive(pb::make_release_mr(2, token));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().peer_alloc_bytes == 0u);
  BOOST_TEST(pool->stats().bytes_in_use == before);
  receive(pb::make_release_mr(3, token)); // twice: no longer held
  BOOST_TEST(pb::status_of(last_response()) == pb::UNKNOWN_TOKEN);
}

BOOST_AUTO_TEST_CASE(send_mr_local_delivers_the_token_up_to_the_queue_limit) {
  receive(pb::make_send_mr(1, pb::SendMR::LOCAL, pb::make_token(0x10, 8, 3)));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  receive(pb::make_send_mr(2, pb::SendMR::LOCAL, pb::make_token(0x20, 8, 3)));
  receive(pb::make_send_mr(3, pb::SendMR::LOCAL, pb::make_token(0x30, 8, 3)));
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  BOOST_REQUIRE(out.remote_mrs.size() == 2u);
  BOOST_TEST(out.remote_mrs[0].addr == 0x10u);
}

BOOST_AUTO_TEST_CASE(send_mr_remote_hands_back_only_what_we_own) {
  receive(pb::make_send_mr(1, pb::SendMR::REMOTE, pb::make_token(0x10, 8, 3)));
  BOOST_TEST(pb::status_of(last_response()) == pb::NOT_OWNED);
  receive(pb::make_alloc_mr(2, 128, 64));
  auto token = last_response().alloc_mr().token();
  receive(pb::make_send_mr(3, pb::SendMR::REMOTE, token));
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_REQUIRE(out.local_mrs.size() == 1u);
  BOOST_TEST(out.local_mrs[0].size() == 128u);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().peer_alloc_bytes == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- violations ---------------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(violations, fixture)

BOOST_AUTO_TEST_CASE(max_violations_in_a_row_disconnect_once) {
  auto unknown = pb::make_token(0x1000, 64, 42);
  receive(pb::make_release_mr(1, unknown));
  receive(pb::make_release_mr(2, unknown));
  BOOST_TEST(out.disconnects.empty());
  receive(pb::make_release_mr(3, unknown));
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
  // Once closed, more violations disconnect no more.
  core->close(make_error(errc::peer_gone, "test"));
  receive(pb::make_release_mr(4, unknown));
  BOOST_TEST(out.disconnects.size() == 1u);
}

BOOST_AUTO_TEST_CASE(an_accepted_request_resets_the_count) {
  auto unknown = pb::make_token(0x1000, 64, 42);
  receive(pb::make_release_mr(1, unknown));
  receive(pb::make_release_mr(2, unknown));
  receive(pb::make_alloc_mr(3, 64, 64)); // accepted
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  receive(pb::make_release_mr(4, unknown));
  receive(pb::make_release_mr(5, unknown));
  BOOST_TEST(out.disconnects.empty());
  receive(pb::make_release_mr(6, unknown));
  BOOST_TEST(out.disconnects.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_malformed_frame_is_a_protocol_error_and_a_violation) {
  auto buf = pool->allocate(16, 64, transport::access::local_write);
  BOOST_REQUIRE(buf);
  // Announces 12 message bytes of garbage.
  const uint8_t garbage[16] = {12,   0,    0,    0,    0xff, 0xff, 0xff, 0xff,
                               0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  std::memcpy(buf->data(), garbage, sizeof(garbage));
  for (int i = 0; i < 3; ++i)
    core->on_frame(*buf, t0);
  BOOST_TEST(core->stats().protocol_errors == 3u);
  BOOST_TEST(out.posted.empty()); // nothing to answer
  BOOST_TEST(out.disconnects.size() == 1u);
  // A frame shorter than its header too.
  auto tiny = buf->slice(0, 2);
  BOOST_REQUIRE(tiny);
  core->on_frame(*tiny, t0);
  BOOST_TEST(core->stats().protocol_errors == 4u);
}

BOOST_AUTO_TEST_CASE(send_data_with_a_wrong_length_is_answered) {
  // SendData.len says 10, 4 bytes arrive.
  receive(pb::make_send_data(9, 10), "abcd");
  BOOST_TEST(last_response().request_id() == 9u);
  BOOST_TEST(pb::status_of(last_response()) == pb::LENGTH_MISMATCH);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(out.data.empty());
}

BOOST_AUTO_TEST_CASE(hello_with_another_version_disconnects) {
  receive(hello(pb::protocol_version, false));
  BOOST_TEST(out.disconnects.empty());
  receive(hello(pb::protocol_version + 1, false));
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::version_mismatch);
}

BOOST_AUTO_TEST_CASE(start_posts_our_hello_offering_cumulative_acks) {
  core->start();
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_REQUIRE(out.posted[0].msg.has_hello());
  auto& h = out.posted[0].msg.hello();
  BOOST_TEST(h.version() == pb::protocol_version);
  BOOST_TEST(h.cumulative_acks());
}

BOOST_AUTO_TEST_SUITE_END()

// -- SendData from the peer and its acknowledgements --------------------------

BOOST_FIXTURE_TEST_SUITE(send_data_in, fixture)

BOOST_AUTO_TEST_CASE(send_data_over_peer_max_queued_bytes_is_refused) {
  std::string chunk(600, 'x');
  receive(pb::make_send_data(1, chunk.size()), chunk);
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_REQUIRE(out.data.size() == 1u);
  BOOST_TEST(std::memcmp(out.data[0].data(), chunk.data(), chunk.size()) == 0);
  receive(pb::make_send_data(2, chunk.size()), chunk); // 1200 > 1000
  BOOST_TEST(last_response().request_id() == 2u);
  BOOST_TEST(pb::status_of(last_response()) == pb::QUOTA_EXCEEDED);
  BOOST_TEST(out.data.size() == 1u);
  out.queued_bytes = 0; // the user claimed the first chunk
  receive(pb::make_send_data(3, chunk.size()), chunk);
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(out.data.size() == 2u);
}

BOOST_AUTO_TEST_CASE(received_chunks_are_copied_once_half_the_pool_is_held) {
  // A zero-copy chunk views its frame behind the header (not 64-aligned);
  // a copy is an allocation of its own (64-aligned).
  auto zero_copy = [](const local_mr& chunk) { return chunk.addr() % 64 != 0; };
  for (uint64_t id = 1; id <= recv_depth; ++id)
    receive(pb::make_send_data(id, 3), "abc");
  BOOST_REQUIRE(out.data.size() == recv_depth);
  for (size_t i = 0; i < out.data.size(); ++i) {
    BOOST_TEST(std::memcmp(out.data[i].data(), "abc", 3) == 0);
    BOOST_TEST(zero_copy(out.data[i]) == (i < recv_depth / 2));
  }
  // Users let go of the views: zero copy again.
  out.data.clear();
  out.queued_bytes = 0;
  receive(pb::make_send_data(100, 3), "abc");
  BOOST_REQUIRE(out.data.size() == 1u);
  BOOST_TEST(zero_copy(out.data[0]));
}

BOOST_AUTO_TEST_CASE(without_the_offer_each_chunk_gets_its_response) {
  for (uint64_t id = 1; id <= 3; ++id)
    receive(pb::make_send_data(id, 1), "z");
  BOOST_REQUIRE(out.posted.size() == 3u);
  for (uint64_t i = 0; i < 3; ++i) {
    auto& res = out.posted[i].msg.response();
    BOOST_TEST(res.request_id() == i + 1);
    BOOST_TEST(res.send_data().also_acked_size() == 0);
  }
  BOOST_TEST(out.ack_flushes == 0);
}

BOOST_AUTO_TEST_CASE(with_the_offer_acks_gather_until_the_flush) {
  receive(hello(pb::protocol_version, true));
  constexpr uint64_t n = 5;
  for (uint64_t id = 1; id <= n; ++id)
    receive(pb::make_send_data(id, 1), "z");
  BOOST_TEST(out.posted.empty());
  BOOST_TEST(out.ack_flushes == 1); // asked once
  core->flush_acks();
  BOOST_REQUIRE(out.posted.size() == 1u);
  auto& res = last_response();
  BOOST_TEST(res.request_id() == 1u);
  BOOST_TEST(pb::status_of(res) == pb::OK);
  BOOST_REQUIRE(res.send_data().also_acked_size() == static_cast<int>(n - 1));
  for (int i = 0; i < static_cast<int>(n - 1); ++i)
    BOOST_TEST(res.send_data().also_acked(i) == static_cast<uint64_t>(i + 2));
  BOOST_TEST(core->stats().merged_acks_sent == n - 1);
  core->flush_acks(); // nothing left
  BOOST_TEST(out.posted.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_full_cumulative_response_goes_at_once) {
  receive(hello(pb::protocol_version, true));
  constexpr auto n = tuning::max_acks_per_response;
  for (uint64_t id = 1; id <= n; ++id)
    receive(pb::make_send_data(id, 0));
  BOOST_REQUIRE(out.posted.size() == 1u); // without a flush
  BOOST_TEST(last_response().send_data().also_acked_size()
             == static_cast<int>(n - 1));
  receive(pb::make_send_data(n + 1, 0));
  BOOST_TEST(out.posted.size() == 1u);
  BOOST_TEST(out.ack_flushes == 2); // the first flush is still asked for
  core->flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == n + 1);
  BOOST_TEST(last_response().send_data().also_acked_size() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// -- acknowledgements on SendData (EXT_PIGGYBACK_ACKS) ------------------------

namespace {

/// A Hello that offers cumulative acks and, if `ride`, acks on SendData.
pb::Message piggyback_hello(bool ride) {
  auto h = hello(pb::protocol_version, true);
  if (ride)
    h.mutable_hello()->set_extensions(pb::EXT_PIGGYBACK_ACKS);
  return h;
}

} // namespace

/// The fixture, plus our own send_data of `len` bytes (answer ignored).
struct piggyback_fixture : fixture {
  void send_ours(size_t len) {
    auto mr = pool->allocate(len, 64, transport::access::all);
    BOOST_REQUIRE(mr);
    core->send_data(*mr, t0, [](caf::expected<uint64_t>) {});
  }
};

BOOST_FIXTURE_TEST_SUITE(piggybacked_acks, piggyback_fixture)

BOOST_AUTO_TEST_CASE(our_hello_offers_acks_on_send_data) {
  BOOST_TEST((our_hello().extensions() & pb::EXT_PIGGYBACK_ACKS) != 0u);
}

BOOST_AUTO_TEST_CASE(gathered_acks_ride_on_our_next_send_data) {
  receive(piggyback_hello(true));
  receive(pb::make_send_data(1, 1), "a");
  receive(pb::make_send_data(2, 1), "b");
  BOOST_TEST(out.posted.empty());
  BOOST_TEST(out.ack_flushes == 1);
  BOOST_TEST(core->acks_may_ride());
  send_ours(8);
  BOOST_REQUIRE(out.posted.size() == 1u);
  auto& sd = out.posted[0].msg.request().send_data();
  BOOST_REQUIRE(sd.acked_size() == 2);
  BOOST_TEST(sd.acked(0) == 1u);
  BOOST_TEST(sd.acked(1) == 2u);
  BOOST_TEST(out.posted[0].payload.size() == 8u);
  BOOST_TEST(core->stats().piggybacked_acks_sent == 2u);
  BOOST_TEST(!core->acks_may_ride());
  // The flush the owner still runs finds nothing to send.
  core->flush_acks();
  BOOST_TEST(out.posted.size() == 1u);
}

BOOST_AUTO_TEST_CASE(a_full_chunk_leaves_the_acks_to_the_flush) {
  receive(piggyback_hello(true));
  receive(pb::make_send_data(1, 1), "a");
  auto chunk_max = max_message_len - pb::max_frame_overhead;
  send_ours(chunk_max);
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_TEST(out.posted[0].msg.request().send_data().acked_size() == 0);
  BOOST_TEST(core->acks_may_ride());
  core->flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == 1u);
  // Room for some: as many as fit ride, the rest waits for the flush.
  for (uint64_t id = 2; id <= 5; ++id)
    receive(pb::make_send_data(id, 1), "z");
  auto room = pb::piggyback_ack_overhead(2);
  send_ours(chunk_max - room);
  BOOST_REQUIRE(out.posted.size() == 3u);
  BOOST_TEST(out.posted[2].msg.request().send_data().acked_size() == 2);
  core->flush_acks();
  BOOST_REQUIRE(out.posted.size() == 4u);
  BOOST_TEST(last_response().request_id() == 4u);
  BOOST_TEST(last_response().send_data().also_acked_size() == 1);
}

// A chunk refused before it goes out (here: too many requests pending)
// takes no acknowledgements with it: the flush still answers them.
BOOST_AUTO_TEST_CASE(a_refused_chunk_leaves_the_acks_to_the_flush) {
  opts.peer_max_pending_requests = 1;
  make_core();
  receive(piggyback_hello(true));
  outcome first;
  pending_send_data(first); // the one request the quota allows
  receive(pb::make_send_data(1, 1), "a");
  BOOST_REQUIRE(core->acks_may_ride());
  auto mr = pool->allocate(8, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> got{uint64_t{0}};
  core->send_data(*mr, t0, [&](caf::expected<uint64_t> r) { got = r; });
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == errc::quota_exceeded);
  BOOST_TEST(out.posted.size() == 1u); // the first request only
  BOOST_TEST(core->acks_may_ride());
  BOOST_TEST(core->stats().piggybacked_acks_sent == 0u);
  core->flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == 1u);
}

BOOST_AUTO_TEST_CASE(without_the_offer_acks_get_a_response) {
  receive(piggyback_hello(false));
  receive(pb::make_send_data(1, 1), "a");
  BOOST_TEST(!core->acks_may_ride());
  send_ours(8);
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_TEST(out.posted[0].msg.request().send_data().acked_size() == 0);
  core->flush_acks();
  BOOST_REQUIRE(out.posted.size() == 2u);
  BOOST_TEST(last_response().request_id() == 1u);
  BOOST_TEST(core->stats().piggybacked_acks_sent == 0u);
}

BOOST_AUTO_TEST_CASE(acks_on_the_peers_send_data_complete_our_requests) {
  outcome a, b, c;
  auto ia = pending_send_data(a);
  auto ib = pending_send_data(b);
  pending_send_data(c);
  auto msg = pb::make_send_data(77, 3);
  auto* sd = msg.mutable_request()->mutable_send_data();
  sd->add_acked(ia);
  sd->add_acked(ib);
  sd->add_acked(12345); // not ours
  receive(msg, "xyz");
  BOOST_TEST(a.called);
  BOOST_TEST(!a.err);
  BOOST_TEST(b.called);
  BOOST_TEST(!b.err);
  BOOST_TEST(!c.called);
  BOOST_TEST(core->stats().piggybacked_acks_received == 2u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  // The SendData that carried them is served as usual.
  BOOST_REQUIRE(out.data.size() == 1u);
  BOOST_TEST(out.data[0].size() == 3u);
}

BOOST_AUTO_TEST_CASE(too_many_acks_on_a_send_data_complete_nothing) {
  outcome a;
  auto ia = pending_send_data(a);
  auto msg = pb::make_send_data(77, 1);
  auto* sd = msg.mutable_request()->mutable_send_data();
  for (size_t i = 0; i <= tuning::max_acks_per_response; ++i)
    sd->add_acked(ia);
  receive(msg, "x");
  BOOST_TEST(!a.called);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(core->stats().piggybacked_acks_received == 0u);
  BOOST_REQUIRE(out.data.size() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- requests to the peer -----------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(requests_out, fixture)

BOOST_AUTO_TEST_CASE(also_acked_completes_pending_requests) {
  outcome a, b, c;
  auto ia = pending_send_data(a);
  auto ib = pending_send_data(b);
  auto ic = pending_send_data(c);
  BOOST_TEST(out.posted.size() == 3u);
  BOOST_TEST(out.sweeps >= 1);
  BOOST_TEST(core->stats().pending_requests == 3u);
  receive(pb::make_send_data_acks({ia, ib, ic, 12345}));
  BOOST_TEST(a.called);
  BOOST_TEST(b.called);
  BOOST_TEST(c.called);
  BOOST_TEST(!a.err);
  BOOST_TEST(!c.err);
  BOOST_TEST(core->stats().pending_requests == 0u);
  BOOST_TEST(core->stats().merged_acks_received == 2u);
  BOOST_TEST(core->stats().protocol_errors == 1u); // 12345
}

BOOST_AUTO_TEST_CASE(a_refusal_acknowledges_nothing_more) {
  outcome a, b;
  auto ia = pending_send_data(a);
  auto ib = pending_send_data(b);
  auto res = pb::make_send_data_response(ia, pb::QUOTA_EXCEEDED, "no");
  res.mutable_response()->mutable_send_data()->add_also_acked(ib);
  receive(res);
  BOOST_TEST(a.called);
  BOOST_TEST(!b.called);
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(send_data_completes_when_every_chunk_is_acked) {
  auto chunk_max = max_message_len - pb::max_frame_overhead;
  auto mr = pool->allocate(2 * chunk_max + 10, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> result = uint64_t{0};
  bool done = false;
  core->send_data(*mr, t0, [&](caf::expected<uint64_t> r) {
    done = true;
    result = std::move(r);
  });
  BOOST_REQUIRE(out.posted.size() == 3u);
  std::vector<uint64_t> ids;
  for (auto& f : out.posted) {
    BOOST_REQUIRE(f.msg.request().has_send_data());
    ids.push_back(f.msg.request().request_id());
  }
  BOOST_TEST(out.posted[0].payload.size() == chunk_max);
  BOOST_TEST(out.posted[2].payload.size() == 10u);
  receive(pb::make_send_data_acks({ids[0], ids[1]}));
  BOOST_TEST(!done);
  receive(pb::make_send_data_acks({ids[2]}));
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(result);
  BOOST_TEST(*result == 2 * chunk_max + 10);
}

BOOST_AUTO_TEST_CASE(expire_times_out_requests_at_their_deadline) {
  outcome o;
  auto id = pending_send_data(o);
  auto timeout = milliseconds{opts.request_timeout_ms};
  auto next = core->expire(t0 + timeout - milliseconds{1});
  BOOST_TEST(!o.called);
  BOOST_TEST((next == t0 + timeout));
  next = core->expire(t0 + timeout);
  BOOST_REQUIRE(o.called);
  BOOST_TEST(code_of(o.err) == errc::request_timeout);
  BOOST_TEST((next == agent_core::time_point::max()));
  BOOST_TEST(core->stats().pending_requests == 0u);
  // Its answer comes too late: counted and dropped.
  receive(pb::make_send_data_response(id, pb::OK, {}));
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(a_late_ok_alloc_answer_is_released) {
  caf::error err;
  core->alloc_remote(64, 64, t0, [&](caf::expected<mr_token> t) {
    BOOST_REQUIRE(!t);
    err = t.error();
  });
  BOOST_REQUIRE(out.posted.size() == 1u);
  auto id = out.posted[0].msg.request().request_id();
  core->expire(t0 + milliseconds{opts.request_timeout_ms});
  BOOST_TEST(code_of(err) == errc::request_timeout);
  auto token = pb::make_token(0xabc0, 64, 77);
  receive(pb::make_alloc_mr_response(id, pb::OK, {}, token));
  BOOST_REQUIRE(out.posted.size() == 2u);
  auto& req = out.posted[1].msg.request();
  BOOST_REQUIRE(req.has_release_mr());
  BOOST_TEST(req.release_mr().token().addr() == 0xabc0u);
  BOOST_TEST(req.release_mr().token().rkey() == 77u);
  BOOST_TEST(core->stats().protocol_errors == 0u);
  // Only once: a second answer is an unknown one.
  receive(pb::make_alloc_mr_response(id, pb::OK, {}, token));
  BOOST_TEST(out.posted.size() == 2u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(alloc_remote_answers_the_token) {
  caf::expected<mr_token> got = mr_token{};
  core->alloc_remote(64, 64, t0, [&](caf::expected<mr_token> t) { got = t; });
  auto id = out.posted[0].msg.request().request_id();
  receive(
      pb::make_alloc_mr_response(id, pb::OK, {}, pb::make_token(0x40, 64, 5)));
  BOOST_REQUIRE(got);
  BOOST_TEST(got->addr == 0x40u);
  core->alloc_remote(64, 64, t0, [&](caf::expected<mr_token> t) { got = t; });
  id = out.posted[1].msg.request().request_id();
  receive(pb::make_alloc_mr_response(id, pb::SIZE_LIMIT, "too big"));
  BOOST_REQUIRE(!got);
  BOOST_TEST(code_of(got.error()) == errc::size_limit);
}

BOOST_AUTO_TEST_CASE(too_many_pending_requests_fail_at_once) {
  opts.peer_max_pending_requests = 2;
  make_core();
  outcome a, b, c;
  pending_send_data(a);
  pending_send_data(b);
  pending_send_data(c);
  BOOST_TEST(!a.called);
  BOOST_REQUIRE(c.called);
  BOOST_TEST(code_of(c.err) == errc::quota_exceeded);
  BOOST_TEST(out.posted.size() == 2u);
}

BOOST_AUTO_TEST_CASE(close_fails_pending_and_owned_memory_returns) {
  outcome o;
  pending_send_data(o, 256);
  {
    receive(pb::make_alloc_mr(1, 1024, 64)); // held for the peer
    auto lent = pool->allocate(512, 64, transport::access::all);
    BOOST_REQUIRE(lent);
    caf::error lend_err;
    core->lend(*lent, t0,
               [&](caf::expected<mr_token> t) { lend_err = t.error(); });
    BOOST_TEST(core->stats().owned_mrs == 2u);
    auto err = make_error(errc::peer_gone, "test");
    core->close(err);
    BOOST_TEST(core->closed());
    BOOST_REQUIRE(o.called);
    BOOST_TEST(code_of(o.err) == errc::peer_gone);
    BOOST_TEST(code_of(lend_err) == errc::peer_gone);
    // The failed lend keeps the region while the connection closes.
    BOOST_TEST(core->stats().owned_mrs == 2u);
  }
  out.posted.clear(); // payloads of our sends
  BOOST_TEST(pool->stats().bytes_in_use > 0u);
  auto owned = core->take_owned();
  BOOST_TEST(owned.size() == 2u);
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().peer_alloc_bytes == 0u);
  BOOST_TEST(pool->stats().bytes_in_use > 0u);
  owned.clear();
  BOOST_TEST(pool->stats().bytes_in_use == 0u);
  // Closed: new requests fail at once.
  outcome late;
  pending_send_data(late);
  BOOST_REQUIRE(late.called);
  BOOST_TEST(code_of(late.err) == errc::peer_gone);
  BOOST_TEST(out.posted.empty());
}

BOOST_AUTO_TEST_CASE(a_failed_lend_forgets_the_region) {
  auto lent = pool->allocate(512, 64, transport::access::all);
  BOOST_REQUIRE(lent);
  caf::error err;
  core->lend(*lent, t0, [&](caf::expected<mr_token> t) { err = t.error(); });
  BOOST_TEST(core->stats().owned_mrs == 1u);
  core->lend(*lent, t0, [&](caf::expected<mr_token> t) { err = t.error(); });
  BOOST_TEST(code_of(err) == errc::already_sent);
  auto id = out.posted[0].msg.request().request_id();
  receive(pb::make_send_mr_response(id, pb::QUOTA_EXCEEDED, "full"));
  BOOST_TEST(code_of(err) == errc::quota_exceeded);
  BOOST_TEST(core->stats().owned_mrs == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- rate-limited logging and the noise budget (issue 16) ---------------------

namespace {

/// A fixture whose log lines are captured.
struct logging_fixture : fixture {
  attached_capture capture;

  const std::vector<std::string>& lines() const {
    return capture.sink->lines;
  }

  /// Hands the same frame to the core `n` times at `now`.
  void receive_n(const pb::Message& msg, size_t n, agent_core::time_point now) {
    auto buf = frame(msg);
    for (size_t i = 0; i < n; ++i)
      core->on_frame(buf, now);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(log_budget_and_noise, logging_fixture)

BOOST_AUTO_TEST_CASE(a_flood_of_unknown_responses_is_bounded_and_disconnected) {
  opts.peer_max_log_lines = 5;
  opts.peer_max_noise = 100;
  make_core();
  // 30 000 responses to a request we never made, all at one instant.
  receive_n(pb::make_send_data_response(777, pb::OK, {}), 30000, t0);
  BOOST_TEST(core->stats().protocol_errors == 30000u);
  BOOST_TEST(lines().size() == 6u); // 5 drops + the disconnect
  BOOST_TEST(capture.sink->count("dropped a response for unknown request")
             == 5u);
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
  auto reason = render(out.disconnects[0]);
  BOOST_TEST(reason.find("peer-max-noise") != std::string::npos);
  BOOST_TEST(capture.sink->count("disconnecting the peer") == 1u);
  BOOST_TEST(capture.sink->count("the last a response for an unknown request")
             == 1u);
  // The owner closes: one summary line with the suppressed count.
  core->close(make_error(errc::peer_gone, "test"));
  BOOST_REQUIRE(lines().size() == 7u);
  BOOST_TEST(lines().back().find("29995 lines about this peer were suppressed")
             != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_peer_budget_renews_each_window_with_a_note) {
  opts.peer_max_log_lines = 2;
  opts.peer_log_window_ms = 1000;
  opts.peer_max_violations = 100;
  make_core();
  auto unknown = pb::make_release_mr(1, pb::make_token(0x1000, 64, 42));
  receive_n(unknown, 5, t0);
  BOOST_TEST(lines().size() == 2u);
  BOOST_TEST(out.posted.size() == 5u); // every refusal is still answered
  receive_n(unknown, 1, t0 + milliseconds{999});
  BOOST_TEST(lines().size() == 2u);
  receive_n(unknown, 1, t0 + milliseconds{1000});
  BOOST_REQUIRE(lines().size() == 3u);
  BOOST_TEST(lines().back().find("rejected ReleaseMR of an unknown token")
             != std::string::npos);
  BOOST_TEST(lines().back().find("(4 similar lines suppressed)")
             != std::string::npos);
  receive_n(unknown, 1, t0 + milliseconds{1000});
  BOOST_REQUIRE(lines().size() == 4u);
  BOOST_TEST(lines().back().find("suppressed") == std::string::npos);
  BOOST_TEST(out.disconnects.empty());
  // Nothing held back: no summary at close.
  core->close(make_error(errc::peer_gone, "test"));
  BOOST_TEST(lines().size() == 4u);
}

BOOST_AUTO_TEST_CASE(the_shared_budget_bounds_the_lines_of_all_peers) {
  opts.peer_max_log_lines = 2;
  opts.peer_log_window_ms = 1000;
  opts.peer_max_violations = 100;
  shared_log_budget("agent").reset(3, milliseconds{1000});
  recording_sink out2;
  make_core();
  agent_core other{out2, opts,
                   transport::link_params{max_message_len, recv_depth, "p2"},
                   pool};
  auto unknown = frame(pb::make_release_mr(1, pb::make_token(0x1000, 64, 42)));
  for (int i = 0; i < 4; ++i) {
    core->on_frame(unknown, t0);
    other.on_frame(unknown, t0);
  }
  // Each peer's budget admits 2, the shared one 3 of those 4.
  BOOST_TEST(lines().size() == 3u);
  BOOST_TEST(capture.sink->count("agent peer:") == 2u);
  BOOST_TEST(capture.sink->count("agent p2:") == 1u);
  // The next window's first line reports what its peer's budget held back
  // (2) and what the shared one did (p2's second line).
  core->on_frame(unknown, t0 + milliseconds{1000});
  BOOST_REQUIRE(lines().size() == 4u);
  BOOST_TEST(lines().back().find("agent peer:") != std::string::npos);
  BOOST_TEST(lines().back().find("(3 similar lines suppressed)")
             != std::string::npos);
  // p2's two lines held back by its own budget: in its summary.
  other.close(make_error(errc::peer_gone, "test"));
  BOOST_REQUIRE(lines().size() == 5u);
  BOOST_TEST(lines().back().find("agent p2: 2 lines about this peer were "
                                 "suppressed")
             != std::string::npos);
  core->close(make_error(errc::peer_gone, "test"));
  BOOST_TEST(lines().size() == 5u);
}

BOOST_AUTO_TEST_CASE(noise_counts_in_a_window_not_in_a_row) {
  opts.peer_max_noise = 10;
  opts.peer_noise_window_ms = 1000;
  make_core();
  auto stray = pb::make_send_data_response(4242, pb::OK, {});
  receive_n(stray, 10, t0);
  BOOST_TEST(out.disconnects.empty());
  // A new window: 10 more are fine.
  receive_n(stray, 10, t0 + milliseconds{1000});
  BOOST_TEST(out.disconnects.empty());
  // Valid requests between the noise do not reset the budget, unlike
  // peer-max-violations: refusals with an accepted request after every two
  // never reach 3 in a row but are noise.
  auto now = t0 + milliseconds{2000};
  auto unknown = pb::make_release_mr(1, pb::make_token(0x1000, 64, 42));
  for (uint64_t i = 0; i < 5; ++i) {
    receive_n(unknown, 2, now);
    auto ok = frame(pb::make_send_mr(100 + i, pb::SendMR::LOCAL,
                                     pb::make_token(0x10 * (i + 1), 8, 3)));
    core->on_frame(ok, now);
    BOOST_TEST(pb::status_of(last_response()) == pb::OK);
    out.remote_mrs.clear(); // the user claims the token
  }
  BOOST_TEST(out.disconnects.empty()); // 10 pieces of noise
  receive_n(unknown, 1, now);
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
  BOOST_TEST(render(out.disconnects[0]).find("peer-max-noise")
             != std::string::npos);
  // More noise before the owner closes: no second disconnect, no line.
  auto before = lines().size();
  receive_n(unknown, 5, now);
  BOOST_TEST(out.disconnects.size() == 1u);
  BOOST_TEST(capture.sink->count("disconnecting the peer") == 1u);
  BOOST_TEST(lines().size() <= before + 5);
}

BOOST_AUTO_TEST_CASE(late_responses_are_not_noise) {
  opts.peer_max_noise = 2;
  opts.peer_max_pending_requests = 16;
  make_core();
  std::vector<outcome> outcomes(8);
  std::vector<uint64_t> ids;
  for (auto& o : outcomes)
    ids.push_back(pending_send_data(o));
  core->expire(t0 + milliseconds{opts.request_timeout_ms});
  for (auto& o : outcomes)
    BOOST_TEST(code_of(o.err) == errc::request_timeout);
  auto later = t0 + milliseconds{opts.request_timeout_ms + 1};
  // Late answers, alone and acknowledged along with a pending request: 8.
  for (size_t i = 0; i < 4; ++i)
    core->on_frame(frame(pb::make_send_data_response(ids[i], pb::OK, {})),
                   later);
  outcome fresh;
  auto pending = pending_send_data(fresh);
  core->on_frame(
      frame(pb::make_send_data_acks({pending, ids[4], ids[5], ids[6], ids[7]})),
      later);
  BOOST_TEST(fresh.called);
  BOOST_TEST(!fresh.err);
  BOOST_TEST(out.disconnects.empty());
  BOOST_TEST(capture.sink->count("dropped a late response") == 4u);
  // One late answer per request: a second one is noise.
  receive_n(pb::make_send_data_response(ids[0], pb::OK, {}), 2, later);
  BOOST_TEST(out.disconnects.empty());
  receive_n(pb::make_send_data_response(ids[1], pb::OK, {}), 1, later);
  BOOST_REQUIRE(out.disconnects.size() == 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
}

BOOST_AUTO_TEST_CASE(lines_below_the_level_spend_no_budget) {
  opts.peer_max_log_lines = 1;
  make_core();
  outcome o;
  auto id = pending_send_data(o);
  core->expire(t0 + milliseconds{opts.request_timeout_ms});
  log().set_level(spdlog::level::warn);
  receive(pb::make_send_data_response(id, pb::OK, {})); // an info line
  log().set_level(spdlog::level::info);
  BOOST_TEST(lines().empty());
  receive(pb::make_send_data_response(id, pb::OK, {})); // now unknown
  BOOST_REQUIRE(lines().size() == 1u);
  BOOST_TEST(lines()[0].find("suppressed") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

// -- graceful close and keepalive (issue 15) ----------------------------------

namespace {

/// A Hello from the peer that offers Goodbye and keepalive as given.
pb::Message hello_offering(bool goodbye, bool keepalive) {
  auto msg = hello(pb::protocol_version, true);
  msg.mutable_hello()->set_goodbye(goodbye);
  msg.mutable_hello()->set_keepalive(keepalive);
  return msg;
}

/// Posted frames that are Pings.
size_t pings(const recording_sink& out) {
  return static_cast<size_t>(std::count_if(
      out.posted.begin(), out.posted.end(), [](const posted_frame& f) {
        return f.msg.has_request() && f.msg.request().has_ping();
      }));
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(close_and_keepalive, fixture)

BOOST_AUTO_TEST_CASE(our_hello_offers_goodbye_and_keepalive) {
  core->start();
  BOOST_REQUIRE(out.posted.size() == 1u);
  BOOST_TEST(out.posted[0].msg.hello().goodbye());
  BOOST_TEST(out.posted[0].msg.hello().keepalive());
}

BOOST_AUTO_TEST_CASE(a_peer_that_does_not_offer_goodbye_gets_none) {
  receive(hello_offering(false, false));
  BOOST_TEST(!core->peer_offers_goodbye());
  auto frame = core->goodbye_frame("bye");
  BOOST_REQUIRE(!frame);
  BOOST_TEST(code_of(frame.error()) == errc::closed);
}

BOOST_AUTO_TEST_CASE(goodbye_frames_decode_as_goodbye) {
  receive(hello_offering(true, false));
  auto frame = core->goodbye_frame("closed by the application");
  BOOST_REQUIRE(frame);
  pb::Message msg;
  auto res = pb::decode(frame->data(), frame->size(), max_message_len, msg);
  BOOST_TEST(res.code == errc::none);
  BOOST_REQUIRE(msg.has_goodbye());
  BOOST_TEST(msg.goodbye().reason() == "closed by the application");
}

BOOST_AUTO_TEST_CASE(the_peers_goodbye_is_noted_with_a_sanitized_reason) {
  receive(hello_offering(true, true));
  BOOST_TEST(!core->peer_said_goodbye());
  auto bye = pb::make_goodbye(std::string(500, 'x') + "\n");
  receive(bye);
  BOOST_TEST(core->peer_said_goodbye());
  BOOST_TEST(core->goodbye_reason().size() == 200u);
  BOOST_TEST(core->stats().protocol_errors == 0u);
  // We say no Goodbye to a peer that said its own.
  BOOST_TEST(!core->goodbye_frame("bye"));
}

BOOST_AUTO_TEST_CASE(a_ping_from_the_peer_is_answered_with_a_pong) {
  receive(pb::make_ping(77));
  const auto& res = last_response();
  BOOST_TEST(res.request_id() == 77u);
  BOOST_TEST(res.has_pong());
  BOOST_TEST(pb::status_of(res) == pb::OK);
  BOOST_TEST(core->stats().rejected_requests == 0u);
}

BOOST_AUTO_TEST_CASE(an_idle_peer_is_pinged_then_dropped) {
  opts.keepalive_ms = 100;
  make_core();
  receive(hello_offering(true, true)); // heard at t0
  BOOST_REQUIRE(core->keepalive_active());
  auto step = core->keepalive(t0 + milliseconds{50});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == t0 + milliseconds{100}));
  BOOST_TEST(pings(out) == 0u);
  // keepalive-ms of silence: one Ping, the next look keepalive-ms later.
  step = core->keepalive(t0 + milliseconds{100});
  BOOST_TEST(!step.dead);
  BOOST_TEST(pings(out) == 1u);
  BOOST_TEST(core->stats().keepalive_pings == 1u);
  BOOST_TEST((step.next == t0 + milliseconds{200}));
  // Still silent before then: no second Ping.
  step = core->keepalive(t0 + milliseconds{150});
  BOOST_TEST(!step.dead);
  BOOST_TEST(pings(out) == 1u);
  // Silent for keepalive-ms after the Ping: dead, and the error says what
  // to do.
  step = core->keepalive(t0 + milliseconds{200});
  BOOST_REQUIRE(step.dead);
  BOOST_TEST(code_of(step.dead) == errc::peer_gone);
  BOOST_TEST(what_of(step.dead).find("keepalive-ms") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_pong_or_any_frame_keeps_the_peer_alive) {
  opts.keepalive_ms = 100;
  make_core();
  receive(hello_offering(true, true));
  core->keepalive(t0 + milliseconds{100});
  BOOST_REQUIRE(pings(out) == 1u);
  auto id = out.posted.back().msg.request().request_id();
  // The Pong arrives late but within the bound.
  core->on_frame(frame(pb::make_pong(id)), t0 + milliseconds{190});
  auto step = core->keepalive(t0 + milliseconds{200});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == t0 + milliseconds{290}));
  BOOST_TEST(core->stats().protocol_errors == 0u);
  // Frames keep coming: no Ping at all (a busy connection sends none).
  for (int i = 1; i <= 10; ++i) {
    core->on_frame(frame(pb::make_ping(1000 + i)),
                   t0 + milliseconds{190 + 80 * i});
    step = core->keepalive(t0 + milliseconds{190 + 80 * i + 50});
    BOOST_TEST(!step.dead);
  }
  BOOST_TEST(pings(out) == 1u);
}

BOOST_AUTO_TEST_CASE(a_pong_nobody_asked_for_is_noise) {
  receive(pb::make_pong(12345));
  BOOST_TEST(core->stats().protocol_errors == 1u);
}

BOOST_AUTO_TEST_CASE(keepalive_is_off_with_zero_or_a_peer_without_it) {
  opts.keepalive_ms = 0;
  make_core();
  receive(hello_offering(true, true));
  BOOST_TEST(!core->keepalive_active());
  auto step = core->keepalive(t0 + std::chrono::hours{1});
  BOOST_TEST(!step.dead);
  BOOST_TEST((step.next == agent_core::time_point::max()));
  opts.keepalive_ms = 100;
  make_core();
  receive(hello_offering(true, false));
  BOOST_TEST(!core->keepalive_active());
  step = core->keepalive(t0 + std::chrono::hours{1});
  BOOST_TEST(!step.dead);
  BOOST_TEST(pings(out) == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(extensions, fixture)

BOOST_AUTO_TEST_CASE(a_write_imm_we_did_not_offer_is_dropped_as_noise) {
  opts.immediate_data = false;
  make_core();
  core->on_write_imm(5, 64, t0);
  BOOST_TEST(out.imms.empty());
  BOOST_TEST(core->stats().imms_dropped == 1u);
  BOOST_TEST(core->stats().protocol_errors == 1u);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_CASE(write_imms_over_the_queue_limit_are_dropped) {
  opts.peer_max_queued_imms = 2;
  make_core();
  for (uint32_t i = 0; i < 3; ++i)
    core->on_write_imm(i, 64, t0);
  BOOST_TEST(out.imms == (std::vector<uint32_t>{0, 1}));
  BOOST_TEST(core->stats().imms_dropped == 1u);
}

BOOST_AUTO_TEST_CASE(a_send_data_value_we_did_not_offer_is_refused) {
  opts.immediate_data = false;
  make_core();
  receive(pb::make_send_data(42, 3, 9), "abc");
  BOOST_TEST(out.data.empty());
  BOOST_TEST(last_response().request_id() == 42u);
  BOOST_TEST(pb::status_of(last_response()) == pb::MALFORMED);
}

BOOST_AUTO_TEST_CASE(a_send_data_value_waits_for_the_hello) {
  auto mr = pool->allocate(10, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> result{uint64_t{0}};
  bool done = false;
  core->send_data(
      *mr, t0,
      [&](caf::expected<uint64_t> x) {
        done = true;
        result = std::move(x);
      },
      uint32_t{77});
  BOOST_TEST(out.posted.empty());
  // A Hello that does not offer immediate data: not_negotiated.
  receive(hello(pb::protocol_version, true));
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(!result);
  BOOST_TEST(code_of(result.error()) == errc::not_negotiated);
  BOOST_TEST(out.posted.empty());
  // Once offered, the value travels in SendData.imm.
  auto h = hello(pb::protocol_version, true);
  h.mutable_hello()->set_extensions(pb::EXT_IMMEDIATE_DATA);
  receive(h);
  done = false;
  core->send_data(
      *mr, t0, [&](caf::expected<uint64_t>) { done = true; }, uint32_t{78});
  BOOST_REQUIRE(out.posted.size() == 1u);
  const auto& sd = out.posted[0].msg.request().send_data();
  BOOST_TEST(sd.has_imm());
  BOOST_TEST(sd.imm() == 78u);
  BOOST_TEST(sd.len() == 10u);
}

BOOST_AUTO_TEST_CASE(an_operation_waiting_for_the_hello_times_out) {
  caf::error got;
  bool called = false;
  core->when_offered(pb::EXT_MR_TAGS, "tagged send_mr", t0,
                     [&](const caf::error& err) {
                       called = true;
                       got = err;
                     });
  BOOST_TEST(!called);
  BOOST_TEST(out.sweeps > 0);
  auto next = core->expire(t0 + milliseconds{opts.request_timeout_ms - 1});
  BOOST_TEST(!called);
  BOOST_TEST((next == t0 + milliseconds{opts.request_timeout_ms}));
  core->expire(t0 + milliseconds{opts.request_timeout_ms});
  BOOST_REQUIRE(called);
  BOOST_TEST(code_of(got) == errc::request_timeout);
}

BOOST_AUTO_TEST_CASE(a_lease_is_revoked_at_its_end_unless_renewed) {
  auto h = hello(pb::protocol_version, true);
  h.mutable_hello()->set_extensions(pb::EXT_LEASES);
  receive(h);
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<mr_token> lent{mr_token{}};
  core->lend(
      *mr, t0, [&](caf::expected<mr_token> x) { lent = std::move(x); }, 0,
      1000);
  BOOST_REQUIRE(out.posted.size() == 1u);
  const auto& req = out.posted[0].msg.request();
  BOOST_TEST(req.send_mr().lease_ms() == 1000u);
  BOOST_TEST(req.send_mr().token().rkey() != mr->rkey());
  receive(pb::make_send_mr_response(req.request_id(), pb::OK, {}));
  BOOST_REQUIRE(lent);
  BOOST_TEST(lent->rkey == req.send_mr().token().rkey());
  BOOST_TEST(core->stats().owned_mrs == 1u);
  auto tok = pb::make_token(lent->addr, lent->len, lent->rkey);
  // Renewed at 500 ms for at most the original 1000 ms: ends at 1500 ms.
  core->on_frame(frame(pb::make_renew_lease(77, tok, 5000)),
                 t0 + milliseconds{500});
  BOOST_TEST(last_response().request_id() == 77u);
  BOOST_TEST(pb::status_of(last_response()) == pb::OK);
  BOOST_TEST(last_response().renew_lease().lease_ms() == 1000u);
  auto next = core->expire(t0 + milliseconds{1499});
  BOOST_TEST((next == t0 + milliseconds{1500}));
  BOOST_TEST(core->stats().owned_mrs == 1u);
  core->expire(t0 + milliseconds{1500});
  BOOST_TEST(core->stats().owned_mrs == 0u);
  BOOST_TEST(core->stats().leases_expired == 1u);
  // A renewal after the end: UNKNOWN_TOKEN, no disconnect.
  core->on_frame(frame(pb::make_renew_lease(78, tok, 1000)),
                 t0 + milliseconds{1600});
  BOOST_TEST(pb::status_of(last_response()) == pb::UNKNOWN_TOKEN);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_CASE(a_lease_needs_a_peer_that_offers_leases) {
  receive(hello(pb::protocol_version, true));
  auto mr = pool->allocate(256, 64, transport::access::all);
  BOOST_REQUIRE(mr);
  caf::expected<mr_token> lent{mr_token{}};
  core->lend(
      *mr, t0, [&](caf::expected<mr_token> x) { lent = std::move(x); }, 0,
      1000);
  BOOST_REQUIRE(!lent);
  BOOST_TEST(code_of(lent.error()) == errc::not_negotiated);
  BOOST_TEST(out.posted.empty());
  BOOST_TEST(core->stats().owned_mrs == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- rendezvous (issue 13) ----------------------------------------------------

namespace {

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

} // namespace

BOOST_FIXTURE_TEST_SUITE(rendezvous, rendezvous_fixture)

BOOST_AUTO_TEST_CASE(our_hello_offers_rendezvous_up_to_the_max_message_len) {
  auto& h = our_hello();
  BOOST_TEST((h.extensions() & pb::EXT_RENDEZVOUS) != 0u);
  BOOST_TEST(h.max_rendezvous_bytes() == opts.max_message_len_bytes);
  // Eager size = max message length: no offer.
  opts.eager_message_len_bytes = opts.max_message_len_bytes;
  make_core();
  out.posted.clear();
  core->start();
  BOOST_TEST((out.posted.front().msg.hello().extensions() & pb::EXT_RENDEZVOUS)
             == 0u);
  BOOST_TEST(out.posted.front().msg.hello().max_rendezvous_bytes() == 0u);
}

// An eager chunk that arrives while an earlier piece is being read waits
// for it: the user gets them in sending order, each acknowledged once it is
// delivered, and the bytes held meanwhile count against the peer.
BOOST_AUTO_TEST_CASE(an_eager_chunk_waits_behind_a_piece_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(rendezvous(1, 0x10000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  BOOST_TEST(out.reads[0].src.addr == 0x10000u);
  BOOST_TEST(out.reads[0].src.len == 8000u);
  BOOST_TEST(out.reads[0].src.rkey == 9u);
  BOOST_TEST(out.reads[0].dst.size() == 8000u);
  receive(pb::make_send_data(2, 3), "abc");
  BOOST_TEST(out.data.empty());
  BOOST_TEST(answers().empty());
  BOOST_TEST(core->stats().rendezvous_bytes == 8003u);
  std::memset(out.reads[0].dst.data(), 0x5a, 8000);
  out.reads[0].done(caf::error{});
  BOOST_REQUIRE_EQUAL(out.data.size(), 2u);
  BOOST_TEST(out.data[0].size() == 8000u);
  BOOST_TEST(out.data[0].data()[7999] == 0x5a);
  BOOST_TEST(std::string(reinterpret_cast<const char*>(out.data[1].data()), 3)
             == "abc");
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 2u);
  BOOST_TEST(a[0].first == 1u);
  BOOST_TEST(a[0].second == pb::OK);
  BOOST_TEST(a[1].first == 2u);
  auto s = core->stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  out.data.clear();
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

// A READ that fails is answered with an error status and counted; the
// chunks behind it are delivered.
BOOST_AUTO_TEST_CASE(a_failed_read_is_answered_and_skipped) {
  receive(rendezvous(1, 0x10000, 5000));
  receive(pb::make_send_data(2, 2), "ok");
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  out.reads[0].done(make_error(errc::remote_access_error, "bad rkey"));
  BOOST_REQUIRE_EQUAL(out.data.size(), 1u);
  BOOST_TEST(out.data[0].size() == 2u);
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 2u);
  BOOST_TEST(a[0].first == 2u);
  BOOST_TEST(a[0].second == pb::OK);
  BOOST_TEST(a[1].first == 1u);
  BOOST_TEST(a[1].second == pb::UNKNOWN_TOKEN);
  BOOST_TEST(core->stats().rejected_requests == 1u);
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
}

// Closing with a READ in flight drops the piece; its late completion is
// ignored, and the memory returns once the transport lets go of it.
BOOST_AUTO_TEST_CASE(close_drops_pieces_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(rendezvous(1, 0x10000, 6000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  core->close(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
  out.reads[0].done(caf::error{});
  BOOST_TEST(out.data.empty());
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

// To a peer that offers rendezvous, send_data sends header-only pieces of
// up to the peer's max_rendezvous_bytes naming our memory through a
// registration of its own; what fits an eager frame goes eagerly.
BOOST_AUTO_TEST_CASE(send_data_goes_by_rendezvous_to_a_peer_that_offers_it) {
  auto h = hello(pb::protocol_version, false);
  h.mutable_hello()->set_extensions(pb::EXT_RENDEZVOUS);
  h.mutable_hello()->set_max_rendezvous_bytes(16384);
  receive(h);
  auto mr = pool->allocate(40000, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  caf::expected<uint64_t> sent{uint64_t{0}};
  bool done = false;
  core->send_data(*mr, t0, [&](caf::expected<uint64_t> x) {
    sent = std::move(x);
    done = true;
  });
  std::vector<uint64_t> ids;
  uint64_t offset = 0;
  for (auto& f : out.posted) {
    BOOST_REQUIRE(f.msg.has_request());
    auto& sd = f.msg.request().send_data();
    BOOST_REQUIRE(sd.has_source());
    BOOST_TEST(!f.payload.valid());
    BOOST_TEST(sd.source().addr() == mr->addr() + offset);
    BOOST_TEST(sd.source().len() == sd.len());
    BOOST_TEST(sd.source().rkey() != mr->rkey());
    offset += sd.len();
    ids.push_back(f.msg.request().request_id());
  }
  BOOST_TEST(offset == 40000u);
  BOOST_REQUIRE_EQUAL(ids.size(), 3u);
  BOOST_TEST(core->stats().rendezvous_sent == 3u);
  for (auto id : ids)
    receive(pb::make_send_data_response(id, pb::OK, {}));
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(sent);
  BOOST_TEST(*sent == 40000u);
}

// A peer whose Hello does not offer it gets eager chunks only.
BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_eager_chunks) {
  receive(hello(pb::protocol_version, false));
  auto mr = pool->allocate(10000, 64, transport::access::local_write);
  BOOST_REQUIRE(mr);
  core->send_data(*mr, t0, [](caf::expected<uint64_t>) {});
  BOOST_REQUIRE(!out.posted.empty());
  for (auto& f : out.posted) {
    BOOST_TEST(!f.msg.request().send_data().has_source());
    BOOST_TEST(f.payload.size() == f.msg.request().send_data().len());
  }
  BOOST_TEST(out.posted.size() == 3u); // 4066 + 4066 + 1868
  BOOST_TEST(core->stats().rendezvous_sent == 0u);
}

BOOST_AUTO_TEST_SUITE_END()

// -- rendezvous actor messages (issue 14) -------------------------------------

namespace {

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

} // namespace

BOOST_FIXTURE_TEST_SUITE(actor_rendezvous, actor_rendezvous_fixture)

BOOST_AUTO_TEST_CASE(offered_with_remote_actors_and_rendezvous_only) {
  core->start();
  auto ext = out.posted.front().msg.hello().extensions();
  BOOST_TEST((ext & pb::EXT_ACTOR_RENDEZVOUS) != 0u);
  opts.remote_actors = false;
  make_core();
  out.posted.clear();
  core->start();
  ext = out.posted.front().msg.hello().extensions();
  BOOST_TEST((ext & pb::EXT_ACTOR_RENDEZVOUS) == 0u);
  opts.remote_actors = true;
  opts.eager_message_len_bytes = opts.max_message_len_bytes;
  make_core();
  out.posted.clear();
  core->start();
  ext = out.posted.front().msg.hello().extensions();
  BOOST_TEST((ext & pb::EXT_ACTOR_RENDEZVOUS) == 0u);
}

// One header-only request names a copy of the serialization in memory
// registered for the peer's READ; the peer's answer frees it.
BOOST_AUTO_TEST_CASE(a_large_message_goes_in_one_request_to_a_peer_that_reads) {
  peer_hello(true);
  auto before = pool->stats().bytes_in_use;
  std::string data(10000, 'x');
  data[9999] = 'y';
  BOOST_REQUIRE(
      !core->post_actor_message(5, 6, 7, data.data(), data.size(), false));
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  auto& f = out.posted.front();
  BOOST_REQUIRE(f.msg.has_request());
  BOOST_REQUIRE(f.msg.request().has_actor_message());
  auto& m = f.msg.request().actor_message();
  BOOST_TEST(!f.payload.valid());
  BOOST_TEST(m.target() == 5u);
  BOOST_TEST(m.sender() == 6u);
  BOOST_TEST(m.message_id() == 7u);
  BOOST_TEST(m.len() == 10000u);
  BOOST_TEST(m.total_len() == 0u);
  BOOST_REQUIRE(m.has_source());
  BOOST_TEST(m.source().len() == 10000u);
  auto* copy = reinterpret_cast<const char*>(m.source().addr());
  BOOST_TEST(std::string(copy, 10000) == data);
  BOOST_TEST(pool->stats().bytes_in_use > before);
  BOOST_TEST(core->stats().rendezvous_sent == 1u);
  receive(
      pb::make_send_data_response(f.msg.request().request_id(), pb::OK, {}));
  BOOST_TEST(core->stats().pending_requests == 0u);
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

BOOST_AUTO_TEST_CASE(a_peer_without_the_offer_gets_chunks) {
  peer_hello(false);
  std::string data(10000, 'x');
  BOOST_REQUIRE(
      !core->post_actor_message(5, 6, 7, data.data(), data.size(), false));
  BOOST_TEST(out.posted.size() == 3u); // 4096-byte frames
  for (auto& f : out.posted)
    BOOST_TEST(f.msg.has_actor_message());
  BOOST_TEST(core->stats().rendezvous_sent == 0u);
}

// Actor messages after one being read wait for it: the target's actors
// see them in sending order.
BOOST_AUTO_TEST_CASE(eager_messages_wait_behind_one_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(actor_rendezvous(1, 0x10000, 8000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  BOOST_TEST(out.reads[0].src.addr == 0x10000u);
  BOOST_TEST(out.reads[0].src.len == 8000u);
  BOOST_TEST(out.reads[0].src.rkey == 9u);
  BOOST_TEST(out.reads[0].dst.size() == 8000u);
  receive(actor_eager(3), "abc");
  BOOST_TEST(out.actor_frames.empty());
  BOOST_TEST(answers().empty());
  BOOST_TEST(core->stats().rendezvous_bytes == 8003u);
  std::memset(out.reads[0].dst.data(), 0x5a, 8000);
  out.reads[0].done(caf::error{});
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 2u);
  auto& big = out.actor_frames[0];
  BOOST_TEST(!big.refused);
  BOOST_TEST(big.head.len() == 8000u);
  BOOST_TEST(big.head.target() == 5u);
  BOOST_TEST(big.head.message_id() == 7u);
  BOOST_TEST(!big.head.has_source());
  BOOST_TEST(big.bytes == std::string(8000, '\x5a'));
  BOOST_TEST(out.actor_frames[1].bytes == "abc");
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_TEST(a[0].first == 1u);
  BOOST_TEST(a[0].second == pb::OK);
  auto s = core->stats();
  BOOST_TEST(s.rendezvous_read == 1u);
  BOOST_TEST(s.rendezvous_bytes == 0u);
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
  // Nothing waits now: the next eager message goes straight through.
  receive(actor_eager(2), "ok");
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 3u);
}

// A READ that fails is answered with an error and refused in its turn (so
// a request among it fails to its sender and its credit is counted).
BOOST_AUTO_TEST_CASE(a_failed_read_is_refused_in_order) {
  receive(actor_rendezvous(1, 0x10000, 5000, 5000));
  receive(actor_eager(2), "ok");
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  out.reads[0].done(make_error(errc::remote_access_error, "bad rkey"));
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 2u);
  BOOST_TEST(out.actor_frames[0].refused);
  BOOST_TEST(out.actor_frames[0].head.len() == 5000u);
  BOOST_TEST(!out.actor_frames[1].refused);
  BOOST_TEST(out.actor_frames[1].bytes == "ok");
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_TEST(a[0].second == pb::UNKNOWN_TOKEN);
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
}

// Hostile rendezvous frames: answered with an error status, never read,
// counted as violations; one over our limit is refused to its sender.
BOOST_AUTO_TEST_CASE(hostile_rendezvous_messages_are_refused_without_reading) {
  opts.actor_max_message_bytes = 50000;
  opts.peer_max_violations = 100;
  make_core();
  receive(actor_rendezvous(1, 0x10000, 100, 100));   // fits an eager frame
  receive(actor_rendezvous(2, 0x10000, 8000, 7000)); // token disagrees
  auto no_source = actor_rendezvous(3, 0x10000, 8000, 8000);
  no_source.mutable_request()->mutable_actor_message()->clear_source();
  receive(no_source);
  receive(actor_rendezvous(4, ~uint64_t{0} - 10, 8000, 8000)); // wraps
  receive(actor_rendezvous(5, 0x10000, 60000, 60000));         // over our limit
  BOOST_TEST(out.reads.empty());
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 5u);
  BOOST_TEST(a[0].second == pb::MALFORMED);
  BOOST_TEST(a[1].second == pb::LENGTH_MISMATCH);
  BOOST_TEST(a[2].second == pb::MALFORMED);
  BOOST_TEST(a[3].second == pb::MALFORMED);
  BOOST_TEST(a[4].second == pb::SIZE_LIMIT);
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 1u);
  BOOST_TEST(out.actor_frames[0].refused);
  BOOST_TEST(code_of(out.actor_frames[0].why) == errc::size_limit);
  BOOST_TEST(core->stats().rejected_requests == 5u);
  // Without remote actors, nothing is read either.
  opts.remote_actors = false;
  make_core();
  out.posted.clear();
  receive(actor_rendezvous(6, 0x10000, 8000, 8000));
  BOOST_TEST(out.reads.empty());
  BOOST_REQUIRE_EQUAL(answers().size(), 1u);
  BOOST_TEST(answers()[0].second == pb::MALFORMED);
}

// The memory a peer's rendezvous messages hold is bounded by
// peer-max-queued-bytes.
BOOST_AUTO_TEST_CASE(reads_in_flight_are_bounded_by_peer_max_queued_bytes) {
  opts.peer_max_queued_bytes = 20000;
  make_core();
  receive(actor_rendezvous(1, 0x10000, 8000, 8000));
  receive(actor_rendezvous(2, 0x20000, 8000, 8000));
  receive(actor_rendezvous(3, 0x30000, 8000, 8000));
  BOOST_TEST(out.reads.size() == 2u);
  auto a = answers();
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_TEST(a[0].first == 3u);
  BOOST_TEST(a[0].second == pb::QUOTA_EXCEEDED);
  // Refused in its turn: after the two being read.
  BOOST_TEST(out.actor_frames.empty());
  for (auto& r : out.reads)
    r.done(caf::error{});
  BOOST_REQUIRE_EQUAL(out.actor_frames.size(), 3u);
  BOOST_TEST(!out.actor_frames[0].refused);
  BOOST_TEST(!out.actor_frames[1].refused);
  BOOST_TEST(out.actor_frames[2].refused);
}

// Closing with a READ in flight drops the message; its late completion is
// ignored and the memory returns once the transport lets go of it.
BOOST_AUTO_TEST_CASE(close_drops_actor_messages_being_read) {
  auto before = pool->stats().bytes_in_use;
  receive(actor_rendezvous(1, 0x10000, 6000, 6000));
  receive(actor_eager(2), "ok");
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  core->close(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(core->stats().rendezvous_bytes == 0u);
  out.reads[0].done(caf::error{});
  BOOST_TEST(out.actor_frames.empty());
  out.reads.clear();
  BOOST_TEST(pool->stats().bytes_in_use == before);
}

// A frame whose header outgrows a send's header slot (a lookup answer that
// names a long typed interface, a lookup of a long name) goes whole from
// pool memory; before, the transport refused the post and the connection
// ended.
BOOST_AUTO_TEST_CASE(frames_over_the_header_slot_go_from_pool_memory) {
  peer_hello(false);
  out.posted.clear();
  out.published_name = "wide";
  out.published.id = 11;
  for (int i = 0; i < 12; ++i)
    out.published.interface.push_back("caf::replies_to<@str, @str, @u64, @i"
                                      + std::to_string(i) + ">::with<@str>");
  pb::Message lookup;
  lookup.mutable_request()->set_request_id(77);
  lookup.mutable_request()->mutable_actor_lookup()->set_name("wide");
  receive(lookup);
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  BOOST_TEST(out.spilled == 1);
  const auto& res = out.posted.back().msg.response();
  BOOST_TEST(res.request_id() == 77u);
  BOOST_TEST(res.actor_lookup().actor_id() == 11u);
  BOOST_TEST(res.actor_lookup().interface_size() == 12);
  BOOST_TEST(out.spilled_bytes > transport::max_send_header_bytes);
  out.posted.clear();
  // A lookup of ours with a 256-byte name and that interface expected.
  bool answered = false;
  core->lookup_actor(
      std::string(256, 'n'), out.published.interface, t0,
      [&](caf::expected<actor_lookup_result>) { answered = true; });
  BOOST_REQUIRE_EQUAL(out.posted.size(), 1u);
  BOOST_TEST(out.spilled == 2);
  BOOST_TEST(out.posted.back().msg.request().actor_lookup().name().size()
             == 256u);
  BOOST_TEST(!answered);
  BOOST_TEST(out.disconnects.empty());
}

BOOST_AUTO_TEST_SUITE_END()

// -- the budget and deadlines of partial work (issue 39) ----------------------

namespace {

/// The actor rendezvous fixture with a short peer-partial-timeout-ms.
struct partial_fixture : actor_rendezvous_fixture {
  static constexpr uint32_t timeout_ms = 500;

  partial_fixture() {
    opts.peer_partial_timeout_ms = timeout_ms;
    opts.peer_max_violations = 100;
    make_core();
    peer_hello(false);
    out.posted.clear();
  }

  /// A chunk of the request `mid` to target 5 carrying `len` bytes; the
  /// first one (`total` set) announces the whole message.
  pb::Message actor_chunk(size_t len, uint64_t total = 0, uint64_t mid = 7) {
    pb::Message msg;
    auto* m = msg.mutable_actor_message();
    m->set_target(5);
    m->set_sender(6);
    m->set_message_id(mid);
    m->set_len(len);
    if (total != 0)
      m->set_total_len(total);
    return msg;
  }

  /// Hands one frame from the peer to the core at `t`.
  void receive_at(agent_core::time_point t, const pb::Message& msg,
                  const std::string& payload = {}) {
    core->on_frame(frame(msg, payload), t);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(partial_work, partial_fixture)

// A chunked actor message whose rest never comes is dropped at its
// deadline, counted from its first chunk: its own chunks and the peer's
// Pings on the way do not extend it.  The requester learns why (the sink
// answers it), and the drop counts as a violation.
BOOST_AUTO_TEST_CASE(a_partial_actor_message_is_dropped_at_its_deadline) {
  using std::chrono::milliseconds;
  auto sweeps = out.sweeps;
  receive_at(t0, actor_chunk(1000, 100000), std::string(1000, 'a'));
  BOOST_TEST(out.partial_on);
  BOOST_TEST(out.sweeps > sweeps); // the owner's sweep enforces it
  BOOST_TEST(core->stats().partial_actor_bytes == 1000u);
  for (int i = 1; i < 5; ++i) {
    auto t = t0 + milliseconds{i * 100};
    receive_at(t, pb::make_ping(1000 + i));
    receive_at(t, actor_chunk(1000), std::string(1000, 'b'));
    BOOST_TEST((core->expire(t) == t0 + milliseconds{timeout_ms}));
  }
  BOOST_TEST(out.partial_drops.empty());
  BOOST_TEST(core->stats().partial_actor_bytes == 5000u);
  auto errors = core->stats().protocol_errors;
  BOOST_TEST((core->expire(t0 + milliseconds{timeout_ms})
              == agent_core::time_point::max()));
  BOOST_REQUIRE_EQUAL(out.partial_drops.size(), 1u);
  BOOST_TEST(code_of(out.partial_drops[0]) == errc::request_timeout);
  BOOST_TEST(what_of(out.partial_drops[0]).find("peer-partial-timeout-ms")
             != std::string::npos);
  BOOST_TEST(!out.partial_on);
  auto s = core->stats();
  BOOST_TEST(s.partials_dropped == 1u);
  BOOST_TEST(s.protocol_errors == errors + 1);
  BOOST_TEST(s.partial_actor_bytes == 0u);
  BOOST_TEST(out.disconnects.empty());
  // A violation: with peer-max-violations=1 the same drop disconnects.
  opts.peer_max_violations = 1;
  make_core();
  peer_hello(false);
  receive_at(t0, actor_chunk(1000, 100000), std::string(1000, 'a'));
  core->expire(t0 + milliseconds{timeout_ms});
  BOOST_REQUIRE_EQUAL(out.disconnects.size(), 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::quota_exceeded);
}

// A message that completes in time is not touched; the next one gets a
// deadline of its own.
BOOST_AUTO_TEST_CASE(a_partial_finished_in_time_leaves_no_deadline) {
  using std::chrono::milliseconds;
  receive_at(t0, actor_chunk(1000, 2000), std::string(1000, 'a'));
  receive_at(t0 + milliseconds{400}, actor_chunk(1000), std::string(1000, 'b'));
  BOOST_TEST(!out.partial_on);
  BOOST_TEST(
      (core->expire(t0 + milliseconds{400}) == agent_core::time_point::max()));
  receive_at(t0 + milliseconds{450}, actor_chunk(1000, 3000, 8),
             std::string(1000, 'c'));
  BOOST_TEST((core->expire(t0 + milliseconds{timeout_ms})
              == t0 + milliseconds{450 + timeout_ms}));
  BOOST_TEST(out.partial_drops.empty());
  core->expire(t0 + milliseconds{450 + timeout_ms});
  BOOST_TEST(out.partial_drops.size() == 1u);
}

// The reassembly counts against the peer's budget (peer-max-queued-bytes)
// with what else it holds: past it the message is dropped, the requester
// answered with quota_exceeded, a violation counted.
BOOST_AUTO_TEST_CASE(a_partial_actor_message_over_the_budget_is_dropped) {
  opts.peer_max_queued_bytes = 3500;
  make_core();
  peer_hello(false);
  receive(pb::make_send_data(1, 500), std::string(500, 'd')); // unclaimed
  BOOST_TEST(out.queued_bytes == 500u);
  receive(actor_chunk(1000, 100000), std::string(1000, 'a'));
  receive(actor_chunk(1000), std::string(1000, 'b'));
  receive(actor_chunk(1000), std::string(1000, 'c')); // 3500: at the limit
  BOOST_TEST(out.partial_drops.empty());
  auto errors = core->stats().protocol_errors;
  receive(actor_chunk(1000), std::string(1000, 'e'));
  BOOST_REQUIRE_EQUAL(out.partial_drops.size(), 1u);
  BOOST_TEST(code_of(out.partial_drops[0]) == errc::quota_exceeded);
  BOOST_TEST(what_of(out.partial_drops[0]).find("peer-max-queued-bytes")
             != std::string::npos);
  auto s = core->stats();
  BOOST_TEST(s.partials_dropped == 1u);
  BOOST_TEST(s.protocol_errors == errors + 1);
  // And a rendezvous READ finds the budget taken by a partial.
  out.posted.clear();
  receive(actor_chunk(1000, 100000, 9), std::string(1000, 'f'));
  receive(actor_rendezvous(2, 0x10000, 5000, 5000));
  BOOST_TEST(out.reads.empty());
  BOOST_REQUIRE_EQUAL(answers().size(), 1u);
  BOOST_TEST(answers()[0].second == pb::QUOTA_EXCEEDED);
}

// A rendezvous READ that does not complete by its deadline ends the
// connection (its memory stays the READ's until the queue pair is gone),
// whatever else the peer sends meanwhile; a READ done in time leaves no
// deadline behind.
BOOST_AUTO_TEST_CASE(a_stalled_rendezvous_read_ends_the_connection) {
  using std::chrono::milliseconds;
  receive_at(t0, rendezvous(1, 0x10000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 1u);
  out.reads[0].done(caf::error{});
  BOOST_TEST((core->expire(t0 + milliseconds{timeout_ms})
              == agent_core::time_point::max()));
  auto t1 = t0 + milliseconds{1000};
  receive_at(t1, actor_rendezvous(2, 0x20000, 8000, 8000));
  receive_at(t1 + milliseconds{100}, rendezvous(3, 0x30000, 8000));
  BOOST_REQUIRE_EQUAL(out.reads.size(), 3u);
  for (int i = 1; i < 5; ++i) {
    auto t = t1 + milliseconds{i * 100};
    receive_at(t, pb::make_ping(1000 + i));
    BOOST_TEST((core->expire(t) == t1 + milliseconds{timeout_ms}));
  }
  BOOST_TEST(out.disconnects.empty());
  core->expire(t1 + milliseconds{timeout_ms});
  BOOST_REQUIRE_EQUAL(out.disconnects.size(), 1u);
  BOOST_TEST(code_of(out.disconnects[0]) == errc::request_timeout);
  BOOST_TEST(what_of(out.disconnects[0]).find("peer-partial-timeout-ms")
             != std::string::npos);
  BOOST_TEST(core->stats().partials_dropped == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
