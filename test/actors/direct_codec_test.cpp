// The element types actor messages mostly carry, written and read without
// CAF's data processors (actors/remote/direct_codec.hpp): the same bytes
// as CAF's binary serializer for every kind and every length width, only
// the exact form CAF writes read back, and the actor codec taking that way
// for kept type lists of such elements (and CAF's way for anything else).
// Part of remote_actors_test.

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/detail/type_erased_value_impl.hpp>
#include <caf/node_id.hpp>

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/direct_codec.hpp"
#include "actors/remote/message_signatures.hpp"
#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

// A named namespace: the unity build puts this suite's files in one
// translation unit.
namespace direct_codec_cases {

template <class T>
direct_kind kind_of() {
  return direct_kind_of(caf::detail::type_erased_value_impl<T>{}.type());
}

/// CAF's bytes for `x`.
template <class T>
std::vector<char> caf_bytes(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto err = sink(x);
  BOOST_REQUIRE(!err);
  return buf;
}

/// Checks that `x` (of direct kind `kind`) writes CAF's bytes and reads
/// back from them to the same value, using every byte.
template <class T>
void same_as_caf(caf::actor_system& sys, direct_kind kind, const T& x) {
  auto expected = caf_bytes(sys, x);
  BOOST_REQUIRE_EQUAL(direct_size(kind, &x), expected.size());
  std::vector<char> mine(expected.size() + 1, '#');
  // (Offsets, not pointers: Boost.Test prints a char* as a C string.)
  auto written = write_direct(kind, &x, mine.data()) - mine.data();
  BOOST_TEST(static_cast<size_t>(written) == expected.size());
  BOOST_TEST(mine.back() == '#'); // nothing written past its size
  mine.pop_back();
  BOOST_TEST((mine == expected));
  T back{};
  const auto* begin = reinterpret_cast<const uint8_t*>(expected.data());
  const auto* end = begin + expected.size();
  BOOST_TEST(load_direct(kind, &back, begin, end) == end);
  BOOST_TEST((back == x));
  // One byte short never reads.
  if (!expected.empty()) {
    T cut{};
    BOOST_TEST(load_direct(kind, &cut, begin, end - 1) == nullptr);
  }
}

template <class T>
void integers_same_as_caf(caf::actor_system& sys, direct_kind kind) {
  using lim = std::numeric_limits<T>;
  for (T x : {T{0}, T{1}, static_cast<T>(lim::max() / 3), lim::min(),
              lim::max(), static_cast<T>(lim::max() - 1)})
    same_as_caf(sys, kind, x);
}

/// A sequence of `n` elements cycling through every byte value.
template <class Seq>
Seq sequence_of(size_t n) {
  Seq xs(n, 0);
  for (size_t i = 0; i < n; ++i)
    xs[i] = static_cast<typename Seq::value_type>(i * 7 + 3);
  return xs;
}

/// CAF's bytes of `msg` (no kept type list).
std::vector<char> serialized(caf::actor_system& sys, const caf::message& msg) {
  auto bytes = serialize_message(sys, msg);
  BOOST_REQUIRE(bytes);
  return *bytes;
}

/// `len` bytes as a length prefix, then `payload` bytes.
std::vector<uint8_t> framed(std::vector<uint8_t> len, size_t payload) {
  len.resize(len.size() + payload, 'a');
  return len;
}

} // namespace direct_codec_cases

using namespace direct_codec_cases;

BOOST_AUTO_TEST_SUITE(direct_codec_tests)

