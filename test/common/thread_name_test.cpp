#include <boost/test/unit_test.hpp>

// common/thread_name.hpp: rdmactor's threads carry their job in their name.

#include <string>
#include <thread>

#include "common/thread_name.hpp"

using rdmactor::name_this_thread;
using rdmactor::this_thread_name;

BOOST_AUTO_TEST_SUITE(thread_name_suite)

BOOST_AUTO_TEST_CASE(a_thread_reads_back_its_name_cut_at_15_characters) {
  std::string short_name, long_name;
  std::thread t{[&] {
    name_this_thread("rdm.test");
    short_name = this_thread_name();
    name_this_thread("rdm.a-name-longer-than-fifteen");
    long_name = this_thread_name();
  }};
  t.join();
#if defined(__linux__)
  BOOST_TEST(short_name == "rdm.test");
  BOOST_TEST(long_name == "rdm.a-name-long");
#else
  BOOST_TEST(short_name.empty());
#endif
}

BOOST_AUTO_TEST_CASE(naming_one_thread_leaves_the_others_alone) {
  std::string before = this_thread_name();
  std::thread t{[] { name_this_thread("rdm.other"); }};
  t.join();
  BOOST_TEST(std::string{this_thread_name()} == before);
}

BOOST_AUTO_TEST_SUITE_END()
