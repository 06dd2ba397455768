#pragma once

// A scripted raw peer on the deterministic harness (agent_harness.hpp):
// one agent (the harness's server side) whose fake link is wired to a
// test that encodes the frames it delivers, reads back the agent's frames
// decoded, returns credits as a well-behaved peer does (or withholds them)
// and can fail the link.  What the peer lends the agent lives in the
// harness's client pool; at the end both pools must have every byte back.

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/error.hpp"
#include "test/support/agent_harness.hpp"

namespace rdmactor::test {

namespace pb = rdmactor::protocol;

/// Options of a scripted agent: those of the harness with the small
/// per-peer limits of the hostile suites.
inline options scripted_options() {
  auto o = harness_options();
  o.peer_max_mrs = 8;
  o.peer_max_queued_bytes = 64 * 1024;
  o.peer_max_pending_requests = 3;
  o.peer_max_violations = 6;
  o.request_timeout_ms = 1000;
  return o;
}

/// A frame the agent sent the peer, decoded: a message with its payload,
/// or the immediate value of an RDMA WRITE (`write_imm`).
struct agent_frame {
  pb::Message msg;
  std::vector<uint8_t> payload;
  std::optional<uint32_t> imm;
  bool write_imm = false;
  uint32_t write_len = 0;
};

/// A raw peer played by the test against one agent on the harness.
/// `send` and `send_raw` queue frames the next `settle` delivers (while
/// the agent has receives posted); every frame the agent sends lands in
/// `inbox`, decoded (credit-only messages are counted, not kept).  With
/// `return_credits` (the default) the peer reports every receive the
/// agent's frames used, on its next frame or in a credit-only message;
/// without, its frames report none.  With `ignore_credits` it sends
/// whether it holds credits or not.
class scripted_peer {
public:
  /// Immediate-data bit of a credit-only message (credit_ledger.hpp).
  static constexpr uint32_t credit_only_bit = uint32_t{1} << 31;

  explicit scripted_peer(options agent_opts = scripted_options())
      : h(agent_opts, agent_opts, agent_harness::unconnected),
        opts(agent_opts) {
    auto w = h.connect_scripted([this] { return on_round(); });
    agent = std::move(w.agent);
    peer_end_ = std::move(w.client);
    agent_end_ = std::move(w.server);
    credits_ = peer_end_->link->params().recv_depth;
    granted_ = credits_;
    max_len_ = peer_end_->link->params().max_message_len_bytes;
  }

  ~scripted_peer() {
    h.detach_scripts();
    inbox.clear();
    agent = connection_actor{};
  }

  scripted_peer(const scripted_peer&) = delete;
  scripted_peer& operator=(const scripted_peer&) = delete;

  agent_harness h;
  const options opts;
  /// The agent the peer talks to.
  connection_actor agent;
  /// What the agent sent and the test has not taken, in sending order.
  std::deque<agent_frame> inbox;
  /// Whether the peer reports the receives the agent's frames used.
  bool return_credits = true;
  /// Whether the peer sends without holding a credit.
  bool ignore_credits = false;
  /// The next request id `send` helpers hand out.
  uint64_t next_id = 1000;

  // -- sending ---------------------------------------------------------------

  /// Queues `bytes` as one SEND to the agent, reporting the owed credits
  /// (none without `return_credits`).  Settles first when the peer holds
  /// no credit and honours them.
  void send_raw(std::vector<uint8_t> bytes) {
    if (credits_ == 0 && !ignore_credits)
      h.settle();
    BOOST_REQUIRE_MESSAGE(credits_ > 0 || ignore_credits,
                          "the scripted peer has no credit left");
    uint32_t imm = return_credits ? take_owed() : 0;
    if (credits_ > 0)
      --credits_;
    ++sent_;
    peer_end_->out.push_back(wire_frame{std::move(bytes), imm, false, 0});
  }

  /// Queues `msg` followed by `payload_len` pattern bytes.
  void send(const pb::Message& msg, size_t payload_len = 0) {
    std::vector<uint8_t> buf(pb::frame_header_len + msg.ByteSizeLong());
    auto res = pb::encode(msg, buf.data(), buf.size(), buf.size());
    BOOST_REQUIRE(res.code == errc::none);
    buf.resize(res.header_len);
    for (size_t i = 0; i < payload_len; ++i)
      buf.push_back(static_cast<uint8_t>(i * 7 + 1));
    send_raw(std::move(buf));
  }

  /// Fails the peer's end of the link, as when its process dies; the
  /// agent's end fails once the frames already delivered are taken.
  void fail_link() {
    peer_end_->link->close();
    h.settle();
  }

  // -- what the agent sent ---------------------------------------------------

