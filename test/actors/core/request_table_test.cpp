#define BOOST_TEST_MODULE request_table
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <vector>

#include "actors/core/request_table.hpp"
#include "common/tuning.hpp"
#include "rdmactor/error.hpp"

using namespace rdmactor;

namespace {

using clock_type = std::chrono::steady_clock;
using std::chrono::seconds;

/// What a request's completion got.
struct outcome {
  int calls = 0;
  bool answered = false; // a response, not an error
  caf::error err;
};

request_table::completion_fn record(outcome& o) {
  return [&o](const protocol::Response* res, const caf::error& err) {
    ++o.calls;
    o.answered = res != nullptr;
    o.err = err;
  };
}

/// Adds a request with a fresh id; returns the id.
uint64_t add(request_table& t, outcome& o, clock_type::time_point deadline) {
  auto id = t.new_id();
  BOOST_REQUIRE(t.add(id, record(o), deadline));
  return id;
}

const auto t0 = clock_type::now();

} // namespace

BOOST_AUTO_TEST_SUITE(request_table_suite)

BOOST_AUTO_TEST_CASE(an_answer_completes_its_request_once) {
  request_table t{16};
  outcome a;
  outcome b;
  auto ida = add(t, a, t0 + seconds(1));
  auto idb = add(t, b, t0 + seconds(1));
  BOOST_TEST(ida != idb);
  BOOST_TEST(t.size() == 2u);
  BOOST_TEST(t.pending(ida));
  protocol::Response res;
  BOOST_TEST(t.complete(ida, &res, caf::error{}));
  BOOST_TEST(a.calls == 1);
  BOOST_TEST(a.answered);
  BOOST_TEST(!t.pending(ida));
  BOOST_TEST(!t.complete(ida, &res, caf::error{})); // once
  BOOST_TEST(a.calls == 1);
  BOOST_TEST(b.calls == 0);
  BOOST_TEST(t.size() == 1u);
}

BOOST_AUTO_TEST_CASE(ids_are_never_zero_and_leave_the_top_bit_clear) {
  request_table t{4};
  for (int i = 0; i < 10000; ++i) {
    auto id = t.new_id();
    BOOST_REQUIRE(id != 0u);
    BOOST_REQUIRE((id >> 63) == 0u);
  }
}

BOOST_AUTO_TEST_CASE(an_id_the_table_did_not_give_finds_nothing) {
  request_table t{16};
  outcome a;
  auto id = add(t, a, t0 + seconds(1));
  // The same slot under other high bits, another slot, zero, the top bit:
  // what a peer could forge.
  for (uint64_t forged : {id ^ (uint64_t{1} << 40), id + 1, uint64_t{0},
                          id | (uint64_t{1} << 63), ~uint64_t{0}}) {
    BOOST_TEST(!t.pending(forged));
    BOOST_TEST(!t.complete(forged, nullptr, caf::error{}));
  }
  BOOST_TEST(a.calls == 0);
  BOOST_TEST(t.pending(id));
}

BOOST_AUTO_TEST_CASE(add_refuses_ids_that_name_no_free_slot) {
  request_table t{16};
  outcome a;
  auto id = add(t, a, t0 + seconds(1));
  outcome b;
  auto fn = record(b);
  // The slot is taken (the same id, or another id of that slot).
  BOOST_TEST(!t.add(id, std::move(fn), t0));
  BOOST_TEST(!t.add(id ^ (uint64_t{1} << 50), std::move(fn), t0));
  // A slot beyond the next one: not from new_id.
  BOOST_TEST(
      !t.add((uint64_t{7} << request_table::slot_bits) | 5, std::move(fn), t0));
  BOOST_TEST(!t.add(0, std::move(fn), t0));
  // The completion was left as it was: still callable.
  BOOST_REQUIRE(fn);
  fn(nullptr, caf::error{});
  BOOST_TEST(b.calls == 1);
  BOOST_TEST(t.size() == 1u);
}

BOOST_AUTO_TEST_CASE(slots_are_reused_the_table_grows_to_the_most_pending) {
  request_table t{64};
  std::vector<outcome> out(8);
  for (int round = 0; round < 100; ++round) {
    std::vector<uint64_t> ids;
    for (auto& o : out)
      ids.push_back(add(t, o, t0 + seconds(1)));
    for (auto id : ids)
      BOOST_REQUIRE(t.complete(id, nullptr, caf::error{}));
  }
  BOOST_TEST(t.size() == 0u);
  BOOST_TEST(t.slots() == 8u);
  for (auto& o : out)
    BOOST_TEST(o.calls == 100);
}

BOOST_AUTO_TEST_CASE(a_full_table_refuses_until_one_completes) {
  request_table t{3};
  std::vector<outcome> out(4);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(add(t, out[i], t0 + seconds(1)));
  BOOST_TEST(t.full());
  BOOST_TEST(!t.add(t.new_id(), record(out[3]), t0 + seconds(1)));
  BOOST_TEST(t.complete(ids[1], nullptr, caf::error{}));
  BOOST_TEST(!t.full());
  add(t, out[3], t0 + seconds(1));
  BOOST_TEST(t.size() == 3u);
  BOOST_TEST(t.slots() == 3u);
}

