// The type lists a connection keeps (actors/remote/message_signatures.hpp):
// found again, bounded in entries and elements, and the codec's checks
// still refuse what they refuse when a type list comes from the cache.
// Part of remote_actors_test.

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <caf/duration.hpp>
#include <caf/group.hpp>

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/message_signatures.hpp"
#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

std::vector<uint8_t> bytes_of(caf::actor_system& sys, const caf::message& msg) {
  auto bytes = serialize_message(sys, msg);
  BOOST_REQUIRE_MESSAGE(bytes, render(bytes));
  return {bytes->begin(), bytes->end()};
}

/// "@<>+" and `n` times "+@i32" after the first.
std::string int_list(size_t n) {
  std::string names = "@<>";
  for (size_t i = 0; i < n; ++i)
    names += "+@i32";
  return names;
}

} // namespace

BOOST_AUTO_TEST_SUITE(message_signatures_tests)

BOOST_AUTO_TEST_CASE(a_type_list_is_made_once_and_loads_every_message_of_it) {
  remote_system s{false};
  message_signatures sigs;
  for (int32_t i = 0; i < 5; ++i) {
    auto bytes = bytes_of(
        s.sys, caf::make_message(i, std::string{"x"}, point{i, i + 1}));
    auto msg = deserialize_message(s.sys, bytes.data(), bytes.size(), nullptr,
                                   nullptr, &sigs);
    BOOST_REQUIRE_MESSAGE(msg, render(msg));
    BOOST_REQUIRE((msg->match_elements<int32_t, std::string, point>()));
    BOOST_TEST(msg->get_as<int32_t>(0) == i);
    BOOST_TEST(msg->get_as<point>(2).y == i + 1);
  }
  BOOST_TEST(sigs.made() == 1u);
  // The empty message needs no type list.
  auto empty = bytes_of(s.sys, caf::message{});
  auto msg = deserialize_message(s.sys, empty.data(), empty.size(), nullptr,
                                 nullptr, &sigs);
  BOOST_REQUIRE_MESSAGE(msg, render(msg));
  BOOST_TEST(msg->empty());
  BOOST_TEST(sigs.made() == 1u);
}

BOOST_AUTO_TEST_CASE(the_cache_keeps_a_bounded_number_of_short_type_lists) {
  remote_system s{false};
  message_signatures sigs;
  message_signature scratch;
  std::string unknown;
  const auto& types = s.sys.types();
  // One more list than the cache holds: the first is replaced.
  for (size_t n = 1; n <= message_signatures::capacity + 1; ++n) {
    auto* sig = sigs.make(types, int_list(n), unknown, scratch);
    BOOST_REQUIRE(sig != nullptr);
    BOOST_TEST(sig->prototypes.size() == n);
    BOOST_TEST(sig != &scratch);
  }
  BOOST_TEST(sigs.find(int_list(1)) == nullptr);
  BOOST_TEST(sigs.find(int_list(2)) != nullptr);
  BOOST_TEST(sigs.find(int_list(message_signatures::capacity + 1)) != nullptr);
  // A list longer than max_elements is made in the caller's scratch, not
  // kept: the peer's names do not make the cache large.
  auto long_list = int_list(message_signatures::max_elements + 1);
  auto* sig = sigs.make(types, long_list, unknown, scratch);
  BOOST_REQUIRE(sig == &scratch);
  BOOST_TEST(sig->prototypes.size() == message_signatures::max_elements + 1);
  BOOST_TEST(sigs.find(long_list) == nullptr);
  // A name this system does not know: no signature, the name told.
  BOOST_TEST(sigs.make(types, "@<>+@i32+no_such_type", unknown, scratch)
             == nullptr);
  BOOST_TEST(unknown == "no_such_type");
  BOOST_TEST(sigs.find("@<>+@i32+no_such_type") == nullptr);
}

