#include "transport/verbs/verbs_device.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <poll.h>
#include <sys/eventfd.h>

#include "common/logging.hpp"
#include "common/thread_name.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/link_params.hpp"
#include "transport/verbs/cm.hpp"
#include "transport/verbs/handshake.hpp"
#include "transport/verbs/verbs_listener.hpp"
#include "transport/verbs/verbs_queue_pair.hpp"

namespace rdmactor::transport::verbs {

namespace {

/// Upper bound for RDMA READ depths we negotiate (hardware allows 16-255).
constexpr int max_rd_atomic_depth = 16;

/// A registration of local memory; deregisters on destruction.
class verbs_memory_region final : public memory_region {
public:
  verbs_memory_region(std::shared_ptr<verbs_device> dev, mr_ptr mr,
                      uint32_t access)
      : memory_region(mr->addr, mr->length, mr->lkey, mr->rkey, access),
        dev_(std::move(dev)), mr_(std::move(mr)) {
    dev_->count_registration(length(), +1);
  }

  ~verbs_memory_region() override {
    mr_.reset();
    dev_->count_registration(length(), -1);
  }

private:
  std::shared_ptr<verbs_device> dev_;
  mr_ptr mr_;
};

uint32_t mtu_bytes(ibv_mtu mtu) noexcept {
  return 128u << static_cast<int>(mtu);
}

std::optional<ibv_mtu> mtu_from_bytes(uint32_t bytes) noexcept {
  switch (bytes) {
    case 256:
      return IBV_MTU_256;
    case 512:
      return IBV_MTU_512;
    case 1024:
      return IBV_MTU_1024;
    case 2048:
      return IBV_MTU_2048;
    case 4096:
      return IBV_MTU_4096;
    default:
      return std::nullopt;
  }
}

bool is_ipv4_mapped(const ibv_gid& gid) noexcept {
  static constexpr uint8_t prefix[12]
      = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.raw, prefix, sizeof(prefix)) == 0;
}

std::string gid_text(const ibv_gid& gid) {
  char buf[64] = {};
  if (is_ipv4_mapped(gid))
    std::snprintf(buf, sizeof(buf), "::ffff:%u.%u.%u.%u", gid.raw[12],
                  gid.raw[13], gid.raw[14], gid.raw[15]);
  else
    for (int i = 0; i < 16; i += 2)
      std::snprintf(buf + std::strlen(buf), sizeof(buf) - std::strlen(buf),
                    "%s%02x%02x", i ? ":" : "", gid.raw[i], gid.raw[i + 1]);
  return buf;
}

const char* gid_type_name(uint32_t type) noexcept {
  switch (type) {
    case IBV_GID_TYPE_IB:
      return "IB";
    case IBV_GID_TYPE_ROCE_V1:
      return "RoCE v1";
    case IBV_GID_TYPE_ROCE_V2:
      return "RoCE v2";
    default:
      return "unknown";
  }
}

/// Delay of each IB min_rnr_timer code in microseconds (IBA 9.7.5.2.8).
constexpr uint32_t rnr_timer_us[32]
    = {655360, 10,    20,    30,     40,     60,     80,     120,
       160,    240,   320,   480,    640,    960,    1280,   1920,
       2560,   3840,  5120,  7680,   10240,  15360,  20480,  30720,
       40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};

/// Finite RNR retries used when the wait is derived from rnr_timeout_ms.
constexpr uint8_t derived_rnr_retry = 6;

/// Returns the timer code whose `derived_rnr_retry` waits come closest to
/// `timeout_ms` without exceeding it (at least code 1, 10 us).
uint8_t rnr_timer_for(uint32_t timeout_ms) noexcept {
  uint64_t budget_us = uint64_t{timeout_ms} * 1000 / derived_rnr_retry;
  uint8_t best = 1;
  for (uint8_t code = 0; code < 32; ++code)
    if (rnr_timer_us[code] <= budget_us
        && rnr_timer_us[code] > rnr_timer_us[best])
      best = code;
  return best;
}

caf::error no_device_error(int err) {
  std::string what = "no RDMA device: ";
  if (err == ENOSYS)
    what += "the kernel has no RDMA support (ibv_get_device_list failed "
            "with ENOSYS)";
  else if (err != 0)
    what += "ibv_get_device_list failed with " + errno_text(err);
  else
    what += "ibv_get_device_list found no device";
  what += ". For Soft-RoCE on a kernel with RDMA support: modprobe rdma_rxe "
          "and `rdma link add rxe0 type rxe netdev <ifname>` (scripts/"
          "rxe-vm.sh runs a command in a VM that has it), or use "
          "fabric=soft";
  return make_error(errc::fabric_unavailable, std::move(what));
}

} // namespace

