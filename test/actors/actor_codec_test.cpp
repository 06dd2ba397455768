// What the actor codec (actors/remote/actor_codec.hpp) refuses of a peer's
// bytes and of the application's messages: malformed input, values CAF cannot
// print or would crash on, nests too deep, system messages.  Part of
// remote_actors_test.

#include <boost/test/unit_test.hpp>

#include <limits>
#include <string>
#include <vector>

#include <caf/config_value.hpp>
#include <caf/sec.hpp>

#include "actors/remote/actor_codec.hpp"
#include "test/actors/nested_payload.hpp"
#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

/// Checks that `r` is a `serialization_failed` refusal whose text holds
/// `why` (empty: any text).
template <class T>
void expect_refused(const caf::expected<T>& r, const std::string& why = "") {
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::serialization_failed,
             render(r.error()));
  BOOST_TEST(what_of(r.error()).find(why) != std::string::npos,
             render(r.error()));
}

} // namespace

BOOST_AUTO_TEST_SUITE(actor_codec_tests)

BOOST_AUTO_TEST_CASE(hostile_serialized_bytes_are_errors_never_crashes) {
  remote_system s{false};
  auto good = serialize_message(
      s.sys, caf::make_message(byte_vector(64, 1), point{1, 2}));
  BOOST_REQUIRE(good);
  std::vector<uint8_t> bytes(good->begin(), good->end());
  auto ok = deserialize_message(s.sys, bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  bool shape = ok->match_elements<byte_vector, point>();
  BOOST_TEST(shape);
  // Every truncation and every single-byte change: a message or an error.
  size_t errors = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    auto r = deserialize_message(s.sys, bytes.data(), n);
    if (!r)
      ++errors;
    else
      BOOST_TEST_MESSAGE("truncated at " << n << " of " << bytes.size() << ": "
                                         << to_string(*r));
  }
  BOOST_TEST(errors == bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i)
    for (uint8_t v : {uint8_t{0}, uint8_t{0x7f}, uint8_t{0xff}}) {
      auto copy = bytes;
      copy[i] = v;
      auto r = deserialize_message(s.sys, copy.data(), copy.size());
      static_cast<void>(r);
    }
  // A byte vector that claims 2^62 elements is refused before allocating.
  auto header = serialize_message(s.sys, caf::make_message(byte_vector{}));
  BOOST_REQUIRE(header);
  std::vector<uint8_t> huge(header->begin(), header->end() - 1); // size 0
  for (int i = 0; i < 8; ++i)
    huge.push_back(0xff);
  huge.push_back(0x3f);
  std::string hex;
  for (auto b : huge)
    hex += std::to_string(b) + " ";
  BOOST_TEST_MESSAGE("huge: " << hex);
  auto r = deserialize_message(s.sys, huge.data(), huge.size());
  if (r)
    BOOST_TEST_MESSAGE("huge gave " << to_string(*r));
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::serialization_failed);
  // Types that carry runtime internals (groups) are refused by name.
  auto with_group = serialize_message(s.sys, caf::make_message(caf::group{}));
  BOOST_REQUIRE(!with_group);
  BOOST_TEST(code_of(with_group.error()) == errc::serialization_failed);
}

BOOST_AUTO_TEST_CASE(floating_point_values_that_are_not_finite_are_refused) {
  remote_system s{false};
  // Sending: CAF 0.17's packing loops forever on an infinity and writes an
  // arbitrary number for a NaN; both are refused with a remedy.
  for (auto v : {std::numeric_limits<double>::infinity(),
                 -std::numeric_limits<double>::infinity(),
                 std::numeric_limits<double>::quiet_NaN()}) {
    expect_refused(serialize_message(s.sys, caf::make_message(int32_t{1}, v)),
                   "not finite");
  }
  expect_refused(serialize_message(
      s.sys, caf::make_message(std::numeric_limits<float>::infinity())));
  // Finite values travel, the largest included.
  auto big = std::numeric_limits<double>::max();
  auto ok = serialize_message(s.sys, caf::make_message(big, -0.5));
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  auto back = deserialize_message(
      s.sys, reinterpret_cast<const uint8_t*>(ok->data()), ok->size());
  BOOST_REQUIRE_MESSAGE(back, render(back));
  BOOST_REQUIRE((back->match_elements<double, double>()));
  BOOST_TEST(back->get_as<double>(0) == big);
  BOOST_TEST(back->get_as<double>(1) == -0.5);
  // Receiving: the largest exponent decodes to an infinity in CAF's format;
  // a peer's bytes that hold one are refused.
  auto one = serialize_message(s.sys, caf::make_message(1.0));
  BOOST_REQUIRE(one);
  std::vector<uint8_t> bytes(one->begin(), one->end());
  BOOST_REQUIRE(bytes.size() >= 8);
  auto* packed = bytes.data() + bytes.size() - 8; // 1.0: 0x3ff0000000000000
  bool big_endian = packed[0] == 0x3f && packed[1] == 0xf0;
  bool little_endian = packed[7] == 0x3f && packed[6] == 0xf0;
  BOOST_REQUIRE(big_endian || little_endian);
  packed[big_endian ? 0 : 7] = 0x7f;
  expect_refused(deserialize_message(s.sys, bytes.data(), bytes.size()),
                 "not finite");
}

