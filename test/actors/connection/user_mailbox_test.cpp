#define BOOST_TEST_MODULE user_mailbox
#include <boost/test/unit_test.hpp>

// The items the peer sent for receive calls and the calls waiting for
// them (actors/connection/user_mailbox.hpp).

#include <chrono>
#include <string>
#include <vector>

#include "actors/connection/user_mailbox.hpp"
#include "rdmactor/error.hpp"

using namespace rdmactor;
using agent_detail::user_mailbox;
using std::chrono::milliseconds;

namespace {

/// An item of `bytes` bytes.
struct item {
  std::string name;
  uint64_t bytes = 0;
};

struct item_bytes {
  uint64_t operator()(const item& x) const {
    return x.bytes;
  }
};

using box_type = user_mailbox<item, item_bytes>;

const auto t0 = box_type::clock_type::now();

struct fixture {
  box_type box;
  /// What each call got, in the order answered ("call:item" or
  /// "call:error code").
  std::vector<std::string> answers;

  box_type::waiter call(std::string name, milliseconds deadline) {
    return {[this, name](item&& x) { answers.push_back(name + ":" + x.name); },
            [this, name](const caf::error& err) {
              answers.push_back(name + ":" + to_string(code_of(err)));
            },
            t0 + deadline};
  }
};

caf::error timeout() {
  return make_error(errc::request_timeout, "nothing arrived");
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(user_mailbox_tests, fixture)

BOOST_AUTO_TEST_CASE(items_queue_in_order_and_count_their_bytes) {
  box.put({"a", 10});
  box.put({"b", 5});
  BOOST_TEST(box.queued() == 2u);
  BOOST_TEST(box.queued_bytes() == 15u);
  auto x = box.take();
  BOOST_REQUIRE(x);
  BOOST_TEST(x->name == "a");
  BOOST_TEST(box.queued_bytes() == 5u);
  BOOST_TEST(box.take()->name == "b");
  BOOST_TEST(!box.take());
  BOOST_TEST(box.queued_bytes() == 0u);
}

BOOST_AUTO_TEST_CASE(an_item_goes_to_the_oldest_waiting_call_unqueued) {
  box.wait(call("first", milliseconds{10}));
  box.wait(call("second", milliseconds{20}));
  box.put({"a", 100});
  BOOST_TEST(answers == std::vector<std::string>{"first:a"});
  BOOST_TEST(box.queued() == 0u);
  BOOST_TEST(box.queued_bytes() == 0u);
  BOOST_TEST(box.waiting() == 1u);
  box.put({"b", 1});
  box.put({"c", 7});
  BOOST_TEST((answers == std::vector<std::string>{"first:a", "second:b"}));
  BOOST_TEST(box.queued_bytes() == 7u);
}

BOOST_AUTO_TEST_CASE(expire_fails_the_calls_past_their_deadline_only) {
  box.wait(call("early", milliseconds{10}));
  box.wait(call("late", milliseconds{30}));
  BOOST_TEST(box.expire(t0 + milliseconds{9}, timeout));
  BOOST_TEST(answers.empty());
  BOOST_TEST(box.expire(t0 + milliseconds{10}, timeout));
  BOOST_TEST(answers == std::vector<std::string>{"early:request_timeout"});
  BOOST_TEST(!box.expire(t0 + milliseconds{31}, timeout));
  BOOST_TEST(answers.size() == 2u);
  BOOST_TEST(box.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(fail_all_answers_every_call_and_drops_the_items) {
  box.put({"queued", 64});
  box.fail_all(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(box.queued() == 0u);
  BOOST_TEST(box.queued_bytes() == 0u);
  box.wait(call("a", milliseconds{10}));
  box.wait(call("b", milliseconds{10}));
  box.fail_all(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(
      (answers == std::vector<std::string>{"a:peer_gone", "b:peer_gone"}));
  BOOST_TEST(box.waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(a_call_that_waits_again_while_failed_is_not_failed_twice) {
  // A failing call's answer may start another receive on the same box.
  bool again = false;
  box.wait({[](item&&) {},
            [&](const caf::error&) {
              answers.push_back("failed");
              if (!again) {
                again = true;
                box.wait(call("again", milliseconds{50}));
              }
            },
            t0 + milliseconds{10}});
  box.fail_all(make_error(errc::peer_gone, "gone"));
  BOOST_TEST(answers == std::vector<std::string>{"failed"});
  BOOST_TEST(box.waiting() == 1u);
  box.put({"x", 1});
  BOOST_TEST((answers == std::vector<std::string>{"failed", "again:x"}));
}

BOOST_AUTO_TEST_CASE(take_all_hands_the_items_over_and_keeps_the_calls) {
  box.put({"a", 3});
  box.put({"b", 4});
  auto all = box.take_all();
  BOOST_TEST(all.size() == 2u);
  BOOST_TEST(all.front().name == "a");
  BOOST_TEST(box.queued() == 0u);
  BOOST_TEST(box.queued_bytes() == 0u);
  box.wait(call("c", milliseconds{10}));
  box.take_all();
  BOOST_TEST(box.waiting() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