// -- opening -------------------------------------------------------------

caf::expected<std::shared_ptr<verbs_device>>
verbs_device::open(const options& opts) {
  std::shared_ptr<verbs_device> dev{new verbs_device};
  dev->opts_ = opts;
  // Device.
  errno = 0;
  int count = 0;
  device_list_ptr list{ibv_get_device_list(&count)};
  if (!list || count <= 0)
    return no_device_error(list ? 0 : errno);
  ibv_device* chosen = nullptr;
  std::string names;
  for (int i = 0; i < count; ++i) {
    std::string name = ibv_get_device_name(list.get()[i]);
    names += (names.empty() ? "" : ", ") + name;
    if (chosen == nullptr && (opts.device.empty() || opts.device == name))
      chosen = list.get()[i];
  }
  if (chosen == nullptr)
    return make_error(errc::device_not_found,
                      "RDMA device '" + opts.device
                          + "' does not exist; present: " + names
                          + " (see ibv_devices); set rdmactor.device to one "
                            "of them or leave it empty for the first");
  dev->name_ = ibv_get_device_name(chosen);
  dev->ctx_.reset(ibv_open_device(chosen));
  if (!dev->ctx_)
    return make_error(errc::fabric_unavailable,
                      "cannot open RDMA device " + dev->name_ + ": "
                          + errno_text(errno)
                          + "; check the permissions of /dev/infiniband/*");
  list.reset();
  // Capabilities.
  if (auto rc = ibv_query_device(dev->ctx_.get(), &dev->attr_); rc != 0)
    return make_error(errc::fabric_unavailable,
                      "ibv_query_device on " + dev->name_
                          + " failed: " + errno_text(rc));
  if (dev->attr_.max_sge < static_cast<int>(max_sge))
    return make_error(errc::fabric_unavailable,
                      dev->name_ + " supports "
                          + std::to_string(dev->attr_.max_sge)
                          + " scatter/gather elements per work request, "
                            "rdmactor needs "
                          + std::to_string(max_sge));
  if (dev->attr_.max_qp_wr < 2 || dev->attr_.max_cqe < 2)
    return make_error(errc::fabric_unavailable,
                      dev->name_ + " reports unusable queue limits");
  // Port.
  ibv_port_attr port{};
  if (opts.port == 0) {
    for (uint8_t p = 1; p <= dev->attr_.phys_port_cnt; ++p) {
      ibv_port_attr pa{};
      if (ibv_query_port(dev->ctx_.get(), p, &pa) == 0
          && pa.state == IBV_PORT_ACTIVE) {
        dev->port_num_ = p;
        port = pa;
        break;
      }
    }
    if (dev->port_num_ == 0)
      return make_error(errc::device_not_found,
                        "no active port on " + dev->name_ + " (ports 1.."
                            + std::to_string(dev->attr_.phys_port_cnt)
                            + " are down); check `ibv_devinfo` and the link "
                              "of the network interface");
  } else {
    if (opts.port > dev->attr_.phys_port_cnt)
      return make_error(errc::device_not_found,
                        dev->name_ + " has no port " + std::to_string(opts.port)
                            + " (ports 1.."
                            + std::to_string(dev->attr_.phys_port_cnt)
                            + "); set rdmactor.port to 0 for the first "
                              "active port");
    dev->port_num_ = static_cast<uint8_t>(opts.port);
    if (auto rc = ibv_query_port(dev->ctx_.get(), dev->port_num_, &port))
      return make_error(errc::device_not_found,
                        "ibv_query_port " + dev->name_ + " port "
                            + std::to_string(opts.port)
                            + " failed: " + errno_text(rc));
    if (port.state != IBV_PORT_ACTIVE)
      log().warn("verbs: {} port {} is not active (state {})", dev->name_,
                 opts.port, static_cast<int>(port.state));
  }
  dev->link_layer_ = port.link_layer;
  dev->max_msg_bytes_ = port.max_msg_sz;
  // Receiver not ready: verbs_rnr_retry < 7 sets the verbs attributes
  // verbatim; 7 (infinite on hardware) bounds the wait by rnr_timeout_ms
  // like the soft fabric: 6 retries of the timer that fits.
  if (opts.verbs_rnr_retry < 7) {
    dev->rnr_retry_ = static_cast<uint8_t>(opts.verbs_rnr_retry);
    dev->min_rnr_timer_ = static_cast<uint8_t>(opts.verbs_min_rnr_timer);
  } else if (opts.rnr_timeout_ms == 0) {
    dev->rnr_retry_ = 0;
    dev->min_rnr_timer_ = 1;
  } else {
    dev->rnr_retry_ = derived_rnr_retry;
    dev->min_rnr_timer_ = rnr_timer_for(opts.rnr_timeout_ms);
    auto wait_ms = rnr_timer_us[dev->min_rnr_timer_] * derived_rnr_retry / 1000;
    if (wait_ms + 1 < opts.rnr_timeout_ms / 2)
      log().info("verbs: rnr_timeout_ms={} exceeds what RNR retries express; "
                 "a SEND waits about {} ms for a receive",
                 opts.rnr_timeout_ms, wait_ms);
  }
  // MTU.
  dev->mtu_ = port.active_mtu;
  if (opts.verbs_mtu_bytes != 0) {
    auto mtu = mtu_from_bytes(opts.verbs_mtu_bytes);
    if (!mtu)
      return make_error(errc::invalid_argument,
                        "rdmactor.verbs-mtu-bytes must be 0, 256, 512, 1024, "
                        "2048 or 4096 (got "
                            + std::to_string(opts.verbs_mtu_bytes) + ")");
    if (*mtu > port.active_mtu)
      return make_error(
          errc::invalid_argument,
          "rdmactor.verbs-mtu-bytes=" + std::to_string(opts.verbs_mtu_bytes)
              + " exceeds the active MTU "
              + std::to_string(mtu_bytes(port.active_mtu)) + " of " + dev->name_
              + " port " + std::to_string(dev->port_num_)
              + "; set it to at most that or 0 (automatic)");
    dev->mtu_ = *mtu;
  }
  // GID.
  std::string gid_note;
  if (opts.gid_index >= 0) {
    ibv_gid_entry entry{};
    if (opts.gid_index >= port.gid_tbl_len
        || ibv_query_gid_ex(dev->ctx_.get(), dev->port_num_,
                            static_cast<uint32_t>(opts.gid_index), &entry, 0)
               != 0)
      return make_error(errc::device_not_found,
                        "GID index " + std::to_string(opts.gid_index) + " of "
                            + dev->name_ + " port "
                            + std::to_string(dev->port_num_)
                            + " is empty or out of range (table size "
                            + std::to_string(port.gid_tbl_len)
                            + "); `ibv_devinfo -v` lists the GIDs, or set "
                              "rdmactor.gid-index to -1 (automatic)");
    dev->gid_index_ = opts.gid_index;
    gid_note = "GID index " + std::to_string(opts.gid_index) + " "
               + gid_text(entry.gid) + " " + gid_type_name(entry.gid_type);
  } else if (dev->is_ethernet()) {
    gid_note = "no RoCE v2 IPv4-mapped GID (IPv4 peers will fail)";
    for (int i = 0; i < port.gid_tbl_len; ++i) {
      ibv_gid_entry entry{};
      if (ibv_query_gid_ex(dev->ctx_.get(), dev->port_num_,
                           static_cast<uint32_t>(i), &entry, 0)
              == 0
          && entry.gid_type == IBV_GID_TYPE_ROCE_V2
          && is_ipv4_mapped(entry.gid)) {
        gid_note = "GID automatic, e.g. index " + std::to_string(i) + " "
                   + gid_text(entry.gid) + " RoCE v2";
        break;
      }
    }
  } else {
    gid_note = "GID automatic (InfiniBand)";
  }
  // Protection domain, completion engine, connection event channel, event
  // thread.
  dev->pd_.reset(ibv_alloc_pd(dev->ctx_.get()));
  if (!dev->pd_)
    return make_error(errc::fabric_unavailable,
                      "ibv_alloc_pd on " + dev->name_
                          + " failed: " + errno_text(errno));
  auto engine = completion_engine::start(dev->ctx_.get(), dev->name_);
  if (!engine)
    return std::move(engine.error());
  dev->engine_ = std::move(*engine);
  dev->cm_channel_.reset(rdma_create_event_channel());
  if (!dev->cm_channel_)
    return make_error(errc::fabric_unavailable,
                      "rdma_create_event_channel failed: " + errno_text(errno)
                          + "; is rdma_ucm loaded (/dev/infiniband/rdma_cm)?");
  if (!set_nonblocking(dev->cm_channel_->fd)
      || !set_nonblocking(dev->ctx_->async_fd))
    return make_error(errc::fabric_unavailable,
                      "cannot make the rdma_cm/async fds non-blocking: "
                          + errno_text(errno));
  dev->stop_fd_ = unique_fd{::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)};
  if (!dev->stop_fd_)
    return make_error(errc::fabric_unavailable,
                      "eventfd failed: " + errno_text(errno));
  try {
    dev->thread_ = std::thread([raw = dev.get()] { raw->run_events(); });
  } catch (const std::system_error& e) {
    return make_error(errc::fabric_unavailable,
                      std::string{"cannot start the verbs event thread: "}
                          + e.what());
  }
  log().info("verbs: opened {} port {} ({}, MTU {}, {}, RNR retry {} x "
             "{} us)",
             dev->name_, dev->port_num_,
             dev->is_ethernet() ? "Ethernet" : "InfiniBand",
             mtu_bytes(dev->mtu_), gid_note, dev->rnr_retry_,
             rnr_timer_us[dev->min_rnr_timer_]);
  return dev;
}