BOOST_AUTO_TEST_CASE(durations_of_unknown_units_and_deep_nests_are_refused) {
  remote_system s{false};
  auto load = [&](const caf::message& msg) {
    auto bytes = serialize_message(s.sys, msg);
    BOOST_REQUIRE_MESSAGE(bytes, render(bytes));
    return std::vector<uint8_t>(bytes->begin(), bytes->end());
  };
  // A caf::duration: its unit is a u32 after the type list; CAF prints a
  // duration by looking the unit up in a table (a crash for unit 64).
  auto good
      = load(caf::make_message(caf::duration{caf::time_unit::seconds, 5}));
  auto ok = deserialize_message(s.sys, good.data(), good.size());
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  BOOST_TEST(caf::to_string(*ok).find('5') != std::string::npos);
  auto bad = good;
  BOOST_REQUIRE(bad.size() >= 12);
  auto* unit = bad.data() + bad.size() - 12; // u32 unit, then u64 count
  bool big_endian = unit[3] == 2;
  BOOST_REQUIRE(big_endian || unit[0] == 2);
  unit[big_endian ? 3 : 0] = 64;
  expect_refused(deserialize_message(s.sys, bad.data(), bad.size()),
                 "unknown unit 64");
  // The same inside the context of an error inside the message.
  auto in_error = load(caf::make_message(caf::error{
      1, caf::atom("app"),
      caf::make_message(caf::duration{caf::time_unit::seconds, 5})}));
  unit = in_error.data() + in_error.size() - 12;
  BOOST_REQUIRE(unit[big_endian ? 3 : 0] == 2);
  unit[big_endian ? 3 : 0] = 64;
  expect_refused(deserialize_message(s.sys, in_error.data(), in_error.size()),
                 "unknown unit 64");
  // And in a message of a std::vector<caf::message> (CAF registers the
  // type): CAF printed it and crashed (found by rdmactor_fuzz_actor_codec).
  auto in_list = load(
      caf::make_message(std::vector<caf::message>{caf::make_message(caf::error{
          1, caf::atom("app"),
          caf::make_message(caf::duration{caf::time_unit::seconds, 5})})}));
  unit = in_list.data() + in_list.size() - 12;
  BOOST_REQUIRE(unit[big_endian ? 3 : 0] == 2);
  unit[big_endian ? 3 : 0] = 64;
  expect_refused(deserialize_message(s.sys, in_list.data(), in_list.size()),
                 "unknown unit 64");
  // Errors nest messages, and CAF loads them recursively: a deep nest is
  // refused (a peer could otherwise overflow the stack), a shallow one and
  // many errors side by side are not.
  auto nest = [](int levels) {
    caf::error e{1, caf::atom("app")};
    for (int i = 0; i < levels; ++i)
      e = caf::error{1, caf::atom("app"), caf::make_message(e)};
    return caf::make_message(e);
  };
  auto deep = load(nest(100));
  expect_refused(deserialize_message(s.sys, deep.data(), deep.size()),
                 "nested");
  auto shallow = load(nest(10));
  auto r2 = deserialize_message(s.sys, shallow.data(), shallow.size());
  BOOST_REQUIRE_MESSAGE(r2, render(r2));
  caf::error e{1, caf::atom("app"), caf::make_message(std::string{"x"})};
  auto wide = load(caf::make_message(e, e, e, e, e, e, e, e, e, e, e, e, e, e,
                                     e, e, e, e, e, e));
  auto r3 = deserialize_message(s.sys, wide.data(), wide.size());
  BOOST_REQUIRE_MESSAGE(r3, render(r3));
  BOOST_TEST(r3->size() == 20u);
  // Empty messages side by side open no level: CAF reads an empty message
  // without ending its object (found by rdmactor_fuzz_actor_codec: a list
  // of 114 empty messages was refused as "nested more than 16 levels").
  std::vector<caf::message> empties(200);
  auto list = load(caf::make_message(empties));
  auto r4 = deserialize_message(s.sys, list.data(), list.size());
  BOOST_REQUIRE_MESSAGE(r4, render(r4));
  BOOST_TEST(r4->get_as<std::vector<caf::message>>(0).size() == 200u);
}

