// Verbs-only tests (label verbs): need an RDMA device, e.g. Soft-RoCE in
// the VM of scripts/rxe-vm.sh.  The fabric-generic behaviour is covered by
// test/transport/fabric_test.cpp, registered again as fabric_test_verbs.
//
//   RDMACTOR_TEST_HOST  an address on the RDMA interface (198.18.0.1 in
//                       the VM)

#define BOOST_TEST_MODULE verbs_test
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/logging.hpp"
#include "test/transport/fabric_fixture.hpp"
#include "transport/verbs/handshake.hpp"
#include "transport/verbs/verbs_fabric.hpp"

extern char** environ;

using namespace rdmactor;
using namespace rdmactor::test;
using transport::conn_params;
using transport::sge;
using transport::wc_status;
using transport::access::local_write;
using transport::access::remote_read;
using transport::access::remote_write;

namespace {

struct verbs_fixture {
  options opts;

  verbs_fixture() {
    opts.fabric = "verbs";
    opts.log_level = env_or("RDMACTOR_TEST_LOG_LEVEL", "warn");
    set_log_level(opts.log_level);
    BOOST_REQUIRE_MESSAGE(transport::verbs::devices_present(),
                          "no RDMA device: run this suite with "
                          "scripts/rxe-vm.sh");
  }

  transport::device_ptr open() {
    return value_or_throw(transport::open_device(opts), "open_device");
  }
};

/// Returns the name of the first RDMA device.
std::string first_device_name() {
  int n = 0;
  auto list = ibv_get_device_list(&n);
  BOOST_REQUIRE(list != nullptr && n > 0);
  std::string name = ibv_get_device_name(list[0]);
  ibv_free_device_list(list);
  return name;
}

/// Returns the GID index of the RoCE v2 GID holding `ipv4` on port 1 of the
/// first device, or -1.
int gid_index_of(const std::string& ipv4) {
  in_addr addr{};
  if (inet_pton(AF_INET, ipv4.c_str(), &addr) != 1)
    return -1;
  int n = 0;
  auto list = ibv_get_device_list(&n);
  if (list == nullptr || n == 0)
    return -1;
  auto ctx = ibv_open_device(list[0]);
  ibv_free_device_list(list);
  if (ctx == nullptr)
    return -1;
  int found = -1;
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) == 0)
    for (int i = 0; i < port.gid_tbl_len && found < 0; ++i) {
      ibv_gid_entry e{};
      if (ibv_query_gid_ex(ctx, 1, static_cast<uint32_t>(i), &e, 0) == 0
          && e.gid_type == IBV_GID_TYPE_ROCE_V2
          && std::memcmp(e.gid.raw + 12, &addr, 4) == 0)
        found = i;
    }
  ibv_close_device(ctx);
  return found;
}

/// Sends one message from `a` to `b` and checks that it arrives.
void check_send(transport::device& d, transport::queue_pair& a,
                transport::queue_pair& b) {
  auto src = make_buffer(d, 512, 0);
  auto dst = make_buffer(d, 512, local_write);
  fill_pattern(src.data(), 512, 17);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!b.post_recv(1, &rsg, 1));
  auto ssg = src.whole();
  BOOST_REQUIRE(!a.post_send(2, &ssg, 1));
  auto rwc = wait_for_wr(b, 1);
  BOOST_REQUIRE(rwc);
  BOOST_TEST(rwc->status == wc_status::success);
  BOOST_TEST(rwc->byte_len == 512u);
  BOOST_TEST(has_pattern(dst.data(), 512, 17));
  auto swc = wait_for_wr(a, 2);
  BOOST_REQUIRE(swc);
  BOOST_TEST(swc->status == wc_status::success);
}

/// A connection attempt made with librdmacm directly, carrying arbitrary
/// private data, as a hostile or foreign peer would.
struct raw_attempt {
  bool rejected = false;
  int status = 0;
  std::vector<uint8_t> private_data;
  std::string error;
};

