#include <boost/test/unit_test.hpp>

// common/ring_deque.hpp: a FIFO with push_front in a ring that only grows.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common/ring_deque.hpp"

using rdmactor::ring_deque;

BOOST_AUTO_TEST_SUITE(ring_deque_suite)

BOOST_AUTO_TEST_CASE(keeps_fifo_order_across_the_wrap_and_growth) {
  ring_deque<std::string> q;
  int next_in = 0;
  int next_out = 0;
  // Wraps several times at a steady size, then grows while wrapped.
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 6; ++i)
      q.push_back(std::to_string(next_in++));
    for (int i = 0; i < 5; ++i) {
      BOOST_REQUIRE(!q.empty());
      BOOST_TEST(q.front() == std::to_string(next_out++));
      q.pop_front();
    }
  }
  for (int i = 0; i < 40; ++i)
    q.push_back(std::to_string(next_in++));
  BOOST_TEST(q.size() == static_cast<size_t>(next_in - next_out));
  BOOST_TEST(q.back() == std::to_string(next_in - 1));
  size_t i = 0;
  for (const auto& x : q)
    BOOST_TEST(x == std::to_string(next_out + static_cast<int>(i++)));
  BOOST_TEST(q[1] == std::to_string(next_out + 1));
  while (!q.empty()) {
    BOOST_TEST(q.front() == std::to_string(next_out++));
    q.pop_front();
  }
}

BOOST_AUTO_TEST_CASE(push_front_goes_before_the_head) {
  ring_deque<int> q;
  q.push_back(2);
  q.push_back(3);
  q.push_front(1);
  q.push_front(0);
  std::vector<int> got;
  for (int x : q)
    got.push_back(x);
  BOOST_TEST(got == (std::vector<int>{0, 1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(a_steady_ring_stops_growing_and_clear_keeps_it) {
  ring_deque<int> q;
  for (int i = 0; i < 100; ++i)
    q.push_back(i);
  auto cap = q.capacity();
  for (int i = 0; i < 10000; ++i) {
    q.pop_front();
    q.push_back(i);
  }
  BOOST_TEST(q.capacity() == cap);
  q.clear();
  BOOST_TEST(q.empty());
  BOOST_TEST(q.capacity() == cap);
}

BOOST_AUTO_TEST_CASE(nothing_is_allocated_before_the_first_push) {
  ring_deque<int> small;
  BOOST_TEST(small.capacity() == 0u);
  small.push_back(1);
  BOOST_TEST(small.capacity() == 8u);
  // Large elements: the first allocation holds at most 256 bytes.
  struct big {
    char bytes[160];
  };
  ring_deque<big> large;
  large.push_back(big{});
  BOOST_TEST(large.capacity() == 1u);
  large.push_back(big{});
  BOOST_TEST(large.capacity() == 2u);
}

BOOST_AUTO_TEST_CASE(erase_at_moves_the_later_elements_up) {
  ring_deque<std::string> q;
  for (auto s : {"a", "b", "c", "d"})
    q.push_back(s);
  q.pop_front();    // the ring's head is not its first slot
  q.push_back("e"); // and it wraps
  q.erase_at(1);    // "c"
  std::vector<std::string> got(q.begin(), q.end());
  BOOST_TEST(got == (std::vector<std::string>{"b", "d", "e"}));
  auto i = std::find(q.begin(), q.end(), std::string{"e"});
  BOOST_TEST(i.index() == 2u);
  q.erase_at(i.index());
  BOOST_TEST(q.size() == 2u);
  BOOST_TEST(q.back() == "d");
}

BOOST_AUTO_TEST_CASE(elements_are_destroyed_once_and_moves_take_them) {
  auto live = std::make_shared<int>(0);
  struct counted {
    std::shared_ptr<int> n;
    explicit counted(std::shared_ptr<int> p) : n(std::move(p)) {
      ++*n;
    }
    counted(counted&& other) noexcept : n(other.n) {
      ++*n;
    }
    ~counted() {
      --*n;
    }
  };
  {
    ring_deque<counted> q;
    for (int i = 0; i < 20; ++i) // grows twice
      q.emplace_back(live);
    BOOST_TEST(*live == 20);
    q.pop_front();
    BOOST_TEST(*live == 19);
    ring_deque<counted> other = std::move(q);
    BOOST_TEST(q.empty());
    BOOST_TEST(other.size() == 19u);
    BOOST_TEST(*live == 19);
  }
  BOOST_TEST(*live == 0);
}

BOOST_AUTO_TEST_SUITE_END()
