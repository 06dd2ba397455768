#define BOOST_TEST_MODULE ack_gatherer
#include <boost/test/unit_test.hpp>

#include <vector>

#include "actors/core/ack_gatherer.hpp"
#include "common/tuning.hpp"
#include "protocol/codec.hpp"

using namespace rdmactor;
using step = ack_gatherer::step;

BOOST_AUTO_TEST_SUITE(ack_gatherer_suite)

BOOST_AUTO_TEST_CASE(the_first_id_since_a_flush_schedules_one) {
  ack_gatherer a;
  BOOST_TEST((a.add(1) == step::schedule_flush));
  BOOST_TEST((a.add(2) == step::none));
  BOOST_TEST((a.ids() == std::vector<uint64_t>{1, 2}));
  a.clear();
  BOOST_TEST(a.empty());
  // After the flush the next id schedules again.
  BOOST_TEST((a.add(3) == step::schedule_flush));
}

BOOST_AUTO_TEST_CASE(a_full_response_goes_at_once) {
  ack_gatherer a;
  for (uint64_t i = 1; i < tuning::max_acks_per_response; ++i)
    BOOST_TEST((a.add(i) != step::flush_now));
  BOOST_TEST((a.add(99) == step::flush_now));
  BOOST_TEST(a.ids().size() == tuning::max_acks_per_response);
}

BOOST_AUTO_TEST_CASE(a_flush_keeps_the_storage_for_the_next_ids) {
  ack_gatherer a;
  a.add(1);
  a.add(2);
  auto storage = a.ids().data();
  a.clear();
  BOOST_TEST(a.empty());
  a.add(3);
  // The next id lands where the last ones were: no allocation per flush.
  BOOST_TEST(a.ids().data() == storage);
}

BOOST_AUTO_TEST_CASE(as_many_ride_as_the_room_takes) {
  ack_gatherer a;
  BOOST_TEST(a.fit(4096) == 0u); // nothing owed
  for (uint64_t i = 1; i <= 5; ++i)
    a.add(i);
  BOOST_TEST(a.fit(protocol::piggyback_ack_overhead(1) - 1) == 0u);
  BOOST_TEST(a.fit(protocol::piggyback_ack_overhead(1)) == 1u);
  BOOST_TEST(a.fit(protocol::piggyback_ack_overhead(3)) == 3u);
  BOOST_TEST(a.fit(4096) == 5u);
  // The oldest ride first; the rest stay owed.
  a.attached(3);
  BOOST_TEST((a.ids() == std::vector<uint64_t>{4, 5}));
  a.attached(10);
  BOOST_TEST(a.empty());
}

BOOST_AUTO_TEST_CASE(at_most_one_responses_worth_rides) {
  ack_gatherer a;
  for (uint64_t i = 1; i < tuning::max_acks_per_response; ++i)
    a.add(i);
  a.add(1000); // flush_now asked; the owner may still let them ride first
  BOOST_TEST(a.fit(1 << 20) == tuning::max_acks_per_response);
}

BOOST_AUTO_TEST_SUITE_END()