raw_attempt raw_connect(const std::string& host, uint16_t port,
                        const void* data, uint8_t len) {
  raw_attempt out;
  auto channel = rdma_create_event_channel();
  if (channel == nullptr) {
    out.error = "rdma_create_event_channel";
    return out;
  }
  rdma_cm_id* id = nullptr;
  auto wait = [&](rdma_cm_event_type want, rdma_cm_event** ev) {
    pollfd p{channel->fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1 || rdma_get_cm_event(channel, ev) != 0)
      return false;
    return (*ev)->event == want;
  };
  rdma_cm_event* ev = nullptr;
  addrinfo* res = nullptr;
  auto port_str = std::to_string(port);
  if (rdma_create_id(channel, &id, nullptr, RDMA_PS_TCP) != 0) {
    out.error = "rdma_create_id";
  } else if (getaddrinfo(host.c_str(), port_str.c_str(), nullptr, &res) != 0) {
    out.error = "getaddrinfo";
  } else if (rdma_resolve_addr(id, nullptr, res->ai_addr, 5000) != 0
             || !wait(RDMA_CM_EVENT_ADDR_RESOLVED, &ev)) {
    out.error = "resolve address";
  } else if (rdma_ack_cm_event(ev), ev = nullptr;
             rdma_resolve_route(id, 5000) != 0
             || !wait(RDMA_CM_EVENT_ROUTE_RESOLVED, &ev)) {
    out.error = "resolve route";
  } else {
    rdma_ack_cm_event(ev);
    ev = nullptr;
    rdma_conn_param param{};
    param.private_data = data;
    param.private_data_len = len;
    param.responder_resources = 1;
    param.initiator_depth = 1;
    param.retry_count = 7;
    param.rnr_retry_count = 7;
    param.qp_num = 0xABCD; // no QP: the listener must reject before using it
    if (rdma_connect(id, &param) != 0) {
      out.error = "rdma_connect";
    } else if (wait(RDMA_CM_EVENT_REJECTED, &ev)) {
      out.rejected = true;
      out.status = ev->status;
      auto& conn = ev->param.conn;
      if (conn.private_data != nullptr)
        out.private_data.assign(static_cast<const uint8_t*>(conn.private_data),
                                static_cast<const uint8_t*>(conn.private_data)
                                    + conn.private_data_len);
    } else {
      out.error = ev ? rdma_event_str(ev->event) : "no event in 10 s";
    }
  }
  if (ev != nullptr)
    rdma_ack_cm_event(ev);
  if (res != nullptr)
    freeaddrinfo(res);
  if (id != nullptr)
    rdma_destroy_id(id);
  rdma_destroy_event_channel(channel);
  return out;
}

