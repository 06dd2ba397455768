#define BOOST_TEST_MODULE send_data_stream
#include <boost/test/unit_test.hpp>

// The sender's side of one send_data call (actors/core/send_data_stream.hpp):
// chunks, the window, the end with the bytes sent or the first error.

#include <memory>
#include <optional>
#include <vector>

#include "actors/core/send_data_stream.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/memory_pool.hpp"
#include "test/support/fake_fabric.hpp"

using namespace rdmactor;

namespace {

struct fixture {
  std::shared_ptr<fuzz::fake_device> dev
      = std::make_shared<fuzz::fake_device>();
  memory_pool_ptr pool = std::make_shared<memory_pool>(dev, 1 << 20, 1 << 24);
  /// What `done` got, each call.
  std::vector<caf::expected<uint64_t>> ends;

  local_mr region(uint64_t len) {
    auto mr = pool->allocate(len, 64, transport::access::all);
    BOOST_REQUIRE(mr);
    return std::move(*mr);
  }

  send_data_stream stream(uint64_t len, size_t chunk_max, size_t window,
                          std::optional<uint32_t> imm = std::nullopt) {
    return send_data_stream{
        region(len), chunk_max, window, imm,
        [this](caf::expected<uint64_t> r) { ends.push_back(std::move(r)); }};
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(send_data_stream_suite, fixture)

BOOST_AUTO_TEST_CASE(chunks_cover_the_region_within_the_window) {
  auto s = stream(2500, 1000, 2);
  BOOST_REQUIRE(s.wants_chunk());
  auto a = s.next_eager();
  auto b = s.next_eager();
  BOOST_TEST(a.size() == 1000u);
  BOOST_TEST(b.size() == 1000u);
  BOOST_TEST(b.data() == a.data() + 1000);
  // Two in flight: the window is full.
  BOOST_TEST(!s.wants_chunk());
  BOOST_TEST(s.answered(1000, {}));
  BOOST_REQUIRE(s.wants_chunk());
  auto c = s.next_eager();
  BOOST_TEST(c.size() == 500u);     // the rest
  BOOST_TEST(!s.wants_chunk());     // nothing left
  BOOST_TEST(s.answered(1000, {})); // one in flight still
  BOOST_TEST(ends.empty());
  // The last acknowledgement ends it with the bytes sent.
  BOOST_TEST(!s.answered(500, {}));
  BOOST_REQUIRE(ends.size() == 1u);
  BOOST_REQUIRE(ends[0]);
  BOOST_TEST(*ends[0] == 2500u);
  BOOST_TEST(s.ended());
}

BOOST_AUTO_TEST_CASE(an_empty_region_goes_as_one_empty_chunk) {
  auto s = stream(0, 1000, 4);
  BOOST_REQUIRE(s.wants_chunk());
  BOOST_TEST(s.next_eager().size() == 0u);
  BOOST_TEST(!s.wants_chunk());
  BOOST_TEST(!s.answered(0, {}));
  BOOST_REQUIRE(ends.size() == 1u);
  BOOST_TEST(*ends[0] == 0u);
}

BOOST_AUTO_TEST_CASE(the_first_error_ends_it_once) {
  auto s = stream(3000, 1000, 3, 7u);
  BOOST_TEST(*s.imm() == 7u);
  s.next_eager();
  s.next_eager();
  s.next_eager();
  BOOST_TEST(!s.answered(1000, make_error(errc::request_timeout, "late")));
  BOOST_REQUIRE(ends.size() == 1u);
  BOOST_TEST(code_of(ends[0].error()) == errc::request_timeout);
  // Later answers (acknowledgements or errors) change nothing.
  BOOST_TEST(!s.answered(1000, {}));
  BOOST_TEST(!s.answered(1000, make_error(errc::peer_gone, "gone")));
  BOOST_TEST(ends.size() == 1u);
  BOOST_TEST(s.outstanding() == 0u);
  BOOST_TEST(!s.wants_chunk());
  s.fail(make_error(errc::closed, "closed"));
  BOOST_TEST(ends.size() == 1u);
}

BOOST_AUTO_TEST_CASE(rendezvous_pieces_take_up_to_their_maximum) {
  auto s = stream(10000, 1000, 4);
  BOOST_TEST(s.left() > s.chunk_max());
  auto p1 = s.next_piece(6000);
  BOOST_TEST(p1.first == 0u);
  BOOST_TEST(p1.second == 6000u);
  auto p2 = s.next_piece(6000);
  BOOST_TEST(p2.first == 6000u);
  BOOST_TEST(p2.second == 4000u);
  BOOST_TEST(s.left() == 0u);
  BOOST_TEST(s.answered(6000, {}));
  BOOST_TEST(!s.answered(4000, {}));
  BOOST_REQUIRE(ends.size() == 1u);
  BOOST_TEST(*ends[0] == 10000u);
}

BOOST_AUTO_TEST_CASE(failing_before_any_answer_ends_it) {
  auto s = stream(5000, 1000, 2);
  s.fail(make_error(errc::internal_error, "cannot register"));
  BOOST_TEST(s.ended());
  BOOST_TEST(!s.wants_chunk());
  BOOST_REQUIRE(ends.size() == 1u);
  BOOST_TEST(!ends[0]);
}

BOOST_AUTO_TEST_SUITE_END()