verbs_device::~verbs_device() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    if (::write(stop_fd_.get(), &one, sizeof(one)) < 0)
      log().error("verbs: cannot stop the event thread: {}", errno_text(errno));
    thread_.join();
  }
}

// -- device interface ----------------------------------------------------

const char* verbs_device::kind() const noexcept {
  return "verbs";
}

std::string verbs_device::name() const {
  return name_;
}

std::shared_ptr<verbs_device> verbs_device::self() {
  return std::static_pointer_cast<verbs_device>(shared_from_this());
}

caf::expected<std::unique_ptr<memory_region>>
verbs_device::register_memory(void* addr, size_t length, uint32_t access) {
  if (addr == nullptr || length == 0)
    return make_error(errc::invalid_argument,
                      "register_memory needs a non-null address and a "
                      "length > 0");
  if ((access & ~access::all) != 0)
    return make_error(errc::invalid_argument,
                      "register_memory: unknown access flags "
                          + std::to_string(access & ~access::all));
  // Verbs requires local write whenever remote write or atomics are given.
  if ((access & (access::remote_write | access::remote_atomic)) != 0)
    access |= access::local_write;
  if ((access & access::remote_atomic) != 0
      && attr_.atomic_cap == IBV_ATOMIC_NONE)
    return make_error(errc::invalid_argument,
                      name_
                          + " does not support atomics; drop "
                            "access::remote_atomic");
  mr_ptr mr{ibv_reg_mr(pd_.get(), addr, length, static_cast<int>(access))};
  if (!mr) {
    auto err = errno;
    std::string what = "ibv_reg_mr of " + std::to_string(length) + " bytes on "
                       + name_ + " failed: " + errno_text(err);
    if (err == ENOMEM || err == EPERM)
      what += "; raise the locked-memory limit (ulimit -l unlimited, or "
              "memlock in /etc/security/limits.conf)";
    return make_error(errc::registration_failed, std::move(what));
  }
  return std::unique_ptr<memory_region>{
      new verbs_memory_region(self(), std::move(mr), access)};
}