  /// Settles and takes frames from `inbox` up to the first one for which
  /// `wanted` holds (the ones before it are dropped); fails the test when
  /// none does.
  template <class Pred>
  agent_frame next_frame(Pred wanted, const char* what) {
    h.settle();
    while (!inbox.empty()) {
      auto f = std::move(inbox.front());
      inbox.pop_front();
      if (wanted(f))
        return f;
    }
    BOOST_FAIL("no " << what << " from the agent");
    return {};
  }

  /// The next response the agent sent.
  pb::Response next_response() {
    return next_frame([](const agent_frame& f) { return is(f, resp); },
                      "response")
        .msg.response();
  }

  /// The next request the agent sent.
  pb::Request next_request() {
    return next_frame([](const agent_frame& f) { return is(f, req); },
                      "request")
        .msg.request();
  }

  // -- checks ----------------------------------------------------------------

  /// The agent's statistics.
  agent_stats stats() {
    return h.stats(agent);
  }

  /// Bytes the agent's pool has handed out and not got back.
  uint64_t agent_bytes() const {
    return h.server.bytes_in_use();
  }

  /// Checks the agent still serves: a valid AllocMR gets an OK answer
  /// with the size asked for.
  void expect_still_serving() {
    auto id = next_id++;
    send(pb::make_alloc_mr(id, 128, 8));
    auto f = next_frame(
        [id](const agent_frame& x) {
          return is(x, resp) && x.msg.response().request_id() == id;
        },
        "answer to AllocMR");
    auto& res = f.msg.response();
    BOOST_TEST(pb::status_of(res) == pb::OK);
    BOOST_TEST(res.alloc_mr().token().len() == 128u);
  }

  /// Frames the peer sent (credit-only messages included).
  uint64_t frames_sent() const {
    return sent_;
  }

  /// Receives the agent granted the peer: its receive depth and every
  /// credit its frames reported.
  uint64_t granted() const {
    return granted_;
  }

  /// Credit-only messages the agent sent.
  uint64_t credit_only_received() const {
    return credit_only_;
  }

private:
  enum kind { req, resp };

  static bool is(const agent_frame& f, kind k) {
    return !f.write_imm
           && (k == req ? f.msg.has_request() : f.msg.has_response());
  }

  /// The owed credits, now reported.
  uint32_t take_owed() {
    auto n = owed_;
    owed_ = 0;
    owed_data_ = 0;
    return n;
  }

  /// Takes what the agent posted: decodes its frames into `inbox`, counts
  /// the credits they report and the receives they used, and returns
  /// credits in a credit-only message when owed for a data frame and no
  /// frame of the peer waits to carry them.  Returns whether anything
  /// moved.
  bool on_round() {
    if (!agent_end_)
      return false; // still connecting: the frames wait
    bool moved = false;
    auto& out = agent_end_->out;
    while (!out.empty()) {
      auto w = std::move(out.front());
      out.pop_front();
      moved = true;
      ++owed_;
      agent_frame f;
      f.imm = w.imm;
      if (w.write_imm) {
        f.write_imm = true;
        f.write_len = w.write_len;
        ++owed_data_;
        inbox.push_back(std::move(f));
        continue;
      }
      if (w.imm) {
        credits_ += *w.imm & (credit_only_bit - 1);
        granted_ += *w.imm & (credit_only_bit - 1);
      }
      if (w.imm && (*w.imm & credit_only_bit)) {
        BOOST_CHECK(w.bytes.empty());
        ++credit_only_;
        continue;
      }
      ++owed_data_;
      // Each frame of a packed message (a script whose Hello offers
      // EXT_PACKED_FRAMES) enters the inbox on its own; the first carries
      // the message's immediate value.
      for (size_t offset = 0;;) {
        auto r = pb::decode(w.bytes.data() + offset, w.bytes.size() - offset,
                            max_len_, f.msg, true);
        BOOST_REQUIRE_MESSAGE(r.code == errc::none,
                              "the agent sent an invalid frame");
        f.payload.assign(r.payload, r.payload + r.payload_len);
        inbox.push_back(std::move(f));
        if (!r.more)
          break;
        offset += r.frame_len;
        f = agent_frame{};
      }
    }
    if (return_credits && owed_data_ > 0 && credits_ > 0
        && peer_end_->out.empty() && !peer_end_->link->in_error()) {
      --credits_;
      ++sent_;
      peer_end_->out.push_back(
          wire_frame{{}, credit_only_bit | take_owed(), false, 0});
      moved = true;
    }
    return moved;
  }

  std::shared_ptr<wire_end> peer_end_;
  std::shared_ptr<wire_end> agent_end_;
  /// Receives the agent has posted for the peer (its credits).
  uint32_t credits_ = 0;
  /// Receives the agent's frames used, not reported yet; `owed_data_` of
  /// them by data frames.
  uint32_t owed_ = 0;
  uint32_t owed_data_ = 0;
  uint64_t granted_ = 0;
  uint64_t sent_ = 0;
  uint64_t credit_only_ = 0;
  uint32_t max_len_ = 0;
};

} // namespace rdmactor::test
