#define BOOST_TEST_MODULE transport_actor
#include <boost/test/unit_test.hpp>

// Two transport actors connected back to back over the fabric named by
// RDMACTOR_TEST_FABRIC: sends of every size, one-sided operations, ordering,
// remote access errors, credits under a long loop, and peer departure.

#include <cstring>
#include <future>
#include <thread>

#include <caf/event_based_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "rdmactor/detail/transport_actor.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/actors/fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;
using namespace rdmactor::transport;

namespace {

transport_subscriber::behavior_type forwarder(transport_subscriber::pointer,
                                              caf::actor dst) {
  return {
      [dst](recv_atom a, local_mr& mr) { caf::anon_send(dst, a, mr); },
      [dst](imm_arrived_atom a, uint32_t imm, uint32_t n) {
        caf::anon_send(dst, a, imm, n);
      },
      [dst](qp_down_atom a, caf::error& e) { caf::anon_send(dst, a, e); },
  };
}

struct endpoint {
  transport_actor tr;
  std::unique_ptr<caf::scoped_actor> inbox;
};

/// The completion mode of the transports under test:
/// RDMACTOR_TEST_COMPLETION_MODE, else the default (adaptive).
polling mode_from_env() {
  polling how;
  auto name = env_or("RDMACTOR_TEST_COMPLETION_MODE", to_string(how.mode));
  auto mode = parse_completion_mode(name);
  BOOST_REQUIRE_MESSAGE(mode, "unknown RDMACTOR_TEST_COMPLETION_MODE " << name);
  how.mode = *mode;
  return how;
}

struct pair_fixture : system_holder {
  options opts = test_options();
  device_ptr dev;
  memory_pool_ptr pool;
  endpoint a;
  endpoint b;

  polling how;

  explicit pair_fixture(uint32_t recv_depth = 0, polling p = mode_from_env())
      : how(p) {
    if (recv_depth != 0)
      opts.recv_depth = recv_depth;
    auto d = open_device(opts);
    BOOST_REQUIRE_MESSAGE(d, render(d));
    dev = *d;
    pool = std::make_shared<memory_pool>(dev, 4 << 20, 64 << 20);
    auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
    conn_params offer{opts.max_message_len_bytes, opts.recv_depth};
    auto lst = dev->listen(host, 0, offer);
    BOOST_REQUIRE_MESSAGE(lst, render(lst));
    caf::expected<queue_pair_ptr> server_qp{caf::error{}};
    std::thread acceptor(
        [&] { server_qp = (*lst)->accept(std::chrono::seconds(10)); });
    auto client_qp
        = dev->connect(host, (*lst)->port(), offer, std::chrono::seconds(10));
    acceptor.join();
    BOOST_REQUIRE_MESSAGE(client_qp, render(client_qp));
    BOOST_REQUIRE_MESSAGE(server_qp, render(server_qp));
    a = make_endpoint(std::move(*client_qp));
    b = make_endpoint(std::move(*server_qp));
  }

  endpoint make_endpoint(queue_pair_ptr qp) {
    endpoint e;
    e.tr = spawn_transport(sys, dev, std::move(qp), how);
    e.inbox = std::make_unique<caf::scoped_actor>(sys);
    auto fwd = sys.spawn(forwarder, caf::actor_cast<caf::actor>(*e.inbox));
    auto lp = call<link_params>(sys, e.tr, subscribe_atom::value,
                                transport_subscriber{fwd});
    BOOST_REQUIRE(lp);
    BOOST_TEST(lp->max_message_len_bytes == opts.max_message_len_bytes);
    return e;
  }