caf::expected<std::unique_ptr<listener>>
verbs_device::listen(const std::string& host, uint16_t port,
                     const conn_params& offer) {
  if (auto err = check_offer(offer))
    return err;
  auto result = verbs_listener::create(self(), host, port, offer);
  if (!result)
    return std::move(result.error());
  return std::unique_ptr<listener>{std::move(*result)};
}

caf::expected<queue_pair_ptr>
verbs_device::connect(const std::string& host, uint16_t port,
                      const conn_params& offer,
                      std::chrono::milliseconds timeout) {
  auto deadline = clock::now() + timeout;
  auto peer = host + ":" + std::to_string(port);
  if (auto err = check_offer(offer))
    return err;
  auto addr = resolve_address(host, port, false);
  if (!addr)
    return std::move(addr.error());
  // The id lives on this channel until it is established, then on the
  // device's channel: declared first, released last.
  event_channel_ptr channel{rdma_create_event_channel()};
  if (!channel || !set_nonblocking(channel->fd))
    return make_error(errc::connect_failed,
                      "rdma_create_event_channel failed: " + errno_text(errno));
  rdma_cm_id* raw_id = nullptr;
  if (rdma_create_id(channel.get(), &raw_id, nullptr, RDMA_PS_TCP) != 0)
    return make_error(errc::connect_failed,
                      "rdma_create_id failed: " + errno_text(errno));
  auto qp = std::make_unique<verbs_queue_pair>(self(), cm_id_ptr{raw_id});
  auto id = qp->id();
  auto fail = [&](errc code, const std::string& why) {
    return make_error(code, "connect to " + peer + ": " + why);
  };
  auto expect = [&](rdma_cm_event_type want,
                    const char* step) -> caf::expected<cm_event_info> {
    auto ev = next_event(channel.get(), -1, deadline);
    if (!ev) {
      if (code_of(ev.error()) == errc::connect_timeout)
        return fail(errc::connect_timeout, std::string{"no answer within "}
                                               + std::to_string(timeout.count())
                                               + " ms (" + step + ")");
      return std::move(ev.error());
    }
    if (ev->type == want)
      return ev;
    if (ev->type == RDMA_CM_EVENT_REJECTED) {
      auto refusal = decode_hello(ev->private_data.data(), ev->private_data_len,
                                  hello_kind::answer);
      if (refusal && refusal->kind == hello_kind::reject)
        return fail(refusal->reason, std::string{"the peer refused: "}
                                         + describe(refusal->reason));
      if (!refusal && code_of(refusal.error()) == errc::version_mismatch)
        return fail(errc::version_mismatch, what_of(refusal.error()));
      return fail(errc::connect_failed,
                  "rejected: " + reject_reason(ev->status));
    }
    if (ev->type == RDMA_CM_EVENT_ADDR_ERROR)
      return fail(errc::connect_failed,
                  "no RDMA device has a route to the address ("
                      + reject_reason(ev->status)
                      + "); check that the host's address is on an RDMA "
                        "interface (rdma link show)");
    return fail(errc::connect_failed, std::string{step} + " failed with "
                                          + rdma_event_str(ev->type) + " ("
                                          + reject_reason(ev->status) + ")");
  };
  // Address and route.
  if (rdma_resolve_addr(id, nullptr, addr->get(),
                        std::max(1, remaining_ms(deadline)))
      != 0)
    return fail(errc::connect_failed,
                "rdma_resolve_addr failed: " + errno_text(errno));
  if (auto ev = expect(RDMA_CM_EVENT_ADDR_RESOLVED, "address resolution"); !ev)
    return std::move(ev.error());
  if (auto err = check_id(id, "the route to " + peer))
    return err;
  if (rdma_resolve_route(id, std::max(1, remaining_ms(deadline))) != 0)
    return fail(errc::connect_failed,
                "rdma_resolve_route failed: " + errno_text(errno));
  if (auto ev = expect(RDMA_CM_EVENT_ROUTE_RESOLVED, "route resolution"); !ev)
    return std::move(ev.error());
  // QP and connection request.
  if (auto err = qp->init(offer))
    return err;
  auto hello = encode_hello(hello_kind::offer, offer);
  rdma_conn_param param{};
  param.private_data = hello.data();
  param.private_data_len = static_cast<uint8_t>(hello.size());
  param.responder_resources = max_responder_resources();
  param.initiator_depth = max_initiator_depth();
  param.flow_control = 1;
  param.retry_count = static_cast<uint8_t>(opts_.verbs_retry_count);
  param.rnr_retry_count = rnr_retry_;
  param.srq = qp->srq() ? 1 : 0;
  param.qp_num = qp->qp_num();
  if (rdma_connect(id, &param) != 0)
    return fail(errc::connect_failed,
                "rdma_connect failed: " + errno_text(errno));
  auto response = expect(RDMA_CM_EVENT_CONNECT_RESPONSE, "connection");
  if (!response)
    return std::move(response.error());
  auto answer = decode_hello(response->private_data.data(),
                             response->private_data_len, hello_kind::answer);
  if (!answer || answer->kind != hello_kind::answer) {
    auto reason = answer ? errc::handshake_failed : code_of(answer.error());
    auto refusal = encode_reject(reason);
    rdma_reject(id, refusal.data(), static_cast<uint8_t>(refusal.size()));
    return fail(reason, answer ? std::string{"malformed answer"}
                               : what_of(answer.error()));
  }
  if (auto err
      = qp->ready(response->initiator_depth, response->responder_resources))
    return err;
  if (rdma_establish(id) != 0)
    return fail(errc::connect_failed,
                "rdma_establish failed: " + errno_text(errno));
  if (auto err = qp->establish(negotiate(offer, answer->params)))
    return err;
  return queue_pair_ptr{std::move(qp)};
}

