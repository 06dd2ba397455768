// A message loaded from a peer keeps its elements in its own allocation
// (actors/remote/loaded_message.hpp): laid out by type, the same elements
// and type token as CAF's dynamic_message_data, and copy on write as any
// message.  Part of remote_actors_test.

#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <caf/detail/dynamic_message_data.hpp>

#include "actors/remote/actor_codec.hpp"
#include "actors/remote/loaded_message.hpp"
#include "actors/remote/message_signatures.hpp"
#include "test/actors/remote_actors_fixture.hpp"

using namespace rdmactor;
using namespace rdmactor::test;

namespace {

using bytes_t = std::vector<uint8_t>;

caf::message mixed(int32_t i) {
  return caf::make_message(caf::atom("ping"), i, std::string(40, 'x'),
                           bytes_t{1, 2, 3}, point{i, i + 1}, 2.5);
}

caf::message load(remote_system& s, message_signatures& sigs,
                  const caf::message& msg) {
  auto bytes = serialize_message(s.sys, msg);
  BOOST_REQUIRE_MESSAGE(bytes, render(bytes));
  auto out = deserialize_message(
      s.sys, reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(),
      nullptr, nullptr, &sigs);
  BOOST_REQUIRE_MESSAGE(out, render(out));
  return std::move(*out);
}

} // namespace

BOOST_AUTO_TEST_SUITE(loaded_message_tests)

BOOST_AUTO_TEST_CASE(known_types_go_in_place_and_others_on_the_heap) {
  remote_system s{false};
  std::vector<caf::type_erased_value_ptr> protos;
  for (auto name : {"@atom", "@i32", "@str", "point", "byte_vector"})
    protos.emplace_back(s.sys.types().make_value(name));
  for (auto& p : protos)
    BOOST_REQUIRE(p);
  auto layout = layout_of(protos);
  BOOST_REQUIRE_EQUAL(layout.slots.size(), 5u);
  BOOST_TEST(layout.slots[0].construct != nullptr);
  BOOST_TEST(layout.slots[1].construct != nullptr);
  BOOST_TEST(layout.slots[2].construct != nullptr);
  BOOST_TEST(layout.slots[3].construct == nullptr); // an application type
  BOOST_TEST(layout.slots[4].construct != nullptr); // std::vector<uint8_t>
  BOOST_TEST(layout.storage_bytes > 0u);
  // CAF's type token of the same elements.
  caf::detail::dynamic_message_data::elements copies;
  for (auto& p : protos)
    copies.emplace_back(p->copy());
  caf::detail::dynamic_message_data reference{std::move(copies)};
  BOOST_TEST(layout.type_token == reference.type_token());
  auto data = loaded_message_data::make(layout, protos);
  BOOST_REQUIRE_EQUAL(data->size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    BOOST_TEST((data->type(i) == reference.type(i)));
    BOOST_TEST(data->stringify(i) == reference.stringify(i));
  }
}

BOOST_AUTO_TEST_CASE(a_loaded_message_holds_what_was_sent) {
  remote_system s{false};
  message_signatures sigs;
  for (int32_t i = 0; i < 3; ++i) {
    auto sent = mixed(i);
    auto msg = load(s, sigs, sent);
    BOOST_TEST(dynamic_cast<const loaded_message_data*>(&msg.content())
               != nullptr);
    BOOST_REQUIRE((msg.match_elements<caf::atom_value, int32_t, std::string,
                                      bytes_t, point, double>()));
    BOOST_TEST(msg.type_token() == sent.type_token());
    BOOST_TEST(msg.get_as<int32_t>(1) == i);
    BOOST_TEST(msg.get_as<std::string>(2) == std::string(40, 'x'));
    BOOST_TEST(msg.get_as<bytes_t>(3) == (bytes_t{1, 2, 3}));
    BOOST_TEST(msg.get_as<point>(4).y == i + 1);
    BOOST_TEST(to_string(msg) == to_string(sent));
    // Sent on again, it writes the same bytes.
    auto again = serialize_message(s.sys, msg);
    auto first = serialize_message(s.sys, sent);
    BOOST_REQUIRE(again && first);
    BOOST_TEST(*again == *first);
  }
  BOOST_TEST(sigs.made() == 1u);
}

