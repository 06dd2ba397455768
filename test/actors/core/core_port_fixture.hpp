#pragma once

// A fake `core_port` (actors/core/core_port.hpp) that records what a component
// of the agent core asks of the core, for the components' own suites
// (actor_channel_test, mr_exchange_test, data_channel_test).

#include <boost/test/unit_test.hpp>

#include <optional>
#include <string>
#include <vector>

#include "actors/core/core_port.hpp"
#include "test/actors/core/agent_core_fixture.hpp"

/// The core, reduced to what a component may ask of it.
class fake_port final : public core_port {
public:
  fake_port(recording_sink& out, memory_pool_ptr pool) : out_(out) {
    pool_ = std::move(pool);
    opts_.remote_actors = true;
    opts_.actor_flow = true;
    opts_.peer_partial_timeout_ms = 500;
    link_ = transport::link_params{max_message_len, recv_depth, "peer"};
  }

  const options& opts() const noexcept override {
    return opts_;
  }
  const transport::link_params& link() const noexcept override {
    return link_;
  }
  const memory_pool_ptr& pool() const noexcept override {
    return pool_;
  }
  time_point now() const noexcept override {
    return now_;
  }
  void set_now(time_point now) noexcept override {
    now_ = now;
  }
  agent_sink& out() noexcept override {
    return out_;
  }
  agent_stats& counters() noexcept override {
    return counters_;
  }
  bool closed() const noexcept override {
    return closed_;
  }
  bool serving() const noexcept override {
    return !closed_;
  }
  caf::error peer_gone_error() const override {
    return make_error(errc::peer_gone, "the peer peer is gone");
  }
  bool peer_offers(uint32_t extension) const noexcept override {
    return (offered_ & extension) != 0;
  }
  bool offers_rendezvous() const noexcept override {
    return true;
  }
  caf::expected<std::vector<uint8_t>> encode(const pb::Message& msg) override {
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
    auto res = pb::encode(msg, buf.data(), buf.size(), max_message_len);
    if (res.code != errc::none)
      return make_error(res.code, "cannot encode");
    buf.resize(res.header_len);
    return buf;
  }
  std::vector<uint8_t> header_buffer() override {
    return std::move(spare_header);
  }
  void send_unsolicited(const pb::Message& msg) override {
    if (!keep_messages) {
      ++unsolicited_count;
      return;
    }
    unsolicited.push_back(msg);
  }
  void send_upkeep(const pb::Message& msg) override {
    unsolicited.push_back(msg);
    ++upkeep;
  }
  uint64_t new_request_id() override {
    return ++last_id;
  }
  void send_request(pb::Message msg, local_mr payload,
                    request_table::completion_fn done, time_point) override {
    if (!admit_request(done))
      return;
    requests.push_back(std::move(msg));
    payloads.push_back(std::move(payload));
    answers.push_back(std::move(done));
  }
  void when_offered(uint32_t extension, const char* what, time_point,
                    std::function<void(const caf::error&)> fn) override {
    if (peer_offers(extension))
      fn(caf::none);
    else
      fn(make_error(errc::not_negotiated, what));
  }
  bool admit_request(request_table::completion_fn& done) override {
    if (!closed_)
      return true;
    done(nullptr, peer_gone_error());
    return false;
  }
  void post_request(uint64_t, std::vector<uint8_t> header, local_mr payload,
                    request_table::completion_fn done) override {
    if (!keep_messages) {
      // As the link: the header's buffer comes back for the next frame.
      spare_header = std::move(header);
      spare_header.clear();
      payloads.push_back(std::move(payload));
      answers.push_back(std::move(done));
      return;
    }
    pb::Message msg;
    BOOST_REQUIRE(msg.ParseFromArray(
        header.data() + pb::frame_header_len,
        static_cast<int>(header.size() - pb::frame_header_len)));
    requests.push_back(std::move(msg));
    payloads.push_back(std::move(payload));
    answers.push_back(std::move(done));
  }
  void complete_acked(const google::protobuf::RepeatedField<uint64_t>& ids,
                      const pb::Response&, uint64_t& taken) override {
    for (auto id : ids) {
      acked_ours.push_back(id);
      ++taken;
    }
  }
  void remember_late_alloc(uint64_t id) override {
    late_allocs.push_back(id);
  }
  void ack_send_data(uint64_t id) override {
    acked.push_back(id);
  }
  void accepted() override {
    ++accepts;
  }
  void reject(const pb::Message& res, const char* what) override {
    rejected.push_back(res);
    ++violations;
  }
  void count_violation() override {
    ++violations;
  }
  void count_noise(const char*) override {
    ++noise;
  }
  void end_connection(const caf::error& reason, const std::string&) override {
    ended = reason;
  }
  rate_limiter::verdict may_log(spdlog::level::level_enum) override {
    return {false, 0};
  }
  caf::error check_source(const pb::MrToken&, uint64_t, const char*,
                          pb::Status&) const override {
    return caf::none;
  }
  caf::error check_queued(uint64_t, pb::Status&) const override {
    return caf::none;
  }
  time_point partial_deadline() const noexcept override {
    return now_ + milliseconds{opts_.peer_partial_timeout_ms};
  }
  uint64_t buffered_bytes() const override {
    return out_.partial_held;
  }

  options opts_;
  transport::link_params link_;
  memory_pool_ptr pool_;
  time_point now_ = std::chrono::steady_clock::now();
  agent_stats counters_;
  bool closed_ = false;
  uint32_t offered_ = pb::EXT_REMOTE_ACTORS | pb::EXT_ACTOR_FLOW;
  uint64_t last_id = 0;
  std::vector<pb::Message> unsolicited;
  std::vector<pb::Message> requests;
  std::vector<local_mr> payloads;
  std::vector<request_table::completion_fn> answers;
  std::vector<uint64_t> acked_ours;  ///< our requests the peer acknowledged
  std::vector<uint64_t> late_allocs; ///< AllocMR ids remembered after a timeout
  std::vector<uint64_t> acked;
  std::vector<pb::Message> rejected;
  int accepts = 0;
  int violations = 0;
  int noise = 0;
  int upkeep = 0; ///< of `unsolicited`: Pings and Pongs
  /// False: requests and unsolicited frames are counted, not decoded and
  /// kept (`answers` and `payloads` still are), and a posted header's
  /// buffer is reused: a component's own allocations can be counted.
  bool keep_messages = true;
  size_t unsolicited_count = 0; ///< while !keep_messages
  std::vector<uint8_t> spare_header;
  caf::error ended;

private:
  recording_sink& out_;
};

/// A fake core, a recording sink and a pool on the fake device: what a
/// component of the core needs to run alone.
struct core_port_fixture {
  std::shared_ptr<fuzz::fake_device> dev
      = std::make_shared<fuzz::fake_device>();
  memory_pool_ptr pool = std::make_shared<memory_pool>(dev, 1 << 20, 1 << 24);
  recording_sink out;
  fake_port core{out, pool};

  core_port_fixture() {
    // Each test starts with fresh budgets shared by every agent.
    shared_log_budget("agent").reset(
        tuning::shared_log_lines, milliseconds{tuning::shared_log_window_ms});
  }
};