// -- internal interface --------------------------------------------------

uint8_t verbs_device::max_initiator_depth() const noexcept {
  return static_cast<uint8_t>(
      std::clamp(attr_.max_qp_init_rd_atom, 0, max_rd_atomic_depth));
}

uint8_t verbs_device::max_responder_resources() const noexcept {
  return static_cast<uint8_t>(
      std::clamp(attr_.max_qp_rd_atom, 0, max_rd_atomic_depth));
}

caf::error verbs_device::check_id(rdma_cm_id* id,
                                  const std::string& what) const {
  if (id->verbs == nullptr)
    return make_error(errc::device_not_found,
                      what + " is not on any RDMA device");
  std::string name = ibv_get_device_name(id->verbs->device);
  if (name != name_ || id->port_num != port_num_)
    return make_error(errc::device_not_found,
                      what + " uses RDMA device " + name + " port "
                          + std::to_string(id->port_num)
                          + ", but this fabric opened " + name_ + " port "
                          + std::to_string(port_num_)
                          + "; set rdmactor.device/port to match the "
                            "interface of that address");
  return {};
}

caf::error verbs_device::check_offer(const conn_params& offer) const {
  if (offer.recv_depth < min_recv_depth
      || offer.recv_depth > static_cast<uint32_t>(attr_.max_qp_wr)
      || offer.recv_depth > static_cast<uint32_t>(attr_.max_cqe))
    return make_error(
        errc::invalid_argument,
        "recv_depth " + std::to_string(offer.recv_depth) + " is outside "
            + std::to_string(min_recv_depth) + ".."
            + std::to_string(std::min(attr_.max_qp_wr, attr_.max_cqe))
            + " (the work request limit of " + name_ + ")");
  if (offer.max_message_len_bytes < min_message_len_bytes)
    return make_error(errc::invalid_argument,
                      "max_message_len_bytes must be at least "
                          + std::to_string(min_message_len_bytes));
  ibv_port_attr port{};
  if (ibv_query_port(ctx_.get(), port_num_, &port) == 0
      && offer.max_message_len_bytes > port.max_msg_sz)
    return make_error(errc::invalid_argument,
                      "max_message_len_bytes "
                          + std::to_string(offer.max_message_len_bytes)
                          + " exceeds the largest message of " + name_ + " ("
                          + std::to_string(port.max_msg_sz) + " bytes)");
  return {};
}

