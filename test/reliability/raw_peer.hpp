#pragma once

// A peer without an agent: a bare transport actor on a queue pair to a node,
// through which a test sends hand-made frames and sees every frame the
// node's agent sends.

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include <caf/scoped_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "protocol/codec.hpp"
#include "protocol/messages.hpp"
#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/actors/fixture.hpp"
#include "test/actors/raw_forwarder.hpp"

namespace rdmactor::test {

/// A raw peer connected to `host:port`.
class raw_peer {
public:
  raw_peer(caf::actor_system& sys, const options& opts, const std::string& host,
           uint16_t port)
      : sys_(sys), opts_(opts), inbox_(sys) {
    auto d = transport::open_device(opts);
    BOOST_REQUIRE_MESSAGE(d, render(d));
    dev = *d;
    pool = std::make_shared<memory_pool>(dev, 1 << 20, 64 << 20);
    auto qp = dev->connect(host, port,
                           {opts.max_message_len_bytes, opts.recv_depth},
                           std::chrono::milliseconds(5000));
    BOOST_REQUIRE_MESSAGE(qp, render(qp));
    tr = transport::spawn_transport(sys, dev, std::move(*qp));
    auto fwd = sys.spawn(raw_forwarder, caf::actor_cast<caf::actor>(inbox_));
    auto linked = call<transport::link_params>(
        sys, tr, transport::subscribe_atom::value, fwd);
    BOOST_REQUIRE(linked);
  }

  ~raw_peer() {
    caf::anon_send_exit(tr, caf::exit_reason::user_shutdown);
  }

  /// Sends `msg` (no payload).
  void send(const protocol::Message& msg) {
    std::vector<uint8_t> buf(protocol::frame_header_len + msg.ByteSizeLong());
    auto res = protocol::encode(msg, buf.data(), buf.size(),
                                opts_.max_message_len_bytes);
    BOOST_REQUIRE(res.code == errc::none);
    buf.resize(res.header_len);
    auto n = call<uint64_t>(sys_, tr, transport::send_atom::value,
                            std::move(buf), local_mr{});
    BOOST_REQUIRE_MESSAGE(n, render(n));
  }

  /// Returns the next frame from the agent that `pred` accepts; frames it
  /// skips are dropped.  Fails the test after `bound`.
  template <class Pred>
  protocol::Message next(Pred pred, std::chrono::seconds bound
                                    = std::chrono::seconds(10)) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    for (;;) {
      protocol::Message msg;
      bool got = false;
      inbox_->receive(
          [&](transport::recv_atom, local_mr& mr) {
            got = protocol::decode(mr.data(), mr.size(),
                                   opts_.max_message_len_bytes, msg)
                      .code
                  == errc::none;
          },
          [&](transport::qp_down_atom, caf::error&) {},
          caf::after(bound) >> [] {});
      if (got && pred(msg))
        return msg;
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "no matching frame from the agent");
    }
  }

  /// Takes every frame from the agent until the connection goes down or
  /// `bound` passed; returns the kinds (protocol::kind_name) in order,
  /// "down" last when it went down.
  std::vector<std::string> frames_until_down(std::chrono::seconds bound) {
    std::vector<std::string> kinds;
    auto deadline = std::chrono::steady_clock::now() + bound;
    for (bool more = true; more;) {
      inbox_->receive(
          [&](transport::recv_atom, local_mr& mr) {
            protocol::Message msg;
            auto res = protocol::decode(mr.data(), mr.size(),
                                        opts_.max_message_len_bytes, msg);
            kinds.push_back(res.code == errc::none ? protocol::kind_name(msg)
                                                   : "undecodable");
          },
          [&](transport::qp_down_atom, caf::error&) {
            kinds.push_back("down");
            more = false;
          },
          caf::after(bound) >> [&] { more = false; });
      if (std::chrono::steady_clock::now() > deadline)
        more = false;
    }
    return kinds;
  }

  /// Returns the next request from the agent.
  protocol::Request next_request() {
    return next([](const protocol::Message& m) { return m.has_request(); })
        .request();
  }

  /// Returns the next response from the agent.
  protocol::Response next_response() {
    return next([](const protocol::Message& m) { return m.has_response(); })
        .response();
  }

  transport::device_ptr dev;
  memory_pool_ptr pool;
  transport::transport_actor tr;

private:
  caf::actor_system& sys_;
  options opts_;
  caf::scoped_actor inbox_;
};

} // namespace rdmactor::test