  ~pair_fixture() {
    caf::anon_send_exit(a.tr, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(b.tr, caf::exit_reason::user_shutdown);
  }

  local_mr alloc(size_t size, uint32_t access = access::all) {
    auto mr = pool->allocate(size, 64, access);
    BOOST_REQUIRE(mr);
    return *mr;
  }

  local_mr next_message(endpoint& e) {
    local_mr out;
    (*e.inbox)->receive([&](recv_atom, local_mr& mr) { out = mr; },
                        caf::after(std::chrono::seconds(10)) >>
                            [] { BOOST_FAIL("no message arrived"); });
    return out;
  }
};

/// A pair with a tiny receive pool: credits run out all the time.
struct tiny_pool_fixture : pair_fixture {
  tiny_pool_fixture() : pair_fixture(tiny_depth()) {}

  static uint32_t tiny_depth() {
    return static_cast<uint32_t>(
        std::stoul(env_or("RDMACTOR_TEST_TINY_DEPTH", "4")));
  }
};

/// Answers every message with a header-only send (like the agent's
/// SendDataResponse) and releases the buffer at once.
transport_subscriber::behavior_type
responder(transport_subscriber::pointer self, transport_actor tr) {
  return {
      [self, tr](recv_atom, local_mr& mr) {
        std::vector<uint8_t> h(mr.size() >= 4 ? 4 : 0);
        if (!h.empty())
          std::memcpy(h.data(), mr.data(), 4);
        mr = local_mr{};
        self->request(tr, caf::infinite, send_atom::value, std::move(h),
                      local_mr{})
            .then([](uint64_t) {}, [](caf::error&) {});
      },
      [](imm_arrived_atom, uint32_t, uint32_t) {},
      [](qp_down_atom, caf::error&) {},
  };
}

void fill(local_mr& mr, uint8_t seed) {
  for (size_t i = 0; i < mr.size(); ++i)
    mr.data()[i] = static_cast<uint8_t>(seed ^ (i * 13));
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(transport_actor_suite, pair_fixture)

BOOST_AUTO_TEST_CASE(sends_of_every_size_up_to_the_maximum) {
  auto max = size_t{opts.max_message_len_bytes};
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, max - 10, max}) {
    BOOST_TEST_CONTEXT("payload " << size) {
      std::vector<uint8_t> header{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
      auto header_len = size >= 10 ? header.size() : 0;
      if (header_len == 0)
        header.clear();
      auto payload = alloc(size - header_len);
      fill(payload, static_cast<uint8_t>(size));
      auto n = call<uint64_t>(sys, a.tr, send_atom::value, header, payload);
      BOOST_REQUIRE_MESSAGE(n, render(n));
      BOOST_TEST(*n == size);
      auto got = next_message(b);
      BOOST_REQUIRE_EQUAL(got.size(), size);
      BOOST_TEST(std::memcmp(got.data(), header.data(), header_len) == 0);
      BOOST_TEST(
          std::memcmp(got.data() + header_len, payload.data(), payload.size())
          == 0);
    }
  }
  // One byte over the negotiated maximum is refused before posting.
  auto big = alloc(max + 1);
  auto n = call<uint64_t>(sys, a.tr, send_atom::value, std::vector<uint8_t>{},
                          big);
  BOOST_REQUIRE(!n);
  BOOST_TEST(code_of(n.error()) == errc::invalid_argument);
}

BOOST_AUTO_TEST_CASE(write_then_send_arrive_in_order) {
  auto target = alloc(64 * 1024);
  auto src = alloc(64 * 1024);
  fill(src, 9);
  // Fire both without waiting: the send must not overtake the write.
  caf::scoped_actor self{sys};
  self->send(a.tr, write_atom::value, src, target.token());
  self->send(a.tr, send_atom::value, std::vector<uint8_t>{42}, local_mr{});
  auto msg = next_message(b);
  BOOST_REQUIRE_EQUAL(msg.size(), 1u);
  BOOST_TEST(std::memcmp(target.data(), src.data(), src.size()) == 0);
  // Read it back through the other endpoint.
  auto back = alloc(64 * 1024);
  auto n = call<uint64_t>(sys, b.tr, read_atom::value, back, src.token());
  BOOST_REQUIRE(n);
  BOOST_TEST(std::memcmp(back.data(), src.data(), src.size()) == 0);
}

BOOST_AUTO_TEST_CASE(bad_rkey_fails_with_remote_access_error) {
  auto target = alloc(4096);
  auto src = alloc(4096);
  fill(src, 1);
  auto tok = target.token();
  tok.rkey ^= 0x5a5a5a5a;
  caf::scoped_actor watcher{sys};
  watcher->monitor(a.tr);
  auto n = call<uint64_t>(sys, a.tr, write_atom::value, src, tok);
  BOOST_REQUIRE(!n);
  BOOST_TEST(code_of(n.error()) == errc::remote_access_error);
  BOOST_TEST(std::all_of(target.data(), target.data() + 4096,
                         [](uint8_t x) { return x == 0; }));
  // As on hardware, the QP is in the error state: the actor quits and the
  // peer's subscriber is told.
  watcher->receive([](caf::down_msg&) {});
  bool down = false;
  (*b.inbox)->receive([&](qp_down_atom, caf::error&) { down = true; },
                      caf::after(std::chrono::seconds(10)) >> [] {});
  BOOST_TEST(down);
}

BOOST_AUTO_TEST_CASE(out_of_bounds_and_missing_access_are_remote_errors) {
  auto read_only = alloc(4096, access::local_write | access::remote_read);
  auto src = alloc(4096);
  fill(src, 3);
  auto n = call<uint64_t>(sys, a.tr, write_atom::value, src, read_only.token());
  BOOST_REQUIRE(!n);
  BOOST_TEST(code_of(n.error()) == errc::remote_access_error);
  BOOST_TEST(read_only.data()[0] == 0);
}

BOOST_AUTO_TEST_CASE(hundred_thousand_messages_never_run_the_pool_dry) {
  // The receiver releases each message as it handles it; credits keep the
  // sender from ever seeing receiver-not-ready.
  const int count = std::stoi(env_or("RDMACTOR_TEST_ROUNDTRIPS", "100000"));
  auto sender = sys.spawn([tr = a.tr, count](caf::event_based_actor* self) {
    for (int i = 0; i < count; ++i) {
      std::vector<uint8_t> h(4);
      std::memcpy(h.data(), &i, 4);
      self->send(tr, send_atom::value, std::move(h), local_mr{});
    }
  });
  int expected = 0;
  bool in_order = true;
  (*b.inbox)->receive_for(expected, count)(
      [&](recv_atom, local_mr& mr) {
        int got = -1;
        if (mr.size() == 4)
          std::memcpy(&got, mr.data(), 4);
        in_order = in_order && got == expected;
      },
      caf::after(std::chrono::seconds(60)) >> [] { BOOST_FAIL("stalled"); });
  BOOST_TEST(expected == count);
  BOOST_TEST(in_order);
  caf::anon_send_exit(sender, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(batched_sends_are_all_answered_in_order) {
  // Sends queued together go out mostly unsignaled; the completion of a
  // later signaled one answers the earlier ones, in order, with their
  // sizes.  Writes interleave and are answered the same way.
  const int count = 300;
  auto target = alloc(4096);
  auto src = alloc(4096);
  fill(src, 4);
  auto answers = std::make_shared<std::vector<uint64_t>>();
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  std::vector<local_mr> payloads;
  for (int i = 0; i < count; ++i)
    payloads.push_back(alloc(static_cast<size_t>(i % 7) * 100));
  auto driver = sys.spawn([tr = a.tr, count, answers, done, payloads, src,
                           tok = target.token()](caf::event_based_actor* self) {
    for (int i = 0; i < count; ++i) {
      auto on_answer = [answers, done, count](uint64_t n) {
        answers->push_back(n);
        if (answers->size() == static_cast<size_t>(count))
          done->set_value();
      };
      auto on_error = [](caf::error& err) {
        BOOST_ERROR("operation failed: " << render(err));
      };
      if (i % 10 == 9)
        self->request(tr, caf::infinite, write_atom::value, src, tok)
            .then(on_answer, on_error);
      else
        self->request(tr, caf::infinite, send_atom::value,
                      std::vector<uint8_t>{1, 2}, payloads[i])
            .then(on_answer, on_error);
    }
  });
  // The receiver releases each message at once, so credits keep flowing.
  int received = 0;
  (*b.inbox)->receive_for(received, count - count / 10)(
      [](recv_atom, local_mr&) {},
      caf::after(std::chrono::seconds(20)) >> [] { BOOST_FAIL("stalled"); });
  BOOST_REQUIRE(fut.wait_for(std::chrono::seconds(20))
                == std::future_status::ready);
  for (int i = 0; i < count; ++i) {
    auto want = i % 10 == 9 ? uint64_t{4096} : uint64_t(2 + (i % 7) * 100);
    BOOST_TEST_CONTEXT("operation " << i) {
      BOOST_TEST((*answers)[i] == want);
    }
  }
  caf::anon_send_exit(driver, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(buffers_released_out_of_order_on_other_threads) {
  // Hold every buffer the sender may fill (from a fresh start: all credits
  // but the reserve), release them in reverse order from other threads,
  // and check the credits came back: the pool's ring of released slots
  // must repost each one exactly once.
  std::vector<local_mr> held;
  for (uint32_t i = 0; i < opts.recv_depth - 1; ++i) {
    BOOST_REQUIRE(call<uint64_t>(sys, a.tr, send_atom::value,
                                 std::vector<uint8_t>{uint8_t(i)}, local_mr{}));
    held.push_back(next_message(b));
  }
  std::vector<std::thread> releasers;
  for (int t = 0; t < 3; ++t)
    releasers.emplace_back([&held, t] {
      for (auto i = held.size(); i-- > 0;)
        if (static_cast<int>(i % 3) == t)
          held[i] = local_mr{};
    });
  for (auto& th : releasers)
    th.join();
  // Several pools' worth again, released at once: impossible unless every
  // slot came back.
  for (uint32_t i = 0; i < 4 * opts.recv_depth; ++i) {
    BOOST_REQUIRE(call<uint64_t>(sys, a.tr, send_atom::value,
                                 std::vector<uint8_t>{7}, local_mr{}));
    auto msg = next_message(b);
    BOOST_REQUIRE_EQUAL(msg.size(), 1u);
  }
}

BOOST_AUTO_TEST_CASE(posts_arrive_in_order_and_answer_nothing) {
  auto payload = alloc(1000);
  fill(payload, 3);
  caf::scoped_actor self{sys};
  for (uint8_t i = 0; i < 10; ++i)
    self->send(a.tr, post_atom::value, std::vector<uint8_t>{i}, payload);
  for (uint8_t i = 0; i < 10; ++i) {
    auto msg = next_message(b);
    BOOST_REQUIRE_EQUAL(msg.size(), 1001u);
    BOOST_TEST(msg.data()[0] == i);
    BOOST_TEST(std::memcmp(msg.data() + 1, payload.data(), 1000) == 0);
  }
  // A request after the posts is answered; the posts were not.
  BOOST_REQUIRE(call<uint64_t>(sys, a.tr, send_atom::value,
                               std::vector<uint8_t>{99}, local_mr{}));
  next_message(b);
  int answers = 0;
  for (bool more = true; more;)
    self->receive([&](uint64_t) { ++answers; }, [&](caf::error&) { ++answers; },
                  caf::after(std::chrono::milliseconds(300)) >>
                      [&] { more = false; });
  BOOST_TEST(answers == 0);
}

BOOST_AUTO_TEST_CASE(a_refused_post_fails_the_connection_with_its_reason) {
  // Nobody waits for a post, so a refusal must not vanish: the connection
  // goes, and the subscriber learns why.
  auto big = alloc(opts.max_message_len_bytes);
  caf::scoped_actor self{sys};
  self->send(a.tr, post_atom::value, std::vector<uint8_t>{1}, big);
  caf::error reason;
  (*a.inbox)->receive(
      [&](qp_down_atom, caf::error& err) { reason = err; },
      caf::after(std::chrono::seconds(10)) >>
          [] { BOOST_FAIL("no qp_down after a refused post"); });
  BOOST_TEST(code_of(reason) == errc::invalid_argument, render(reason));
  auto n = call<uint64_t>(sys, a.tr, send_atom::value, std::vector<uint8_t>{},
                          local_mr{});
  BOOST_TEST(!n);
}

BOOST_AUTO_TEST_CASE(peer_departure_fails_pending_work_and_tells_once) {
  // Hold every receive buffer on b so a's sends queue for credits.
  std::vector<local_mr> held;
  for (uint32_t i = 0; i < opts.recv_depth - 1; ++i) {
    BOOST_REQUIRE(call<uint64_t>(sys, a.tr, send_atom::value,
                                 std::vector<uint8_t>{1}, local_mr{}));
    held.push_back(next_message(b));
  }
  caf::scoped_actor self{sys};
  self->send(a.tr, send_atom::value, std::vector<uint8_t>{2}, local_mr{});
  bool completed = false;
  self->receive([&](uint64_t) { completed = true; },
                caf::after(std::chrono::milliseconds(300)) >> [] {});
  BOOST_TEST(!completed); // no credit: it waits in the queue
  caf::anon_send_exit(b.tr, caf::exit_reason::kill);
  bool failed = false;
  self->receive([&](caf::error& err) { failed = static_cast<bool>(err); },
                [](uint64_t) {}, caf::after(std::chrono::seconds(15)) >> [] {});
  BOOST_TEST(failed);
  int downs = 0;
  for (bool more = true; more;)
    (*a.inbox)->receive([&](qp_down_atom, caf::error&) { ++downs; },
                        [](recv_atom, local_mr&) {},
                        caf::after(std::chrono::milliseconds(500)) >>
                            [&] { more = false; });
  BOOST_TEST(downs == 1);
}

BOOST_AUTO_TEST_SUITE_END()

/// Streams `count` messages from a to b with a window of 8 unanswered, b
/// answering each; checks that every answer arrives, in order.
void stream_and_check(pair_fixture& f, const int count) {
  const int window = 8;
  auto resp = f.sys.spawn(responder, f.b.tr);
  BOOST_REQUIRE(call<link_params>(f.sys, f.b.tr, subscribe_atom::value,
                                  transport_subscriber{resp}));
  auto payload = f.alloc(1000);
  auto progress = caf::actor_cast<caf::actor>(*f.a.inbox);
  // The pinger keeps `window` messages unanswered: a new one goes out when
  // an answer arrives, so a's queue is often empty (the case that stalled).
  auto pinger = f.sys.spawn([tr = f.a.tr, count, window, payload,
                             progress](transport_subscriber::pointer self)
                                -> transport_subscriber::behavior_type {
    auto next = std::make_shared<int>(0);
    auto ping = [self, tr, payload, next] {
      std::vector<uint8_t> h(4);
      std::memcpy(h.data(), next.get(), 4);
      ++*next;
      self->request(tr, caf::infinite, send_atom::value, std::move(h), payload)
          .then([](uint64_t) {}, [](caf::error&) {});
    };
    // Subscribe first, then ping: an answer that arrived before the
    // subscription would go to the fixture's forwarder and never come back
    // (a race that stalled this test on verbs once, with 0 answers).
    self->request(tr, caf::infinite, subscribe_atom::value,
                  caf::actor_cast<transport_subscriber>(self))
        .then([=](link_params&) {
          for (int i = 0; i < window && i < count; ++i)
            ping();
        });
    return {
        [=](recv_atom, local_mr& mr) {
          int got = -1;
          if (mr.size() == 4)
            std::memcpy(&got, mr.data(), 4);
          mr = local_mr{};
          caf::anon_send(progress, got);
          if (*next < count)
            ping();
        },
        [](imm_arrived_atom, uint32_t, uint32_t) {},
        [](qp_down_atom, caf::error&) {},
    };
  });
  int answered = 0;
  bool in_order = true;
  (*f.a.inbox)
      ->receive_for(answered, count)(
          [&](int got) { in_order = in_order && got == answered; },
          caf::after(std::chrono::seconds(10)) >>
              [&] { BOOST_FAIL("stalled after " << answered << " answers"); });
  BOOST_TEST(answered == count);
  BOOST_TEST(in_order);
  caf::anon_send_exit(pinger, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(resp, caf::exit_reason::user_shutdown);
}

BOOST_FIXTURE_TEST_SUITE(tiny_pool_suite, tiny_pool_fixture)

BOOST_AUTO_TEST_CASE(request_response_streams_never_stall_on_credits) {
  // a streams data messages with a window of outstanding sends; b answers
  // each with a small message (the agent's SendData / SendDataResponse
  // pattern).  With 4 receives per side both run short of credits all the
  // time, and credits come back in credit-only messages that cross each
  // other.  Guards the credit protocol against lost wake-ups (credits that
  // arrive while the other side has nothing queued must still make it
  // report what it owes).  RDMACTOR_TEST_TINY_DEPTH sets the pool size.
  stream_and_check(*this,
                   std::stoi(env_or("RDMACTOR_TEST_ROUNDTRIPS", "100000")) / 5);
}

// The same stream with every completion mode: the polling modes must not
// lose a completion when they stop polling and arm (adaptive), nor starve
// the actors that share their worker (busy: the pinger and the responder
// run on the same two workers as the spinning transports).
BOOST_AUTO_TEST_CASE(every_completion_mode_streams_without_stalling) {
  for (auto mode : {completion_mode::event, completion_mode::busy,
                    completion_mode::adaptive}) {
    BOOST_TEST_CONTEXT("completion-mode " << to_string(mode)) {
      // A budget of 0 makes adaptive arm after every drain that found
      // nothing outstanding: the arm-then-poll-again path runs constantly.
      pair_fixture f{tiny_depth(), polling{mode, 0}};
      stream_and_check(f, 5000);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(limits_suite)

// Below min_recv_depth the credit protocol can stall (both sides holding
// one credit and owing one): such an offer is refused at the handshake,
// locally by listen and connect and from a peer by the wire check, so no
// connection ever reaches the transport with it (the transport refuses one
// too: link_test, open_refuses_a_receive_depth_below_the_minimum).
BOOST_AUTO_TEST_CASE(a_receive_depth_below_the_minimum_is_refused) {
  auto opts = test_options();
  auto d = open_device(opts);
  BOOST_REQUIRE_MESSAGE(d, render(d));
  auto host = env_or("RDMACTOR_TEST_HOST", "127.0.0.1");
  conn_params shallow{opts.max_message_len_bytes, min_recv_depth - 1};
  auto refused = (*d)->listen(host, 0, shallow);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(code_of(refused.error()) == errc::invalid_argument,
             render(refused.error()));
  conn_params offer{opts.max_message_len_bytes, opts.recv_depth};
  auto lst = (*d)->listen(host, 0, offer);
  BOOST_REQUIRE_MESSAGE(lst, render(lst));
  auto client_qp
      = (*d)->connect(host, (*lst)->port(), shallow, std::chrono::seconds(10));
  BOOST_REQUIRE(!client_qp);
  BOOST_TEST(code_of(client_qp.error()) == errc::invalid_argument,
             render(client_qp.error()));
}

BOOST_AUTO_TEST_SUITE_END()