/// Returns the number of threads of this process (/proc/self/task).
size_t thread_count() {
  size_t n = 0;
  for ([[maybe_unused]] auto& entry :
       std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

/// Waits up to `timeout` for the thread count to drop to `limit` (threads
/// of std::async leave /proc/self/task shortly after they were joined);
/// returns the last count.
size_t thread_count_within(size_t limit, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto n = thread_count();
  while (n > limit && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(10ms);
    n = thread_count();
  }
  return n;
}

/// Waits up to `timeout` for `pred`.
template <class Predicate>
bool eventually(Predicate pred, std::chrono::milliseconds timeout = 10s) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(verbs, verbs_fixture)

BOOST_AUTO_TEST_CASE(connections_share_one_completion_engine) {
  constexpr size_t pairs = 8;
  auto before_open = thread_count();
  auto dev = open();
  std::vector<qp_pair> ps;
  ps.push_back(connect_pair(*dev));
  // The device's event thread and completion engine, nothing per peer.
  auto base = thread_count_within(before_open + 2, 2s);
  BOOST_TEST_MESSAGE("threads: " << before_open << " before open, " << base
                                 << " with one connection");
  BOOST_TEST(base <= before_open + 2);
  for (size_t i = 1; i < pairs; ++i)
    ps.push_back(connect_pair(*dev));
  auto after = thread_count_within(base, 2s);
  BOOST_TEST_MESSAGE("threads with " << pairs << " connections: " << after);
  BOOST_TEST(after <= base);
  // Every QP notifies its own function, from the engine thread.
  std::vector<std::atomic<int>> client_events(pairs);
  std::vector<std::atomic<int>> server_events(pairs);
  auto test_thread = std::this_thread::get_id();
  std::atomic<bool> on_test_thread{false};
  for (size_t i = 0; i < pairs; ++i) {
    auto counter = [&](std::atomic<int>& n) {
      return [&n, &on_test_thread, test_thread] {
        if (std::this_thread::get_id() == test_thread)
          on_test_thread = true;
        ++n;
      };
    };
    BOOST_REQUIRE(ps[i].client->set_cq_notify(counter(client_events[i])));
    BOOST_REQUIRE(ps[i].server->set_cq_notify(counter(server_events[i])));
  }
  auto src = make_buffer(*dev, 64, 0);
  auto dst = make_buffer(*dev, 64 * pairs, local_write);
  for (size_t i = 0; i < pairs; ++i) {
    auto rsg = dst.sge_of(i * 64, 64);
    BOOST_REQUIRE(!ps[i].server->post_recv(100 + i, &rsg, 1));
    BOOST_REQUIRE(!ps[i].client->arm_cq());
    BOOST_REQUIRE(!ps[i].server->arm_cq());
  }
  for (size_t i = 0; i < pairs; ++i) {
    auto ssg = src.whole();
    BOOST_REQUIRE(!ps[i].client->post_send(200 + i, &ssg, 1));
  }
  for (size_t i = 0; i < pairs; ++i) {
    BOOST_TEST_CONTEXT("pair " << i) {
      BOOST_TEST(eventually([&] { return client_events[i] > 0; }));
      BOOST_TEST(eventually([&] { return server_events[i] > 0; }));
      transport::work_completion wc[4];
      BOOST_REQUIRE_EQUAL(ps[i].client->poll_cq(wc, 4), 1u);
      BOOST_TEST(wc[0].wr_id == 200 + i);
      BOOST_TEST(wc[0].status == wc_status::success);
      BOOST_REQUIRE_EQUAL(ps[i].server->poll_cq(wc, 4), 1u);
      BOOST_TEST(wc[0].wr_id == 100 + i);
      BOOST_TEST(wc[0].status == wc_status::success);
      // The notify function replaced the eventfd.
      BOOST_TEST(!ps[i].client->ack_cq_event());
      BOOST_TEST(!ps[i].server->ack_cq_event());
    }
  }
  BOOST_TEST(!on_test_thread);
  // Not armed again: no more notifications.
  auto rsg = dst.sge_of(0, 64);
  BOOST_REQUIRE(!ps[0].server->post_recv(300, &rsg, 1));
  auto ssg = src.whole();
  BOOST_REQUIRE(!ps[0].client->post_send(301, &ssg, 1));
  transport::work_completion wc;
  BOOST_TEST(eventually([&] { return ps[0].server->poll_cq(&wc, 1) == 1; }));
  BOOST_TEST(wc.wr_id == 300u);
  BOOST_TEST(eventually([&] { return ps[0].client->poll_cq(&wc, 1) == 1; }));
  BOOST_TEST(wc.wr_id == 301u);
  BOOST_TEST(client_events[0] == 1);
  BOOST_TEST(server_events[0] == 1);
  ps.clear();
  BOOST_TEST(thread_count_within(base, 2s) <= base);
}

BOOST_AUTO_TEST_CASE(qp_destruction_waits_for_a_running_notify_function) {
  auto dev = open();
  auto p = connect_pair(*dev);
  std::atomic<bool> entered{false};
  std::atomic<bool> done{false};
  std::atomic<int> calls_after{0};
  std::atomic<bool> destroyed{false};
  BOOST_REQUIRE(p.client->set_cq_notify([&] {
    if (destroyed)
      ++calls_after;
    entered = true;
    std::this_thread::sleep_for(300ms);
    done = true;
  }));
  auto src = make_buffer(*dev, 64, 0);
  auto dst = make_buffer(*dev, 64, local_write);
  auto rsg = dst.whole();
  BOOST_REQUIRE(!p.server->post_recv(1, &rsg, 1));
  BOOST_REQUIRE(!p.client->arm_cq());
  auto ssg = src.whole();
  BOOST_REQUIRE(!p.client->post_send(2, &ssg, 1));
  BOOST_REQUIRE(eventually([&] { return entered.load(); }));
  p.client.reset();
  destroyed = true;
  BOOST_TEST(done);
  std::this_thread::sleep_for(100ms);
  BOOST_TEST(calls_after == 0);
}

BOOST_AUTO_TEST_CASE(notify_function_may_destroy_the_last_owner) {
  // The notify function destroys its QP, which holds the last reference to
  // its device: the engine thread must neither deadlock nor join itself.
  // The QP lives on a device of its own, and receives a zero-byte SEND
  // into a receive without memory, so nothing else keeps that device.
  auto dev_a = open();
  auto dev_b = open();
  std::weak_ptr<transport::device> weak_a = dev_a;
  auto host = test_host();
  auto lst = value_or_throw(dev_b->listen(host, 0, {}), "listen");
  auto port = lst->port();
  auto fut = std::async(std::launch::async, [&dev_a, host, port] {
    return dev_a->connect(host, port, {}, 10s);
  });
  auto server = value_or_throw(lst->accept(10s), "accept");
  auto holder = std::make_shared<transport::queue_pair_ptr>(
      value_or_throw(fut.get(), "connect"));
  std::atomic<bool> released{false};
  auto& client = **holder;
  BOOST_REQUIRE(!client.post_recv(1, nullptr, 0));
  BOOST_REQUIRE(client.set_cq_notify([holder, &released]() mutable {
    // The function object lives on while it runs: drop the QP only.
    holder->reset();
    released = true;
  }));
  BOOST_REQUIRE(!client.arm_cq());
  holder.reset(); // the notify function holds the last reference now
  dev_a.reset();  // the QP holds the last reference to its device now
  BOOST_REQUIRE(!server->post_send(2, nullptr, 0));
  BOOST_TEST(eventually([&] { return released.load(); }));
  BOOST_TEST(eventually([&] { return weak_a.expired(); }));
  auto swc = wait_for_wr(*server, 2);
  BOOST_TEST(swc.has_value());
}

BOOST_AUTO_TEST_CASE(bad_rkey_is_a_remote_access_error_from_the_device) {
  auto dev = open();
  for (bool read : {false, true}) {
    BOOST_TEST_CONTEXT((read ? "read" : "write")) {
      auto p = connect_pair(*dev);
      auto target = make_buffer(*dev, 4096,
                                local_write | remote_write | remote_read, 0x11);
      auto local = make_buffer(*dev, 4096, local_write, 0x99);
      auto inbox = make_buffer(*dev, 64, local_write);
      auto isg = inbox.whole();
      BOOST_REQUIRE(!p.server->post_recv(7, &isg, 1));
      auto sg = local.sge_of(0, 1000);
      auto rkey = target.mr->rkey() ^ 0x5A5A5A00u;
      auto err = read ? p.client->post_read(1, &sg, 1, target.addr(), rkey)
                      : p.client->post_write(1, &sg, 1, target.addr(), rkey);
      BOOST_REQUIRE_MESSAGE(!err, render(err));
      auto wc = wait_for_wr(*p.client, 1);
      BOOST_REQUIRE(wc);
      BOOST_TEST(wc->status == wc_status::remote_access_error);
      BOOST_TEST(wc->opcode
                 == (read ? transport::wc_opcode::rdma_read
                          : transport::wc_opcode::rdma_write));
      BOOST_TEST(all_bytes(target.data(), 4096, 0x11));
      BOOST_TEST(all_bytes(local.data(), 4096, 0x99));
      BOOST_TEST(p.client->in_error());
      BOOST_TEST(code_of(p.client->post_send(3, &sg, 1)) == errc::qp_error);
      // The target flushes its receive (the initiator disconnects).
      auto rwc = wait_for_wr(*p.server, 7);
      BOOST_REQUIRE(rwc);
      BOOST_TEST(rwc->status == wc_status::work_request_flushed);
      BOOST_TEST(p.server->in_error());
    }
  }
}

BOOST_AUTO_TEST_CASE(device_port_and_gid_selection) {
  auto first = first_device_name();
  // Automatic: the first device.
  {
    auto dev = open();
    BOOST_TEST(dev->name() == first);
    BOOST_TEST(std::string{dev->kind()} == "verbs");
  }
  // By name, and with port 1.
  opts.device = first;
  opts.port = 1;
  BOOST_TEST(open()->name() == first);
  // A device that does not exist.
  opts.device = "no_such_device0";
  auto bad = transport::open_device(opts);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::device_not_found);
  BOOST_TEST(what_of(bad.error()).find(first) != std::string::npos);
  // A port that does not exist.
  opts.device.clear();
  opts.port = 9;
  bad = transport::open_device(opts);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::device_not_found);
  opts.port = 0;
  // A GID index beyond the table, and an explicit good one.
  opts.gid_index = 4000;
  bad = transport::open_device(opts);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::device_not_found);
  auto index = gid_index_of(test_host());
  BOOST_REQUIRE_MESSAGE(index >= 0, "no RoCE v2 GID for " << test_host());
  BOOST_TEST_MESSAGE("GID index of " << test_host() << ": " << index);
  opts.gid_index = index;
  auto dev = open();
  auto p = connect_pair(*dev);
  check_send(*dev, *p.client, *p.server);
  check_send(*dev, *p.server, *p.client);
}

