// agent_core_test: rate-limited logging and the noise budget.

#include <boost/test/unit_test.hpp>

#include <mutex>

#include <spdlog/sinks/base_sink.h>

#include "test/actors/core/agent_core_fixture.hpp"

// -- rate-limited logging and the noise budget (issue 16) ---------------------

namespace {

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