BOOST_AUTO_TEST_CASE(a_shared_loaded_message_is_copied_on_write) {
  remote_system s{false};
  message_signatures sigs;
  auto msg = load(s, sigs, mixed(7));
  auto other = msg; // shares the data
  other.get_mutable_as<int32_t>(1) = 8;
  other.get_mutable_as<std::string>(2) = "changed";
  BOOST_TEST(msg.get_as<int32_t>(1) == 7);
  BOOST_TEST(msg.get_as<std::string>(2) == std::string(40, 'x'));
  BOOST_TEST(other.get_as<int32_t>(1) == 8);
  BOOST_TEST(other.get_as<point>(4).x == 7);
  // A message that holds its data alone changes in place.
  msg.get_mutable_as<int32_t>(1) = 9;
  BOOST_TEST(msg.get_as<int32_t>(1) == 9);
  BOOST_TEST(dynamic_cast<const loaded_message_data*>(&msg.content())
             != nullptr);
}

BOOST_AUTO_TEST_CASE(more_elements_than_kept_load_as_before) {
  remote_system s{false};
  message_signatures sigs;
  auto sent = caf::make_message(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                                15, 16, 17);
  auto msg = load(s, sigs, sent);
  BOOST_TEST(msg.size() == 17u);
  BOOST_TEST(dynamic_cast<const loaded_message_data*>(&msg.content())
             == nullptr);
  BOOST_TEST(to_string(msg) == to_string(sent));
}

// The mailbox element that carries a loaded message lives in the
// message's block (remote_actors' deliver): its room is taken once, by an
// object of the size it was made for, only while nobody else holds the
// message; the block stays until both the companion and the message went,
// whichever goes first (the sanitizer builds see a use after free).
BOOST_AUTO_TEST_CASE(a_companion_shares_the_block_and_either_goes_first) {
  remote_system s{false};
  message_signatures sigs;
  struct companion {
    caf::message msg;
    std::string text = std::string(64, 'c'); // on the heap
  };
  auto sent = mixed(5);
  auto bytes = serialize_message(s.sys, sent);
  BOOST_REQUIRE(bytes);
  auto load_with_room = [&] {
    auto r = deserialize_message(
        s.sys, reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size(),
        nullptr, nullptr, &sigs, sizeof(companion));
    BOOST_REQUIRE_MESSAGE(r, render(r));
    return std::move(*r);
  };
  for (bool companion_first : {true, false}) {
    BOOST_TEST_CONTEXT("companion first: " << companion_first) {
      auto msg = load_with_room();
      auto shared = msg;
      BOOST_TEST(loaded_message_data::take_companion(msg, sizeof(companion))
                 == nullptr); // held twice
      shared = caf::message{};
      BOOST_TEST(loaded_message_data::take_companion(msg, 8) == nullptr);
      void* room = loaded_message_data::take_companion(msg, sizeof(companion));
      BOOST_REQUIRE(room != nullptr);
      BOOST_TEST(loaded_message_data::take_companion(msg, sizeof(companion))
                 == nullptr); // taken
      // One block: the room right in front of the message's elements.
      auto* first = static_cast<const unsigned char*>(msg.at(0));
      BOOST_TEST(first > static_cast<unsigned char*>(room));
      BOOST_TEST(first - static_cast<unsigned char*>(room) < 512);
      auto* c = new (room) companion{std::move(msg), {}};
      BOOST_TEST(to_string(c->msg) == to_string(sent));
      auto kept = c->msg;
      if (companion_first) {
        c->~companion();
        loaded_message_data::release_companion(room, sizeof(companion));
        BOOST_TEST(to_string(kept) == to_string(sent));
        kept = caf::message{};
      } else {
        kept = caf::message{};
        c->msg = caf::message{};
        c->~companion();
        loaded_message_data::release_companion(room, sizeof(companion));
      }
    }
  }
  // Made without room, or not a loaded message: none.
  auto plain = load(s, sigs, sent);
  BOOST_TEST(loaded_message_data::take_companion(plain, sizeof(companion))
             == nullptr);
  auto own = sent;
  BOOST_TEST(loaded_message_data::take_companion(own, sizeof(companion))
             == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