BOOST_AUTO_TEST_CASE(mtu_selection) {
  opts.verbs_mtu_bytes = 4096 * 2;
  auto bad = transport::open_device(opts);
  BOOST_REQUIRE(!bad);
  BOOST_TEST(code_of(bad.error()) == errc::invalid_argument);
  opts.verbs_mtu_bytes = 256;
  auto dev = open();
  auto p = connect_pair(*dev);
  check_send(*dev, *p.client, *p.server);
}

BOOST_AUTO_TEST_CASE(qp_errors_when_the_peer_process_is_killed) {
  auto dev = open();
  auto lst = value_or_throw(dev->listen(test_host(), 0, {}), "listen");
  // The peer is a separate process (posix_spawn: no copy-on-write of our
  // registered memory).
  int out[2];
  BOOST_REQUIRE(::pipe(out) == 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string path = RDMACTOR_VERBS_TEST_PEER;
  std::string host = test_host();
  std::string port = std::to_string(lst->port());
  char* argv[] = {path.data(), host.data(), port.data(), nullptr};
  pid_t pid = -1;
  auto rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out[1]);
  BOOST_REQUIRE_MESSAGE(rc == 0, "posix_spawn " << path << ": " << rc);
  auto qp = value_or_throw(lst->accept(30s), "accept");
  auto inbox = make_buffer(*dev, 4 * 64, local_write);
  for (uint64_t i = 0; i < 4; ++i) {
    auto sg = inbox.sge_of(i * 64, 64);
    BOOST_REQUIRE(!qp->post_recv(i, &sg, 1));
  }
  // The peer's message arrives, then it says "ready".
  auto first = wait_for_wr(*qp, 0, 30s);
  BOOST_REQUIRE(first);
  BOOST_TEST(first->status == wc_status::success);
  BOOST_TEST(all_bytes(inbox.data(), 64, 0x5A));
  pollfd pfd{out[0], POLLIN, 0};
  char line[16] = {};
  BOOST_REQUIRE(::poll(&pfd, 1, 30000) == 1);
  BOOST_REQUIRE(::read(out[0], line, sizeof(line) - 1) > 0);
  BOOST_TEST(std::string{line} == "ready\n");
  ::close(out[0]);
  // Kill it; the survivor's posted receives complete with errors.
  auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
  int status = 0;
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  BOOST_TEST(WIFSIGNALED(status));
  std::vector<transport::work_completion> wcs;
  auto deadline = start + 60s;
  while (wcs.size() < 3 && std::chrono::steady_clock::now() < deadline) {
    auto more = wait_completions(*qp, 3 - wcs.size(), 1s);
    wcs.insert(wcs.end(), more.begin(), more.end());
  }
  auto elapsed = ms_since(start);
  BOOST_TEST_MESSAGE("peer killed: " << wcs.size() << " completions after "
                                     << elapsed << " ms");
  BOOST_REQUIRE_EQUAL(wcs.size(), 3u);
  for (auto& wc : wcs) {
    BOOST_TEST(wc.status != wc_status::success);
    BOOST_TEST((wc.opcode == transport::wc_opcode::recv));
  }
  BOOST_TEST(count_status(wcs, wc_status::work_request_flushed) == 3u);
  BOOST_TEST(qp->in_error());
  auto sg = inbox.sge_of(0, 64);
  BOOST_TEST(code_of(qp->post_send(9, &sg, 1)) == errc::qp_error);
}