uint8_t verbs_device::sgid_index(uint8_t cm_index) const {
  if (gid_index_ >= 0)
    return static_cast<uint8_t>(gid_index_);
  if (!is_ethernet())
    return cm_index;
  ibv_gid_entry cm_entry{};
  if (ibv_query_gid_ex(ctx_.get(), port_num_, cm_index, &cm_entry, 0) != 0
      || cm_entry.gid_type == IBV_GID_TYPE_ROCE_V2)
    return cm_index;
  ibv_port_attr port{};
  if (ibv_query_port(ctx_.get(), port_num_, &port) != 0)
    return cm_index;
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid_entry entry{};
    if (ibv_query_gid_ex(ctx_.get(), port_num_, static_cast<uint32_t>(i),
                         &entry, 0)
            == 0
        && entry.gid_type == IBV_GID_TYPE_ROCE_V2
        && std::memcmp(entry.gid.raw, cm_entry.gid.raw, 16) == 0)
      return static_cast<uint8_t>(i);
  }
  return cm_index;
}

void verbs_device::add(verbs_queue_pair* qp) {
  std::lock_guard<std::mutex> guard{mtx_};
  qps_.push_back(qp);
}

void verbs_device::remove(verbs_queue_pair* qp) {
  std::lock_guard<std::mutex> guard{mtx_};
  qps_.erase(std::remove(qps_.begin(), qps_.end(), qp), qps_.end());
}