BOOST_AUTO_TEST_CASE(cached_type_lists_still_get_every_check) {
  remote_system s{false};
  message_signatures sigs;
  // A duration: checked after loading, also when its type list is cached.
  auto good = bytes_of(
      s.sys, caf::make_message(caf::duration{caf::time_unit::seconds, 5}));
  auto ok = deserialize_message(s.sys, good.data(), good.size(), nullptr,
                                nullptr, &sigs);
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  BOOST_TEST(sigs.made() == 1u);
  auto bad = good;
  auto* unit = bad.data() + bad.size() - 12; // u32 unit, then u64 count
  bool big_endian = unit[3] == 2;
  BOOST_REQUIRE(big_endian || unit[0] == 2);
  unit[big_endian ? 3 : 0] = 64;
  auto refused = deserialize_message(s.sys, bad.data(), bad.size(), nullptr,
                                     nullptr, &sigs);
  BOOST_REQUIRE(!refused);
  BOOST_TEST(what_of(refused.error()).find("unknown unit 64")
                 != std::string::npos,
             render(refused.error()));
  BOOST_TEST(sigs.made() == 1u);
  // Short or padded bytes of a cached list: refused, as without the cache.
  auto msg_bytes = bytes_of(s.sys, caf::make_message(int32_t{7}, point{1, 2}));
  BOOST_REQUIRE(deserialize_message(s.sys, msg_bytes.data(), msg_bytes.size(),
                                    nullptr, nullptr, &sigs));
  for (size_t n = 0; n < msg_bytes.size(); ++n)
    BOOST_TEST(!deserialize_message(s.sys, msg_bytes.data(), n, nullptr,
                                    nullptr, &sigs),
               "truncated at " << n);
  auto padded = msg_bytes;
  padded.push_back(0);
  BOOST_TEST(!deserialize_message(s.sys, padded.data(), padded.size(), nullptr,
                                  nullptr, &sigs));
  // A type that cannot travel is refused by name before any list is made:
  // the bytes above with their type list replaced by one naming a group.
  auto made = sigs.made();
  auto with_group = msg_bytes;
  std::string names = "@<>+@i32+point";
  std::string grouped = "@<>+@group+@i32";
  auto pos = std::string(with_group.begin(), with_group.end()).find(names);
  BOOST_REQUIRE(pos != std::string::npos);
  std::vector<uint8_t> banned(with_group.begin(), with_group.begin() + pos);
  BOOST_REQUIRE(pos >= 1);
  banned.back() = static_cast<uint8_t>(grouped.size()); // varint length
  banned.insert(banned.end(), grouped.begin(), grouped.end());
  banned.insert(banned.end(), with_group.begin() + pos + names.size(),
                with_group.end());
  auto r = deserialize_message(s.sys, banned.data(), banned.size(), nullptr,
                               nullptr, &sigs);
  BOOST_REQUIRE(!r);
  BOOST_TEST(what_of(r.error()).find("@group") != std::string::npos,
             render(r.error()));
  BOOST_TEST(sigs.made() == made);
}

BOOST_AUTO_TEST_CASE(kept_written_type_lists_write_the_same_bytes_per_system) {
  auto msg = caf::make_message(int32_t{3}, client_only{}, point{4, 5});
  // One storage for both systems: the second lives at the first's address.
  std::optional<remote_system> node;
  node.emplace(true);
  std::vector<char> plain;
  BOOST_REQUIRE(!serialize_message_into(node->sys, msg, plain));
  for (int i = 0; i < 3; ++i) {
    std::vector<char> kept;
    auto err = serialize_message_into(node->sys, msg, kept, nullptr, true);
    BOOST_REQUIRE_MESSAGE(!err, render(err));
    BOOST_TEST(kept == plain);
  }
  // A type that cannot travel is refused every time.
  for (int i = 0; i < 2; ++i) {
    std::vector<char> buf;
    auto err = serialize_message_into(
        node->sys, caf::make_message(int32_t{1}, caf::group{}), buf, nullptr,
        true);
    BOOST_REQUIRE(err);
    BOOST_TEST(what_of(err).find("@group") != std::string::npos, render(err));
  }
  // A system made where the first was, without client_only registered:
  // the list this thread kept for the first (by its node id) does not let
  // the message through.
  node.reset();
  node.emplace(false);
  for (int i = 0; i < 2; ++i) {
    std::vector<char> buf;
    auto err = serialize_message_into(node->sys, msg, buf, nullptr, true);
    BOOST_REQUIRE(err);
    BOOST_TEST(what_of(err).find("not registered") != std::string::npos,
               render(err));
  }
}

// A cached list is found by its bytes when it is shorter than 128 bytes
// (one length byte), and through CAF's reader when it is longer: both
// load the same values, and neither makes the list again.
BOOST_AUTO_TEST_CASE(short_and_long_cached_lists_load_alike) {
  remote_system s{false};
  message_signatures sigs;
  byte_vector v{1, 2, 3};
  auto short_msg = caf::make_message(int32_t{1}, v);
  auto long_msg = caf::make_message(v, v, v, v, v, v, v, v, v, v, v, v);
  BOOST_REQUIRE_GT(12u * std::string{"+byte_vector"}.size(), 128u);
  for (int round = 0; round < 3; ++round) {
    for (const auto* sent : {&short_msg, &long_msg}) {
      auto bytes = bytes_of(s.sys, *sent);
      auto msg = deserialize_message(s.sys, bytes.data(), bytes.size(), nullptr,
                                     nullptr, &sigs);
      BOOST_REQUIRE_MESSAGE(msg, render(msg));
      BOOST_TEST(to_string(*msg) == to_string(*sent));
      // Cut anywhere, the cached list refuses the message as before.
      for (size_t cut : {size_t{1}, size_t{3}, bytes.size() / 2}) {
        auto part = deserialize_message(s.sys, bytes.data(), bytes.size() - cut,
                                        nullptr, nullptr, &sigs);
        BOOST_TEST(!part);
      }
    }
  }
  BOOST_TEST(sigs.made() == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