BOOST_AUTO_TEST_CASE(accept_times_out_and_close_wakes_it) {
  auto dev = open();
  auto lst = value_or_throw(dev->listen(test_host(), 0, {}), "listen");
  auto start = std::chrono::steady_clock::now();
  auto r = lst->accept(300ms);
  BOOST_REQUIRE(!r);
  BOOST_TEST(code_of(r.error()) == errc::connect_timeout);
  BOOST_TEST(ms_since(start) >= 250);
  auto fut = std::async(std::launch::async, [&] { return lst->accept(20s); });
  std::this_thread::sleep_for(200ms);
  start = std::chrono::steady_clock::now();
  lst->close();
  lst->close();
  auto closed = fut.get();
  BOOST_REQUIRE(!closed);
  BOOST_TEST(code_of(closed.error()) == errc::closed);
  BOOST_TEST(ms_since(start) < 5000);
}

BOOST_AUTO_TEST_CASE(connect_without_listener_fails_in_time) {
  auto dev = open();
  uint16_t port = 0;
  {
    auto lst = value_or_throw(dev->listen(test_host(), 0, {}), "listen");
    port = lst->port();
  }
  auto start = std::chrono::steady_clock::now();
  auto r = dev->connect(test_host(), port, {}, 10s);
  BOOST_REQUIRE(!r);
  BOOST_TEST_MESSAGE("connect to a closed port: " << render(r.error())
                                                  << " after "
                                                  << ms_since(start) << " ms");
  BOOST_TEST((code_of(r.error()) == errc::connect_failed
              || code_of(r.error()) == errc::connect_timeout));
  BOOST_TEST(ms_since(start) < 12000);
  // An address on no RDMA interface.
  r = dev->connect("203.0.113.1", 7471, {}, 3s);
  BOOST_REQUIRE(!r);
  BOOST_TEST_MESSAGE("unroutable: " << render(r.error()));
  BOOST_TEST(ms_since(start) < 20000);
}