BOOST_AUTO_TEST_CASE(the_common_element_types_have_a_direct_kind) {
  BOOST_TEST((kind_of<caf::atom_value>() == direct_kind::atom));
  BOOST_TEST((kind_of<bool>() == direct_kind::boolean));
  BOOST_TEST((kind_of<int8_t>() == direct_kind::int8));
  BOOST_TEST((kind_of<char>() == direct_kind::int8));
  BOOST_TEST((kind_of<uint16_t>() == direct_kind::uint16));
  BOOST_TEST((kind_of<int32_t>() == direct_kind::int32));
  BOOST_TEST((kind_of<long>() == direct_kind::int64));
  BOOST_TEST((kind_of<unsigned long long>() == direct_kind::uint64));
  BOOST_TEST((kind_of<std::string>() == direct_kind::string));
  BOOST_TEST((kind_of<std::vector<char>>() == direct_kind::char_vector));
  BOOST_TEST((kind_of<std::vector<uint8_t>>() == direct_kind::byte_vector));
  // Everything else goes CAF's way: floating point (refused when not
  // finite), durations, errors, handles, strings in lists, user types.
  BOOST_TEST((kind_of<double>() == direct_kind::none));
  BOOST_TEST((kind_of<float>() == direct_kind::none));
  BOOST_TEST((kind_of<caf::timespan>() == direct_kind::none));
  BOOST_TEST((kind_of<caf::error>() == direct_kind::none));
  BOOST_TEST((kind_of<caf::actor>() == direct_kind::none));
  BOOST_TEST((kind_of<std::vector<std::string>>() == direct_kind::none));
  BOOST_TEST((kind_of<point>() == direct_kind::none));
}

