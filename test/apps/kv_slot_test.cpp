// The slot layout of the rdmactor-kv sample (apps/kv/kv_slot.hpp): what a
// reader makes of consistent, in-progress, torn and impossible slot images,
// and of hostile table headers.
#define BOOST_TEST_MODULE kv_slot_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <cstring>
#include <ostream>
#include <string>
#include <thread>

#include "kv_slot.hpp"

namespace kv {

std::ostream& operator<<(std::ostream& out, slot_read x) {
  const char* names[] = {"empty", "used", "torn", "bad"};
  return out << names[static_cast<int>(x)];
}

} // namespace kv

using namespace kv;

namespace {

struct slot_image {
  alignas(64) uint8_t bytes[slot_bytes] = {};

  void put_u64(size_t at, uint64_t x) {
    std::memcpy(bytes + at, &x, 8);
  }
  void put_u16(size_t at, uint16_t x) {
    std::memcpy(bytes + at, &x, 2);
  }
  /// Recomputes the checksum, as a (broken) server that wrote these
  /// contents consistently would have.
  void reseal() {
    put_u64(at::checksum, slot_checksum(bytes));
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(a_written_slot_reads_back_and_each_write_adds_two) {
  slot_image s;
  slot_view v;
  BOOST_TEST(read_slot(s.bytes, &v) == slot_read::empty);
  BOOST_TEST(write_slot(s.bytes, "hello", "world") == 2u);
  BOOST_REQUIRE(read_slot(s.bytes, &v) == slot_read::used);
  BOOST_TEST(v.key == "hello");
  BOOST_TEST(v.value == "world");
  BOOST_TEST(v.version == 2u);
  BOOST_TEST(write_slot(s.bytes, "hello", "") == 4u);
  BOOST_REQUIRE(read_slot(s.bytes, &v) == slot_read::used);
  BOOST_TEST(v.value.empty());
  BOOST_TEST(key_of(s.bytes) == "hello");
  std::string longest(value_max_bytes, 'v');
  write_slot(s.bytes, std::string(key_max_bytes, 'k'), longest);
  BOOST_REQUIRE(read_slot(s.bytes, &v) == slot_read::used);
  BOOST_TEST(v.value == longest);
  BOOST_TEST(v.key.size() == key_max_bytes);
}

BOOST_AUTO_TEST_CASE(a_write_in_progress_is_torn) {
  slot_image s;
  slot_view v;
  write_slot(s.bytes, "k", "old");
  // Both words odd: the server is between its first and last store.
  s.put_u64(at::begin, 3);
  s.put_u64(at::end, 3);
  BOOST_TEST(read_slot(s.bytes, &v) == slot_read::torn);
  // The words of two versions (a READ that saw the end of a write).
  s.put_u64(at::begin, 2);
  s.put_u64(at::end, 4);
  BOOST_TEST(read_slot(s.bytes, &v) == slot_read::torn);
  // The first write of a slot, half seen: begin still 0.
  slot_image fresh;
  write_slot(fresh.bytes, "k", "v");
  fresh.put_u64(at::begin, 0);
  BOOST_TEST(read_slot(fresh.bytes, &v) == slot_read::torn);
}

BOOST_AUTO_TEST_CASE(contents_of_two_writes_fail_the_checksum) {
  slot_image a;
  slot_image b;
  slot_view v;
  write_slot(a.bytes, "k", "first value");
  b = a;
  write_slot(b.bytes, "k", "the second value");
  // Versions of the new write, contents of the old one: a READ that
  // copied the words after the write ended and the middle before it began.
  slot_image mixed = a;
  mixed.put_u64(at::begin, 4);
  mixed.put_u64(at::end, 4);
  BOOST_TEST(read_slot(mixed.bytes, &v) == slot_read::torn);
  // Half of each value.
  mixed = b;
  std::memcpy(mixed.bytes + at::value, a.bytes + at::value, 8);
  BOOST_TEST(read_slot(mixed.bytes, &v) == slot_read::torn);
  // One flipped bit anywhere under the checksum.
  for (size_t i = 0; i < at::checksum; ++i) {
    slot_image flipped = b;
    flipped.bytes[i] ^= 0x10;
    BOOST_TEST((read_slot(flipped.bytes, &v) != slot_read::used), "byte " << i);
  }
}

BOOST_AUTO_TEST_CASE(impossible_contents_are_bad_not_used) {
  slot_view v;
  for (uint16_t key_len :
       {uint16_t{0}, uint16_t{key_max_bytes + 1}, uint16_t{0xffff}}) {
    slot_image s;
    write_slot(s.bytes, "k", "v");
    s.put_u16(at::key_len, key_len);
    s.reseal();
    BOOST_TEST((read_slot(s.bytes, &v) == slot_read::bad), key_len);
  }
  slot_image s;
  write_slot(s.bytes, "k", "v");
  s.put_u16(at::value_len, value_max_bytes + 1);
  s.reseal();
  BOOST_TEST((read_slot(s.bytes, &v) == slot_read::bad));
}

BOOST_AUTO_TEST_CASE(hostile_headers_are_refused) {
  alignas(64) uint8_t h[header_bytes];
  geometry g;
  uint64_t region = header_bytes + 100 * slot_bytes;
  write_header(h, 100, 32);
  BOOST_TEST(read_header(h, region, &g).empty());
  BOOST_TEST(g.slots == 100u);
  BOOST_TEST(g.max_probes == 32u);
  BOOST_TEST(!read_header(h, header_bytes - 1, &g).empty());
  BOOST_TEST(!read_header(h, region - 1, &g).empty()); // 100 slots do not fit
  write_header(h, 0, 1);
  BOOST_TEST(!read_header(h, region, &g).empty());
  write_header(h, uint64_t{1} << 62, 1); // slots * slot_bytes would overflow
  BOOST_TEST(!read_header(h, region, &g).empty());
  write_header(h, 10, 11);
  BOOST_TEST(!read_header(h, region, &g).empty());
  write_header(h, 10, 0);
  BOOST_TEST(!read_header(h, region, &g).empty());
  write_header(h, 10, 4);
  h[0] ^= 1;
  auto what = read_header(h, region, &g);
  BOOST_TEST(what.find("rdmactor-kv table header") != std::string::npos);
}

// A reader that copies the slot while the writer writes it, byte by byte
// as a NIC's READ may, never accepts a value the writer did not write.
// (The copy races the writer on purpose: that is what an RDMA READ does.)
BOOST_AUTO_TEST_CASE(a_racing_reader_sees_only_whole_values) {
  slot_image s;
  write_slot(s.bytes, "k", std::string(10, 'a'));
  std::atomic<bool> stop{false};
  std::thread writer{[&] {
    for (uint32_t i = 0; i < 20000; ++i) {
      auto c = static_cast<char>('a' + i % 26);
      write_slot(s.bytes, "k", std::string(10 + i % 150, c));
    }
    stop = true;
  }};
  uint64_t used = 0;
  uint64_t torn = 0;
  uint64_t wrong = 0;
  slot_view v;
  while (!stop.load()) {
    uint8_t copy[slot_bytes];
    auto* src = reinterpret_cast<volatile uint8_t*>(s.bytes);
    for (size_t i = 0; i < slot_bytes; ++i)
      copy[i] = src[i];
    switch (read_slot(copy, &v)) {
      case slot_read::used: {
        ++used;
        auto len = v.value.size();
        if (v.key != "k" || len < 10 || v.value != std::string(len, v.value[0]))
          ++wrong;
        break;
      }
      case slot_read::torn:
        ++torn;
        break;
      default:
        ++wrong;
    }
  }
  writer.join();
  BOOST_TEST(wrong == 0u);
  BOOST_TEST_MESSAGE("racing reads: " << used << " whole, " << torn
                                      << " torn (detected)");
}