BOOST_AUTO_TEST_CASE(foreign_private_data_is_rejected_and_accept_goes_on) {
  auto dev = open();
  auto lst = value_or_throw(dev->listen(test_host(), 0, {}), "listen");
  auto port = lst->port();
  auto fut = std::async(std::launch::async, [&] { return lst->accept(60s); });
  // Garbage, too short, no private data, another protocol version.
  uint8_t garbage[56];
  fill_pattern(garbage, sizeof(garbage), 5);
  auto good = transport::verbs::encode_hello(
      transport::verbs::hello_kind::offer, conn_params{});
  auto v2 = good;
  v2[5] = 2;
  struct attempt_case {
    const char* name;
    const void* data;
    uint8_t len;
    errc reason;
  };
  attempt_case cases[] = {
      {"garbage", garbage, sizeof(garbage), errc::handshake_failed},
      {"short", good.data(), 8, errc::handshake_failed},
      {"empty", nullptr, 0, errc::handshake_failed},
      {"version 2", v2.data(), static_cast<uint8_t>(v2.size()),
       errc::version_mismatch},
  };
  for (auto& c : cases) {
    BOOST_TEST_CONTEXT(c.name) {
      auto a = raw_connect(test_host(), port, c.data, c.len);
      BOOST_TEST(a.error.empty(), a.error);
      BOOST_TEST(a.rejected);
      auto h = transport::verbs::decode_hello(
          a.private_data.data(), a.private_data.size(),
          transport::verbs::hello_kind::answer);
      BOOST_REQUIRE(h);
      BOOST_TEST((h->kind == transport::verbs::hello_kind::reject));
      BOOST_TEST(h->reason == c.reason);
    }
  }
  // A proper peer still gets through.
  auto client
      = value_or_throw(dev->connect(test_host(), port, {}, 10s), "connect");
  auto server = value_or_throw(fut.get(), "accept");
  check_send(*dev, *client, *server);
  // And a version-mismatched rdmactor peer gets a clear error.
  auto fut2 = std::async(std::launch::async, [&] { return lst->accept(5s); });
  auto a = raw_connect(test_host(), port, v2.data(),
                       static_cast<uint8_t>(v2.size()));
  BOOST_TEST(a.rejected);
  BOOST_TEST(code_of(fut2.get().error()) == errc::connect_timeout);
}

BOOST_AUTO_TEST_CASE(queue_pair_destruction_is_prompt) {
  auto dev = open();
  for (int i = 0; i < 5; ++i) {
    auto p = connect_pair(*dev);
    auto inbox = make_buffer(*dev, 64, local_write);
    auto sg = inbox.whole();
    BOOST_REQUIRE(!p.server->post_recv(1, &sg, 1));
    auto start = std::chrono::steady_clock::now();
    p.client.reset();
    p.server.reset();
    p.lst.reset();
    BOOST_TEST(ms_since(start) < 5000);
  }
  // The device outlives nothing: released last, its thread joined.
  auto start = std::chrono::steady_clock::now();
  dev.reset();
  BOOST_TEST(ms_since(start) < 5000);
}

BOOST_AUTO_TEST_SUITE_END()
