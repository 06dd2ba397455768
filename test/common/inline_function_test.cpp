#include <boost/test/unit_test.hpp>

// common/inline_function.hpp: a std::function that keeps callables up to
// its capacity in place.

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "common/inline_function.hpp"

using rdmactor::inline_function;

namespace {

using fn = inline_function<int(int), 48>;

/// Counts live copies of itself.
struct tracked {
  std::shared_ptr<int> live;
  explicit tracked(std::shared_ptr<int> l) : live(std::move(l)) {
    ++*live;
  }
  tracked(const tracked& other) : live(other.live) {
    ++*live;
  }
  tracked(tracked&& other) noexcept : live(other.live) {
    ++*live;
  }
  ~tracked() {
    --*live;
  }
  int operator()(int x) const {
    return x + 1;
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(inline_function_suite)

BOOST_AUTO_TEST_CASE(captures_up_to_the_capacity_stay_in_place) {
  // What the data path's chunk completion captures: a pointer, a
  // shared_ptr and a length (not trivially copyable: std::function would
  // allocate).
  auto owner = std::make_shared<int>(5);
  int* self = nullptr;
  size_t len = 3;
  auto chunk = [self, owner, len](int x) {
    return x + *owner + static_cast<int>(len) + (self == nullptr ? 0 : 1);
  };
  static_assert(fn::stored_in_place<decltype(chunk)>);
  fn f = chunk;
  BOOST_TEST(f(1) == 9);
  std::array<char, 64> big{};
  auto large = [big](int x) { return x + big[0]; };
  static_assert(!fn::stored_in_place<decltype(large)>);
  fn g = large;
  BOOST_TEST(g(2) == 2);
}

BOOST_AUTO_TEST_CASE(moves_copies_and_destroys_the_callable_once_each) {
  auto live = std::make_shared<int>(0);
  {
    fn a = tracked{live};
    BOOST_TEST(*live == 1);
    fn b = a; // a copy
    BOOST_TEST(*live == 2);
    fn c = std::move(a);
    BOOST_TEST(*live == 2);
    BOOST_TEST(!a);
    BOOST_TEST(c(1) == 2);
    c = nullptr;
    BOOST_TEST(*live == 1);
    b = std::move(c); // empty into full: b's callable goes
    BOOST_TEST(*live == 0);
    BOOST_TEST(!b);
  }
  BOOST_TEST(*live == 0);
  {
    std::array<char, 100> pad{};
    auto boxed = [t = tracked{live}, pad](int x) { return t(x) + pad[0]; };
    static_assert(!fn::stored_in_place<decltype(boxed)>);
    fn a = boxed;
    fn b = a;
    fn c = std::move(a);
    BOOST_TEST(c(4) == 5);
    BOOST_TEST(b(4) == 5);
  }
  BOOST_TEST(*live == 0);
}

BOOST_AUTO_TEST_CASE(empty_ones_say_so_and_throw_when_called) {
  fn a;
  BOOST_TEST(!a);
  BOOST_TEST((a == nullptr));
  BOOST_CHECK_THROW(a(1), std::bad_function_call);
  std::function<int(int)> none;
  fn b = none;
  BOOST_TEST(!b);
  int (*null_fp)(int) = nullptr;
  fn c = null_fp;
  BOOST_TEST(!c);
  std::function<int(int)> twice = [](int x) { return 2 * x; };
  fn d = twice;
  BOOST_TEST((d != nullptr));
  BOOST_TEST(d(21) == 42);
}

BOOST_AUTO_TEST_CASE(arguments_are_forwarded_by_reference) {
  inline_function<void(const std::string&, std::string&)> f
      = [](const std::string& in, std::string& out) { out = in + "!"; };
  std::string out;
  f("hi", out);
  BOOST_TEST(out == "hi!");
}

BOOST_AUTO_TEST_SUITE_END()
