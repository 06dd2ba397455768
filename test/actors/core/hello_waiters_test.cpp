#define BOOST_TEST_MODULE hello_waiters
#include <boost/test/unit_test.hpp>

// Operations waiting for the peer's Hello (actors/core/hello_waiters.hpp).

#include <chrono>
#include <string>
#include <vector>

#include "actors/core/hello_waiters.hpp"
#include "rdmactor/error.hpp"

using namespace rdmactor;
using std::chrono::milliseconds;

namespace {

const auto t0 = hello_waiters::clock_type::now();

struct fixture {
  hello_waiters w;
  /// What each waiter got, in the order answered ("name:code").
  std::vector<std::string> answers;

  hello_waiters::fn_type record(std::string name) {
    return [this, name](const caf::error& err) {
      answers.push_back(
          name + ":"
          + (err ? std::string{to_string(code_of(err))} : std::string{"ok"}));
    };
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(hello_waiters_suite, fixture)

BOOST_AUTO_TEST_CASE(the_hello_answers_each_by_its_extension) {
  w.add(0x1, "imm", t0 + milliseconds{100}, record("a"));
  w.add(0x4, "tags", t0 + milliseconds{200}, record("b"));
  BOOST_TEST(w.size() == 2u);
  BOOST_TEST((w.next_deadline() == t0 + milliseconds{100}));
  w.run(0x1 | 0x2, "peer:1");
  BOOST_TEST(w.size() == 0u);
  BOOST_TEST((w.next_deadline() == hello_waiters::time_point::max()));
  BOOST_REQUIRE(answers.size() == 2u);
  BOOST_TEST(answers[0] == "a:ok");
  BOOST_TEST(answers[1] == "b:" + std::string{to_string(errc::not_negotiated)});
}

BOOST_AUTO_TEST_CASE(not_offered_names_the_operation_and_the_peer) {
  BOOST_TEST(!hello_waiters::offered(0x3, 0x2, "x", "p"));
  auto err = hello_waiters::offered(0x1, 0x2, "send_data with a value",
                                    "10.0.0.1:7000");
  BOOST_TEST(code_of(err) == errc::not_negotiated);
  BOOST_TEST(what_of(err).find("send_data with a value") != std::string::npos);
  BOOST_TEST(what_of(err).find("10.0.0.1:7000") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(deadlines_fail_the_oldest_first) {
  w.add(0x1, "a", t0 + milliseconds{100}, record("a"));
  w.add(0x1, "b", t0 + milliseconds{200}, record("b"));
  w.expire(t0 + milliseconds{99}, "p", 100);
  BOOST_TEST(answers.empty());
  w.expire(t0 + milliseconds{100}, "p", 100);
  BOOST_REQUIRE(answers.size() == 1u);
  BOOST_TEST(answers[0]
             == "a:" + std::string{to_string(errc::request_timeout)});
  BOOST_TEST((w.next_deadline() == t0 + milliseconds{200}));
}

BOOST_AUTO_TEST_CASE(the_end_of_the_connection_fails_every_one) {
  w.add(0x1, "a", t0, record("a"));
  w.add(0x1, "b", t0, record("b"));
  w.fail_all(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(answers.size() == 2u);
  BOOST_TEST(w.size() == 0u);
}

// A waiter whose answer ends the connection: the rest get the end's error.
BOOST_AUTO_TEST_CASE(a_waiter_that_ends_the_connection_fails_the_rest) {
  w.add(0x1, "a", t0, [this](const caf::error&) {
    answers.push_back("a");
    w.fail_all(make_error(errc::closed, "closed"));
  });
  w.add(0x1, "b", t0, record("b"));
  w.run(0x1, "p");
  BOOST_REQUIRE(answers.size() == 2u);
  BOOST_TEST(answers[1] == "b:" + std::string{to_string(errc::closed)});
}

BOOST_AUTO_TEST_SUITE_END()
