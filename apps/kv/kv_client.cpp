#include "kv_client.hpp"

#include <caf/actor_cast.hpp>
#include <caf/exit_reason.hpp>
#include <caf/sec.hpp>
#include <caf/send.hpp>

namespace kv {

namespace {

caf::error peer_error(const std::string& host_port, const std::string& what) {
  return rdmactor::make_error(rdmactor::errc::peer_error,
                              host_port + ": " + what
                                  + "; is it an rdmactor-kv --serve?");
}

/// A put is always a request to the server's kv actor (its table's only
/// writer): the new version, or the actor's error.
caf::expected<uint64_t> put_through(caf::scoped_actor& self, const service& svc,
                                    std::chrono::milliseconds timeout,
                                    const std::string& key,
                                    const std::string& value) {
  uint64_t version = 0;
  caf::error err;
  self->request(svc, timeout, put_atom::value, key, value)
      .receive([&](uint64_t v) { version = v; },
               [&](caf::error& e) { err = std::move(e); });
  if (err)
    return err;
  return version;
}

} // namespace

client::client(caf::actor_system& sys, std::chrono::milliseconds timeout,
               uint32_t max_retries)
    : self_(sys), timeout_(timeout), max_retries_(max_retries) {
  // nop
}

client::~client() {
  // The connection ends with its last handle; the table's remote_mr is
  // released with it.
  if (conn_)
    caf::anon_send_exit(conn_, caf::exit_reason::user_shutdown);
}

caf::expected<std::unique_ptr<client>>
client::open(caf::actor_system& sys, rdmactor::node& nd,
             const std::string& host_port, uint32_t max_retries) {
  auto timeout = std::chrono::milliseconds(nd.opts().request_timeout_ms);
  std::unique_ptr<client> c{new client(sys, timeout, max_retries)};
  auto conn = nd.connect(host_port);
  if (!conn)
    return std::move(conn.error());
  c->conn_ = std::move(*conn);
  caf::error err;
  // The server lends its table as it accepts us: take it (tagged).
  uint64_t tag = 0;
  c->self_
      ->request(c->conn_, timeout, rdmactor::receive_tagged_remote_mr_atom_v)
      .receive(
          [&](rdmactor::remote_mr& rmr, uint64_t t) {
            c->table_ = std::move(rmr);
            tag = t;
          },
          [&](caf::error& e) { err = std::move(e); });
  if (err) {
    // A server that lends nothing (no rdmactor-kv) lets the wait time out.
    bool timed_out
        = rdmactor::code_of(err) == rdmactor::errc::request_timeout
          || (err.category() == caf::atom("system")
              && err.code() == static_cast<uint8_t>(caf::sec::request_timeout));
    if (timed_out)
      return peer_error(host_port, "it lent no memory region within "
                                       + std::to_string(timeout.count())
                                       + " ms (" + rdmactor::render(err) + ")");
    return err;
  }
  if (tag != table_magic)
    return peer_error(host_port, "it lent a region tagged "
                                     + std::to_string(tag)
                                     + ", not an rdmactor-kv table");
  // One buffer for every read: a slot (the header fits in it too).
  c->self_
      ->request(c->conn_, timeout, rdmactor::alloc_local_mr_atom_v,
                uint64_t{slot_bytes}, uint64_t{64}, uint32_t{0})
      .receive([&](rdmactor::local_mr& mr) { c->buf_ = std::move(mr); },
               [&](caf::error& e) { err = std::move(e); });
  if (err)
    return err;
  // The header says how many slots there are; check it against the region.
  auto hdr_rmr = c->table_.slice(0, header_bytes);
  auto hdr_buf = c->buf_.slice(0, header_bytes);
  if (!hdr_rmr || !hdr_buf)
    return peer_error(host_port, "the lent region is smaller than a table "
                                 "header");
  c->self_
      ->request(c->conn_, timeout, rdmactor::read_atom_v, *hdr_buf, *hdr_rmr)
      .receive([](uint64_t) {}, [&](caf::error& e) { err = std::move(e); });
  if (err)
    return err;
  if (auto what = read_header(c->buf_.data(), c->table_.size(), &c->geo_);
      !what.empty())
    return peer_error(host_port, what);
  // The actor that takes puts.
  c->self_
      ->request(c->conn_, timeout, rdmactor::lookup_atom::value,
                std::string{service_name}, rdmactor::interface_of<service>(sys))
      .receive(
          [&](caf::actor& proxy) {
            c->svc_ = caf::actor_cast<service>(std::move(proxy));
          },
          [&](caf::error& e) { err = std::move(e); });
  if (err)
    return err;
  return c;
}

caf::error client::read_slot_raw(uint64_t i) {
  auto rmr = table_.slice(header_bytes + i * slot_bytes, slot_bytes);
  if (!rmr)
    return std::move(rmr.error());
  caf::error err;
  self_->request(conn_, timeout_, rdmactor::read_atom_v, buf_, *rmr)
      .receive([](uint64_t) {}, [&](caf::error& e) { err = std::move(e); });
  return err;
}

caf::expected<get_result> client::get(const std::string& key) {
  get_result res;
  if (key.empty() || key.size() > key_max_bytes)
    return rdmactor::make_error(rdmactor::errc::invalid_argument,
                                "keys have 1 to "
                                    + std::to_string(key_max_bytes) + " bytes");
  auto home = home_slot(key, geo_.slots);
  slot_view view;
  for (uint32_t probe = 0; probe < geo_.max_probes; ++probe) {
    auto i = (home + probe) % geo_.slots;
    for (;;) {
      ++res.reads;
      if (auto err = read_slot_raw(i))
        return err;
      auto what = read_slot(buf_.data(), &view);
      if (what == slot_read::torn) {
        if (res.retries++ >= max_retries_)
          return rdmactor::make_error(
              rdmactor::errc::request_timeout,
              "slot " + std::to_string(i) + " changed during each of "
                  + std::to_string(res.retries)
                  + " reads (a writer keeps it busy); try again or raise "
                    "--retries");
        continue;
      }
      if (what == slot_read::bad)
        return rdmactor::make_error(rdmactor::errc::peer_error,
                                    "slot " + std::to_string(i)
                                        + " holds impossible contents (a "
                                          "consistent version and checksum, "
                                          "lengths out of range)");
      if (what == slot_read::empty)
        return res; // not found: keys are never removed, chains never break
      if (view.key == key) {
        res.found = true;
        res.value = std::move(view.value);
        return res;
      }
      break; // another key: probe on
    }
  }
  return res;
}

caf::expected<uint64_t> client::put(const std::string& key,
                                    const std::string& value) {
  return put_through(self_, svc_, timeout_, key, value);
}

actor_store::actor_store(caf::actor_system& sys, service svc,
                         std::chrono::milliseconds timeout,
                         std::unique_ptr<client> owner)
    : owner_(std::move(owner)), self_(sys), svc_(std::move(svc)),
      timeout_(timeout) {
  // nop
}

caf::expected<get_result> actor_store::get(const std::string& key) {
  get_result res;
  caf::error err;
  self_->request(svc_, timeout_, get_atom::value, key)
      .receive(
          [&](bool found, std::string& value) {
            res.found = found;
            res.value = std::move(value);
          },
          [&](caf::error& e) { err = std::move(e); });
  if (err)
    return err;
  return res;
}

caf::expected<uint64_t> actor_store::put(const std::string& key,
                                         const std::string& value) {
  return put_through(self_, svc_, timeout_, key, value);
}

} // namespace kv