// Lists, maps and config values nest through sequences, not messages:
// CAF loads each level recursively, so a peer's 40 KB of config_value
// lists nested 20,000 deep overflowed the agent's stack.  Every nested
// object and sequence counts; a nest of a few levels still loads.
BOOST_AUTO_TEST_CASE(values_nested_too_deep_are_refused_before_they_load) {
  remote_system s{false};
  auto nest = [](int levels) {
    caf::config_value v{int64_t{7}};
    for (int i = 0; i < levels; ++i)
      v = caf::config_value{caf::config_value::list{v}};
    return caf::make_message(v);
  };
  auto load = [&](const caf::message& msg) {
    auto bytes = serialize_message(s.sys, msg);
    BOOST_REQUIRE_MESSAGE(bytes, render(bytes));
    return std::vector<uint8_t>(bytes->begin(), bytes->end());
  };
  BOOST_REQUIRE(nested_config_value_bytes(s.sys, 5) == load(nest(5)));
  auto two = load(nest(2));
  auto fine = deserialize_message(s.sys, two.data(), two.size());
  BOOST_REQUIRE_MESSAGE(fine, render(fine));
  auto forty = load(nest(40));
  auto ok = deserialize_message(s.sys, forty.data(), forty.size());
  BOOST_REQUIRE_MESSAGE(ok, render(ok));
  BOOST_TEST(ok->match_elements<caf::config_value>());
  // 200,000 levels (a few hundred KB): refused, not a crash.
  auto deep = nested_config_value_bytes(s.sys, 200000);
  expect_refused(deserialize_message(s.sys, deep.data(), deep.size()),
                 "nested more than");
  // Maps nest the same way: a dictionary of dictionaries.
  caf::config_value d{int64_t{1}};
  for (int i = 0; i < 100; ++i) {
    caf::config_value::dictionary dict;
    dict.emplace("k", d);
    d = caf::config_value{std::move(dict)};
  }
  auto maps = load(caf::make_message(d));
  expect_refused(deserialize_message(s.sys, maps.data(), maps.size()),
                 "nested more than");
}

// A peer's message that CAF would take as a system message instead of a
// message for the actor: a lone error (the error handler: the actor
// quits) or a sys_atom query.  Refused from peers unless it is a
// response, and refused on the sending side with the remedy.
BOOST_AUTO_TEST_CASE(system_messages_are_refused_unless_responses) {
  remote_system s{false};
  auto lone = caf::make_message(make_error(errc::peer_error, "x"));
  auto err = check_not_system_message(lone, true);
  BOOST_TEST(code_of(err) == errc::serialization_failed, render(err));
  BOOST_TEST(what_of(err).find("error handler") != std::string::npos);
  err = check_not_system_message(lone, false);
  BOOST_TEST(what_of(err).find("add an atom") != std::string::npos);
  auto sys_query = caf::make_message(caf::sys_atom::value, caf::get_atom::value,
                                     std::string{"info"});
  BOOST_TEST(code_of(check_not_system_message(sys_query, true))
             == errc::serialization_failed);
  // An error beside other elements is an ordinary message.
  BOOST_TEST(!check_not_system_message(
      caf::make_message(caf::atom("failed"), make_error(errc::peer_error, "x")),
      true));
  BOOST_TEST(!check_not_system_message(caf::make_message(int32_t{1}), true));
  BOOST_TEST(!check_not_system_message(caf::message{}, true));
}

// The types that never travel (exit and down messages, groups, streams,
// nested messages, timeouts), by CAF's portable names, and nothing else:
// the check runs for every object of every message.
BOOST_AUTO_TEST_CASE(banned_type_names_are_exactly_the_system_types) {
  for (const char* name :
       {"@down", "@downstream_msg", "@exit", "@group", "@group_down",
        "@message", "@open_stream_msg", "@timeout", "@upstream_msg"})
    BOOST_TEST(banned_type_name(name), name);
  for (const char* name : {"", "@", "@exi", "@exits", "@u64", "@str", "@atom",
                           "@actor", "@error", "down", "exit", "@Exit"})
    BOOST_TEST(!banned_type_name(name), name);
}

BOOST_AUTO_TEST_SUITE_END()