BOOST_AUTO_TEST_CASE(the_capacity_is_capped_by_the_slot_bits) {
  request_table t{size_t{1} << 40};
  BOOST_TEST(t.capacity() == (size_t{1} << request_table::slot_bits));
}

BOOST_AUTO_TEST_CASE(expire_fails_what_is_due_and_remembers_it_as_late) {
  request_table t{16};
  outcome early;
  outcome late;
  auto id_early = add(t, early, t0 + seconds(1));
  auto id_late = add(t, late, t0 + seconds(5));
  BOOST_TEST((t.next_deadline() == t0 + seconds(1)));
  auto timeout = make_error(errc::request_timeout, "no answer");
  BOOST_TEST(t.expire(t0, timeout) == 0u);
  BOOST_TEST(t.expire(t0 + seconds(1), timeout) == 1u);
  BOOST_TEST(early.calls == 1);
  BOOST_TEST(code_of(early.err) == errc::request_timeout);
  BOOST_TEST(late.calls == 0);
  BOOST_TEST((t.next_deadline() == t0 + seconds(5)));
  // Its answer, when it comes, is late (once), not noise.
  BOOST_TEST(!t.pending(id_early));
  BOOST_TEST(t.take_late(id_early));
  BOOST_TEST(!t.take_late(id_early));
  BOOST_TEST(!t.take_late(id_late));
  BOOST_TEST(t.complete(id_late, nullptr, caf::error{}));
  BOOST_TEST((t.next_deadline() == clock_type::time_point::max()));
}

BOOST_AUTO_TEST_CASE(late_ids_are_bounded_oldest_first) {
  request_table t{tuning::max_late_responses + 1};
  std::vector<outcome> out(tuning::max_late_responses + 1);
  std::vector<uint64_t> ids;
  for (auto& o : out)
    ids.push_back(add(t, o, t0));
  BOOST_TEST(t.expire(t0, make_error(errc::request_timeout, "x"))
             == out.size());
  BOOST_TEST(!t.take_late(ids.front())); // the oldest went
  BOOST_TEST(t.take_late(ids[1]));
  BOOST_TEST(t.take_late(ids.back()));
}

BOOST_AUTO_TEST_CASE(a_late_alloc_is_taken_once_with_its_late_id) {
  request_table t{16};
  outcome o;
  auto id = add(t, o, t0);
  t.expire(t0, make_error(errc::request_timeout, "x"));
  t.remember_late_alloc(id);
  BOOST_TEST(!t.take_late_alloc(id + 1));
  BOOST_TEST(t.take_late_alloc(id));
  BOOST_TEST(!t.take_late_alloc(id));
  BOOST_TEST(!t.take_late(id)); // forgotten with it
}

BOOST_AUTO_TEST_CASE(fail_all_fails_each_once_and_keeps_what_completions_add) {
  request_table t{16};
  std::vector<outcome> out(5);
  for (auto& o : out)
    add(t, o, t0 + seconds(1));
  outcome added;
  uint64_t added_id = 0;
  outcome first;
  // A completion that issues another request (a retry): it stays.
  auto id = t.new_id();
  BOOST_REQUIRE(t.add(
      id,
      [&](const protocol::Response*, const caf::error& err) {
        first.err = err;
        ++first.calls;
        added_id = t.new_id();
        BOOST_REQUIRE(t.add(added_id, record(added), t0 + seconds(2)));
      },
      t0 + seconds(1)));
  t.fail_all(make_error(errc::peer_gone, "gone"));
  for (auto& o : out) {
    BOOST_TEST(o.calls == 1);
    BOOST_TEST(code_of(o.err) == errc::peer_gone);
  }
  BOOST_TEST(first.calls == 1);
  BOOST_TEST(t.size() == 1u);
  BOOST_TEST(t.pending(added_id));
  BOOST_TEST(added.calls == 0);
}

BOOST_AUTO_TEST_CASE(a_completion_may_add_while_the_table_grows) {
  request_table t{1024};
  // Each completion adds the next request: the slots vector grows inside
  // `complete` without touching the finished slot.
  int chain = 0;
  std::function<void(const protocol::Response*, const caf::error&)> next;
  next = [&](const protocol::Response*, const caf::error&) {
    if (++chain < 100) {
      for (int i = 0; i < 3; ++i) {
        auto filler = t.new_id();
        BOOST_REQUIRE(t.add(
            filler, [](auto*, auto&) {}, t0));
      }
      auto id = t.new_id();
      BOOST_REQUIRE(t.add(id, request_table::completion_fn{next}, t0));
      BOOST_REQUIRE(t.complete(id, nullptr, caf::error{}));
    }
  };
  auto id = t.new_id();
  BOOST_REQUIRE(t.add(id, request_table::completion_fn{next}, t0));
  BOOST_REQUIRE(t.complete(id, nullptr, caf::error{}));
  BOOST_TEST(chain == 100);
  BOOST_TEST(t.size() == 99u * 3);
}

BOOST_AUTO_TEST_SUITE_END()