BOOST_AUTO_TEST_CASE(every_kind_writes_and_reads_cafs_bytes) {
  remote_system s{false};
  auto& sys = s.sys;
  for (auto a : {caf::atom(""), caf::atom("ping"), caf::atom("0123456789")})
    same_as_caf(sys, direct_kind::atom, a);
  same_as_caf(sys, direct_kind::boolean, true);
  same_as_caf(sys, direct_kind::boolean, false);
  integers_same_as_caf<int8_t>(sys, direct_kind::int8);
  integers_same_as_caf<uint8_t>(sys, direct_kind::uint8);
  integers_same_as_caf<int16_t>(sys, direct_kind::int16);
  integers_same_as_caf<uint16_t>(sys, direct_kind::uint16);
  integers_same_as_caf<int32_t>(sys, direct_kind::int32);
  integers_same_as_caf<uint32_t>(sys, direct_kind::uint32);
  integers_same_as_caf<int64_t>(sys, direct_kind::int64);
  integers_same_as_caf<uint64_t>(sys, direct_kind::uint64);
  // Lengths at every width of CAF's seven-bit groups (one to four bytes)
  // and at their edges.
  for (size_t n : {0, 1, 127, 128, 129, 16383, 16384, 2097151, 2097152}) {
    BOOST_TEST_CONTEXT("length " << n) {
      same_as_caf(sys, direct_kind::string, sequence_of<std::string>(n));
      same_as_caf(sys, direct_kind::char_vector,
                  sequence_of<std::vector<char>>(n));
      same_as_caf(sys, direct_kind::byte_vector,
                  sequence_of<std::vector<uint8_t>>(n));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_bool_reads_as_caf_reads_it) {
  for (uint8_t b : {0, 1, 2, 0xff}) {
    bool x = b == 0;
    BOOST_TEST(load_direct(direct_kind::boolean, &x, &b, &b + 1) == &b + 1);
    BOOST_TEST(x == (b != 0));
  }
}

BOOST_AUTO_TEST_CASE(only_the_shortest_length_form_is_read) {
  std::string x;
  auto read = [&](const std::vector<uint8_t>& bytes) {
    return load_direct(direct_kind::string, &x, bytes.data(),
                       bytes.data() + bytes.size());
  };
  // The forms CAF writes.
  auto one = framed({0x05}, 5);
  BOOST_TEST(read(one) == one.data() + one.size());
  BOOST_TEST(x == "aaaaa");
  auto two = framed({0x80, 0x01}, 128);
  BOOST_TEST(read(two) == two.data() + two.size());
  BOOST_TEST(x.size() == 128u);
  // Forms CAF's reader takes but never writes: left to it.
  BOOST_TEST(read(framed({0x85, 0x00}, 5)) == nullptr);
  BOOST_TEST(read(framed({0x80, 0x80, 0x00}, 0)) == nullptr);
  // A fifth group beyond 32 bits, a sixth byte, no end, too long a length.
  BOOST_TEST(read(framed({0x80, 0x80, 0x80, 0x80, 0x10}, 0)) == nullptr);
  BOOST_TEST(read(framed({0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0)) == nullptr);
  BOOST_TEST(read({0x80}) == nullptr);
  BOOST_TEST(read(framed({0x06}, 5)) == nullptr);
  BOOST_TEST(read(framed({0x80, 0x80, 0x80, 0x80, 0x0f}, 16)) == nullptr);
}

// A message of direct kinds whose type list a connection keeps loads (and
// a thread writes it) without CAF's processors: the values are the same,
// and the codec reports no node id where CAF's way flags any integer that
// equals a node id's class tag (actor_codec's node_ids).
BOOST_AUTO_TEST_CASE(kept_type_lists_of_direct_kinds_skip_cafs_processors) {
  remote_system s{false};
  message_signatures sigs;
  auto tag = static_cast<uint64_t>(caf::node_id::default_data::class_id);
  auto msg = caf::make_message(caf::atom("go"), tag, std::string(200, 's'),
                               byte_vector(300, 9), int8_t{-3}, true);
  std::vector<char> plain;
  BOOST_REQUIRE(!serialize_message_into(s.sys, msg, plain));
  for (int round = 0; round < 3; ++round) {
    BOOST_TEST_CONTEXT("round " << round) {
      std::vector<char> kept;
      bool wrote_ids = true;
      BOOST_REQUIRE(
          !serialize_message_into(s.sys, msg, kept, &wrote_ids, true));
      BOOST_TEST((kept == plain));
      // The first round writes the list CAF's way and keeps it.
      BOOST_TEST(wrote_ids == (round == 0));
      bool read_ids = true;
      auto back = deserialize_message(
          s.sys, reinterpret_cast<const uint8_t*>(kept.data()), kept.size(),
          &read_ids, nullptr, &sigs);
      BOOST_REQUIRE_MESSAGE(back, render(back));
      BOOST_TEST(read_ids == (round == 0));
      BOOST_TEST(to_string(*back) == to_string(msg));
      BOOST_TEST(serialized(s.sys, *back) == serialized(s.sys, msg));
    }
  }
  // With one element of another kind the list goes CAF's way each time.
  auto mixed = caf::make_message(tag, 1.5);
  std::vector<char> buf;
  for (int round = 0; round < 2; ++round) {
    bool ids = false;
    buf.clear();
    BOOST_REQUIRE(!serialize_message_into(s.sys, mixed, buf, &ids, true));
    BOOST_TEST(ids);
    ids = false;
    auto back = deserialize_message(
        s.sys, reinterpret_cast<const uint8_t*>(buf.data()), buf.size(), &ids,
        nullptr, &sigs);
    BOOST_REQUIRE_MESSAGE(back, render(back));
    BOOST_TEST(ids);
  }
}

// Bytes not in the form CAF writes fall back to CAF's way, which decides
// as it always did: a longer length form loads, a short or padded message
// is refused.
BOOST_AUTO_TEST_CASE(other_forms_of_a_kept_list_load_or_fail_as_before) {
  remote_system s{false};
  message_signatures sigs;
  auto msg = caf::make_message(int32_t{7}, byte_vector{1, 2, 3});
  auto plain = serialize_message(s.sys, msg);
  BOOST_REQUIRE(plain);
  std::vector<uint8_t> bytes(plain->begin(), plain->end());
  auto load = [&](const std::vector<uint8_t>& b) {
    return deserialize_message(s.sys, b.data(), b.size(), nullptr, nullptr,
                               &sigs);
  };
  BOOST_REQUIRE(load(bytes)); // keeps the list
  // The byte vector's length (the byte before its 3 bytes) in two bytes.
  auto longer = bytes;
  auto at = longer.size() - 4;
  BOOST_REQUIRE_EQUAL(longer[at], 3);
  longer[at] = 0x83;
  longer.insert(longer.begin() + static_cast<long>(at) + 1, 0x00);
  auto r = load(longer);
  BOOST_REQUIRE_MESSAGE(r, render(r));
  BOOST_TEST(to_string(*r) == to_string(msg));
  auto padded = bytes;
  padded.push_back(0);
  BOOST_TEST(!load(padded));
  auto cut = bytes;
  cut.pop_back();
  BOOST_TEST(!load(cut));
  BOOST_TEST(sigs.made() == 1u);
}

BOOST_AUTO_TEST_SUITE_END()