// -- event thread --------------------------------------------------------

void verbs_device::run_events() {
  name_this_thread("rdm.verbs.event");
  pollfd fds[3] = {{cm_channel_->fd, POLLIN, 0},
                   {ctx_->async_fd, POLLIN, 0},
                   {stop_fd_.get(), POLLIN, 0}};
  for (;;) {
    for (auto& fd : fds)
      fd.revents = 0;
    if (::poll(fds, 3, -1) < 0) {
      if (errno == EINTR)
        continue;
      log().error("verbs: event thread: poll failed: {}", errno_text(errno));
      return;
    }
    if (fds[2].revents != 0)
      return;
    if (fds[0].revents != 0) {
      rdma_cm_event* ev = nullptr;
      while (rdma_get_cm_event(cm_channel_.get(), &ev) == 0) {
        handle_cm_event(*ev);
        cm_event_ptr ack{ev};
      }
    }
    if (fds[1].revents != 0) {
      ibv_async_event ev{};
      while (ibv_get_async_event(ctx_.get(), &ev) == 0) {
        handle_async_event(ev);
        ibv_ack_async_event(&ev);
      }
    }
  }
}

void verbs_device::handle_cm_event(const rdma_cm_event& ev) {
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto qp : qps_)
    if (qp->id() == ev.id) {
      qp->on_cm_event(ev.event, ev.status);
      return;
    }
  log().debug("verbs: {} for an unknown connection ignored",
              rdma_event_str(ev.event));
}

void verbs_device::handle_async_event(const ibv_async_event& ev) {
  auto what
      = std::string{"asynchronous event "} + ibv_event_type_str(ev.event_type);
  std::lock_guard<std::mutex> guard{mtx_};
  switch (ev.event_type) {
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_PATH_MIG_ERR:
      for (auto qp : qps_)
        if (qp->qp() == ev.element.qp)
          qp->fail(what);
      break;
    case IBV_EVENT_CQ_ERR:
      for (auto qp : qps_)
        if (qp->owns_cq(ev.element.cq))
          qp->fail(what);
      break;
    case IBV_EVENT_SRQ_ERR:
      for (auto qp : qps_)
        if (qp->uses_srq(ev.element.srq))
          qp->fail(what);
      break;
    case IBV_EVENT_PORT_ERR:
      log().warn("verbs: {} port {} went down", name_, ev.element.port_num);
      if (ev.element.port_num == port_num_)
        for (auto qp : qps_)
          qp->fail(what + " (port " + std::to_string(ev.element.port_num)
                   + " down)");
      break;
    case IBV_EVENT_DEVICE_FATAL:
      log().error("verbs: {} reported a fatal error", name_);
      for (auto qp : qps_)
        qp->fail(what);
      break;
    default:
      log().debug("verbs: {}: {}", name_, what);
  }
}

} // namespace rdmactor::transport::verbs
