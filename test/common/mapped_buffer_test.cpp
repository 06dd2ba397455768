#include <boost/test/unit_test.hpp>

// A byte buffer in pages of its own (common/mapped_buffer.hpp); part of
// common_test.

#include <cstdint>
#include <utility>
#include <vector>

#include "common/mapped_buffer.hpp"

using rdmactor::mapped_buffer;

BOOST_AUTO_TEST_SUITE(mapped_buffer_suite)

BOOST_AUTO_TEST_CASE(grows_in_pages_and_keeps_its_bytes) {
  mapped_buffer b;
  BOOST_TEST(b.capacity() == 0u);
  BOOST_TEST(b.data() == nullptr);
  std::vector<uint8_t> first(1000, 0xab);
  BOOST_REQUIRE(b.reserve(first.size()));
  BOOST_TEST(b.capacity() >= 1000u);
  BOOST_TEST(b.capacity() % 4096 == 0u);
  b.append(first.data(), first.size());
  // Grown past many pages (it may move): the content stays.
  std::vector<uint8_t> more(1 << 20, 0xcd);
  BOOST_REQUIRE(b.reserve(first.size() + more.size()));
  b.append(more.data(), more.size());
  BOOST_TEST(b.size() == first.size() + more.size());
  BOOST_TEST(b.data()[0] == 0xab);
  BOOST_TEST(b.data()[999] == 0xab);
  BOOST_TEST(b.data()[1000] == 0xcd);
  BOOST_TEST(b.data()[b.size() - 1] == 0xcd);
  // Reserving less than it has changes nothing.
  auto cap = b.capacity();
  BOOST_TEST(b.reserve(10));
  BOOST_TEST(b.capacity() == cap);
}

BOOST_AUTO_TEST_CASE(moves_and_releases) {
  mapped_buffer a;
  BOOST_REQUIRE(a.reserve(5000));
  uint8_t x = 7;
  a.append(&x, 1);
  mapped_buffer b{std::move(a)};
  BOOST_TEST(a.capacity() == 0u);
  BOOST_TEST(b.size() == 1u);
  BOOST_TEST(b.data()[0] == 7);
  a = std::move(b);
  BOOST_TEST(a.size() == 1u);
  a.release();
  BOOST_TEST(a.size() == 0u);
  BOOST_TEST(a.capacity() == 0u);
  BOOST_TEST(a.data() == nullptr);
}

// No address space for it: false, and the buffer is as it was.
BOOST_AUTO_TEST_CASE(a_reservation_the_system_cannot_give_fails) {
  mapped_buffer b;
  BOOST_TEST(!b.reserve(size_t{1} << 62));
  BOOST_TEST(b.capacity() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
