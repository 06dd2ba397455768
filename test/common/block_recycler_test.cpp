#include <boost/test/unit_test.hpp>

// common/block_recycler.hpp: blocks of one size kept for reuse, and
// allocate_shared through them.

#include <memory>
#include <string>

#include "common/block_recycler.hpp"

using rdmactor::block_recycler;
using rdmactor::recycling_allocator;

BOOST_AUTO_TEST_SUITE(block_recycler_suite)

BOOST_AUTO_TEST_CASE(a_freed_block_is_handed_out_again) {
  block_recycler r{2};
  auto* a = r.take(64);
  auto* b = r.take(64);
  auto* c = r.take(64);
  r.give(a, 64);
  r.give(b, 64);
  r.give(c, 64); // beyond max_kept: back to the heap
  BOOST_TEST(r.kept() == 2u);
  auto* d = r.take(64);
  BOOST_TEST(d == b);       // the last one given back
  auto* other = r.take(32); // another size: from the heap, not kept
  r.give(other, 32);
  BOOST_TEST(r.kept() == 1u);
  r.give(d, 64);
}

BOOST_AUTO_TEST_CASE(allocate_shared_reuses_the_block_of_the_last_object) {
  auto r = std::make_shared<block_recycler>(4);
  recycling_allocator<std::string> alloc{r};
  const void* first = nullptr;
  {
    auto s = std::allocate_shared<std::string>(alloc, "one");
    first = s.get();
  }
  BOOST_TEST(r->kept() == 1u);
  auto t = std::allocate_shared<std::string>(alloc, "two");
  BOOST_TEST(static_cast<const void*>(t.get()) == first);
  BOOST_TEST(*t == "two");
  BOOST_TEST(r->kept() == 0u);
}

BOOST_AUTO_TEST_CASE(objects_may_outlive_the_allocator_they_came_from) {
  std::shared_ptr<std::string> s;
  {
    auto r = std::make_shared<block_recycler>(4);
    s = std::allocate_shared<std::string>(recycling_allocator<std::string>{r},
                                          "kept");
  }
  // The block holds the recycler alive; releasing it frees both (ASan
  // and valgrind see no leak).
  BOOST_TEST(*s == "kept");
  s.reset();
}

BOOST_AUTO_TEST_SUITE_END()
