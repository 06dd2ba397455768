// Verbs fabric tests that run on any host (label unit): the error for a
// missing RDMA device and the handshake codec.

#define BOOST_TEST_MODULE verbs_unit_test
#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <cstring>
#include <string>

#include <infiniband/verbs.h>

#include "common/logging.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"
#include "transport/verbs/handshake.hpp"
#include "transport/verbs/verbs_fabric.hpp"

using namespace rdmactor;
using namespace rdmactor::transport::verbs;
using rdmactor::transport::conn_params;

namespace {

bool contains(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Returns the errno ibv_get_device_list leaves when it finds no device.
int device_list_errno() {
  errno = 0;
  int n = 0;
  auto list = ibv_get_device_list(&n);
  auto err = errno;
  if (list != nullptr)
    ibv_free_device_list(list);
  return list == nullptr ? err : 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(no_device)

BOOST_AUTO_TEST_CASE(open_device_fails_with_a_helpful_message) {
  set_log_level("warn");
  if (devices_present()) {
    BOOST_TEST_MESSAGE("an RDMA device is present: nothing to check here");
    return;
  }
  options opts;
  opts.fabric = "verbs";
  auto dev = transport::open_device(opts);
  BOOST_REQUIRE(!dev);
  BOOST_TEST(code_of(dev.error()) == errc::fabric_unavailable);
  auto what = what_of(dev.error());
  BOOST_TEST_MESSAGE("open_device: " << what);
  BOOST_TEST(contains(what, "no RDMA device"));
  BOOST_TEST(contains(what, "rdma link add rxe0 type rxe netdev"));
  BOOST_TEST(contains(what, "fabric=soft"));
  if (device_list_errno() == ENOSYS) {
    BOOST_TEST(contains(what, "ENOSYS"));
    BOOST_TEST(contains(what, "kernel has no RDMA support"));
  }
  // The verbs entry point directly, twice: no state is left behind.
  for (int i = 0; i < 2; ++i) {
    auto again = open_device(opts);
    BOOST_REQUIRE(!again);
    BOOST_TEST(code_of(again.error()) == errc::fabric_unavailable);
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(handshake)

BOOST_AUTO_TEST_CASE(offer_and_answer_round_trip) {
  conn_params p{8192, 16};
  for (auto kind : {hello_kind::offer, hello_kind::answer}) {
    auto bytes = encode_hello(kind, p);
    BOOST_TEST(bytes.size() == hello_size);
    BOOST_TEST(bytes[0] == 'R');
    BOOST_TEST(bytes[3] == 'C');
    auto h = decode_hello(bytes.data(), bytes.size(), kind);
    BOOST_REQUIRE(h);
    BOOST_TEST((h->kind == kind));
    BOOST_TEST(h->version == hello_version);
    BOOST_TEST(h->params.max_message_len_bytes == 8192u);
    BOOST_TEST(h->params.recv_depth == 16u);
  }
}

BOOST_AUTO_TEST_CASE(padding_after_the_message_is_ignored) {
  // InfiniBand CM hands the receiver all 56 bytes of REQ private data.
  uint8_t padded[56] = {};
  auto bytes = encode_hello(hello_kind::offer, conn_params{4096, 8});
  std::memcpy(padded, bytes.data(), bytes.size());
  auto h = decode_hello(padded, sizeof(padded), hello_kind::offer);
  BOOST_REQUIRE(h);
  BOOST_TEST(h->params.recv_depth == 8u);
  std::memset(padded + hello_size, 0xFF, sizeof(padded) - hello_size);
  BOOST_TEST(static_cast<bool>(
      decode_hello(padded, sizeof(padded), hello_kind::offer)));
}

BOOST_AUTO_TEST_CASE(malformed_private_data_is_rejected) {
  auto good = encode_hello(hello_kind::offer, conn_params{});
  // Too short, null.
  for (size_t len : {size_t{0}, size_t{1}, size_t{4}, hello_size - 1}) {
    auto h = decode_hello(good.data(), len, hello_kind::offer);
    BOOST_REQUIRE(!h);
    BOOST_TEST(code_of(h.error()) == errc::handshake_failed);
  }
  BOOST_TEST(code_of(decode_hello(nullptr, 56, hello_kind::offer).error())
             == errc::handshake_failed);
  // Wrong magic.
  auto bad = good;
  bad[0] ^= 0xFF;
  BOOST_TEST(
      code_of(decode_hello(bad.data(), bad.size(), hello_kind::offer).error())
      == errc::handshake_failed);
  // Another version.
  bad = good;
  bad[5] = 2;
  auto v = decode_hello(bad.data(), bad.size(), hello_kind::offer);
  BOOST_REQUIRE(!v);
  BOOST_TEST(code_of(v.error()) == errc::version_mismatch);
  BOOST_TEST(contains(what_of(v.error()), "version 2"));
  // Unexpected or unknown kind, reserved byte set.
  BOOST_TEST(!decode_hello(good.data(), good.size(), hello_kind::answer));
  bad = good;
  bad[6] = 99;
  BOOST_TEST(!decode_hello(bad.data(), bad.size(), hello_kind::offer));
  bad = good;
  bad[7] = 1;
  BOOST_TEST(!decode_hello(bad.data(), bad.size(), hello_kind::offer));
  // Out-of-range parameters.
  auto zero_depth = encode_hello(hello_kind::offer, conn_params{4096, 0});
  BOOST_TEST(code_of(decode_hello(zero_depth.data(), zero_depth.size(),
                                  hello_kind::offer)
                         .error())
             == errc::handshake_failed);
  // A depth of 1-3 is below what the data path needs (min_recv_depth):
  // refused at the handshake, not later when the link opens.
  for (uint32_t depth : {1u, 2u, 3u}) {
    auto shallow = encode_hello(hello_kind::offer, conn_params{4096, depth});
    auto d = decode_hello(shallow.data(), shallow.size(), hello_kind::offer);
    BOOST_REQUIRE(!d);
    BOOST_TEST(code_of(d.error()) == errc::handshake_failed);
    BOOST_TEST(contains(what_of(d.error()), "below the 4"), render(d.error()));
  }
  auto four = encode_hello(hello_kind::offer, conn_params{4096, 4});
  BOOST_TEST(static_cast<bool>(
      decode_hello(four.data(), four.size(), hello_kind::offer)));
  auto tiny = encode_hello(hello_kind::offer, conn_params{8, 4});
  BOOST_TEST(
      code_of(decode_hello(tiny.data(), tiny.size(), hello_kind::offer).error())
      == errc::handshake_failed);
  // Huge offers are fine: negotiation takes the minimum.
  auto huge
      = encode_hello(hello_kind::offer, conn_params{UINT32_MAX, UINT32_MAX});
  auto h = decode_hello(huge.data(), huge.size(), hello_kind::offer);
  BOOST_REQUIRE(h);
  auto n = negotiate(conn_params{65536, 64}, h->params);
  BOOST_TEST(n.max_message_len_bytes == 65536u);
  BOOST_TEST(n.recv_depth == 64u);
}

BOOST_AUTO_TEST_CASE(reject_carries_a_believable_reason) {
  auto r = encode_reject(errc::version_mismatch);
  auto h = decode_hello(r.data(), r.size(), hello_kind::answer);
  BOOST_REQUIRE(h);
  BOOST_TEST((h->kind == hello_kind::reject));
  BOOST_TEST(h->reason == errc::version_mismatch);
  // A code that names no handshake outcome becomes connect_failed.
  r = encode_reject(errc::internal_error);
  h = decode_hello(r.data(), r.size(), hello_kind::answer);
  BOOST_REQUIRE(h);
  BOOST_TEST(h->reason == errc::connect_failed);
  r[11] = 0xEE; // no such errc
  h = decode_hello(r.data(), r.size(), hello_kind::answer);
  BOOST_REQUIRE(h);
  BOOST_TEST(h->reason == errc::connect_failed);
}

BOOST_AUTO_TEST_CASE(negotiation_takes_the_minimum) {
  auto n = negotiate(conn_params{8192, 64}, conn_params{65536, 16});
  BOOST_TEST(n.max_message_len_bytes == 8192u);
  BOOST_TEST(n.recv_depth == 16u);
}

BOOST_AUTO_TEST_SUITE_END()
