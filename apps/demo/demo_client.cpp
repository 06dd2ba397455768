#include "apps/demo/demo_client.hpp"

#include <chrono>
#include <cstdio>
#include <string>

#include <caf/scoped_actor.hpp>

#include "apps/demo/digest.hpp"
#include "protocol/codec.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::demo {

namespace {

using clock_type = std::chrono::steady_clock;
/// Runs one blocking request; returns the value or the error.
template <class T, class... Ts>
caf::expected<T> call(caf::scoped_actor& self, const connection_actor& conn,
                      Ts&&... xs) {
  caf::expected<T> result{caf::error{}};
  self->request(conn, op_timeout, std::forward<Ts>(xs)...)
      .receive([&](T& x) { result = std::move(x); },
               [&](caf::error& err) { result = std::move(err); });
  return result;
}

class reporter {
public:
  /// Prints one line: operation, size, status, time.
  void line(const std::string& op, uint64_t bytes, const caf::error& err,
            clock_type::time_point start) {
    auto us
        = std::chrono::duration<double, std::micro>(clock_type::now() - start)
              .count();
    std::printf("%-34s %10llu B  %-8s %10.1f us%s%s\n", op.c_str(),
                static_cast<unsigned long long>(bytes), err ? "FAILED" : "ok",
                us, err ? "  " : "", err ? render(err).c_str() : "");
    std::fflush(stdout);
    if (err)
      ok_ = false;
  }

  bool ok() const {
    return ok_;
  }

private:
  bool ok_ = true;
};

caf::error mismatch(const std::string& what) {
  return make_error(errc::internal_error, "verification failed: " + what);
}

/// Receives the peer's next digest.
caf::expected<digest> receive_digest(caf::scoped_actor& self,
                                     const connection_actor& conn) {
  auto reply = call<local_mr>(self, conn, receive_data_atom::value);
  if (!reply)
    return std::move(reply.error());
  if (reply->size() != digest::wire_size)
    return mismatch("digest of " + std::to_string(reply->size()) + " bytes");
  return digest::read_from(reply->data());
}

/// Receives one digest and compares it with `expected`.
caf::error expect_digest(caf::scoped_actor& self, const connection_actor& conn,
                         const digest& expected) {
  auto received = receive_digest(self, conn);
  if (!received)
    return std::move(received.error());
  auto& got = *received;
  if (got.is_refusal())
    return make_error(errc::quota_exceeded,
                      "the peer would not allocate memory to read it (over "
                      "its rdmactor.peer-max-claim-bytes?)");
  if (got.len != expected.len || got.sum != expected.sum)
    return mismatch("the peer saw " + std::to_string(got.len)
                    + " bytes with another checksum");
  return {};
}

/// Takes the peer's digest of the next chunk of a send_data whose
/// unverified bytes start at `data` (`remaining` of them) and checks it;
/// `len` gets the chunk's length.  The agent chooses the chunks (frames of
/// the negotiated size, or pieces a rendezvous peer reads), so the peer's
/// digest names the length.
caf::error expect_chunk_digest(caf::scoped_actor& self,
                               const connection_actor& conn,
                               const uint8_t* data, size_t remaining,
                               size_t& len) {
  auto received = receive_digest(self, conn);
  if (!received)
    return std::move(received.error());
  auto& got = *received;
  if (got.len > remaining || (got.len == 0 && remaining > 0))
    return mismatch("the peer saw a chunk of " + std::to_string(got.len)
                    + " bytes where " + std::to_string(remaining)
                    + " were left");
  if (got.sum != fnv1a(data, got.len))
    return mismatch("the peer saw " + std::to_string(got.len)
                    + " bytes with another checksum");
  len = got.len;
  return {};
}

} // namespace

bool run_client(caf::actor_system& sys, const connection_actor& conn) {
  caf::scoped_actor self{sys};
  reporter out;
  auto link = call<transport::link_params>(self, conn, peer_atom::value);
  if (!link) {
    std::printf("cannot query the connection: %s\n",
                render(link.error()).c_str());
    return false;
  }
  std::printf("connected to %s: max message %u B, receive depth %u\n",
              link->peer.c_str(), link->max_message_len_bytes,
              link->recv_depth);
  const size_t chunk_max
      = link->max_message_len_bytes - protocol::max_frame_overhead;
  const size_t region = 1 << 20;

  // 1. Registered local memory with a pattern.
  auto t0 = clock_type::now();
  auto src = call<local_mr>(self, conn, alloc_local_mr_atom::value,
                            uint64_t{region}, uint64_t{64});
  out.line("alloc_local_mr", region, src ? caf::error{} : src.error(), t0);
  if (!src)
    return false;
  fill_pattern(src->data(), src->size(), 1);
  const digest src_digest{src->size(), fnv1a(src->data(), src->size())};

  // 2. The peer allocates memory for us; we write into it and read back.
  t0 = clock_type::now();
  auto rmr = call<remote_mr>(self, conn, request_remote_mr_atom::value,
                             uint64_t{region}, uint64_t{64});
  out.line("request_remote_mr", region, rmr ? caf::error{} : rmr.error(), t0);
  if (!rmr)
    return false;
  t0 = clock_type::now();
  auto wr = call<uint64_t>(self, conn, write_atom::value, *src, *rmr);
  out.line("write (one-sided)", region, wr ? caf::error{} : wr.error(), t0);
  auto back = call<local_mr>(self, conn, alloc_local_mr_atom::value,
                             uint64_t{region}, uint64_t{64});
  if (!back)
    return false;
  t0 = clock_type::now();
  auto rd = call<uint64_t>(self, conn, read_atom::value, *back, *rmr);
  caf::error rd_err = rd ? caf::error{} : rd.error();
  if (!rd_err && fnv1a(back->data(), back->size()) != src_digest.sum)
    rd_err = mismatch("read-back differs from what was written");
  out.line("read (one-sided) + verify", region, rd_err, t0);

  // 3. Hand the peer's region back: the peer checksums what we wrote.
  t0 = clock_type::now();
  auto sent_back = call<mr_token>(self, conn, send_mr_atom::value, *rmr);
  caf::error sb_err = sent_back ? caf::error{} : sent_back.error();
  if (!sb_err)
    sb_err = expect_digest(self, conn, src_digest);
  out.line("send_mr(remote) + peer verifies", region, sb_err, t0);
  rmr = remote_mr{};

  // 4. Two-sided data: sizes around the chunk boundary and a large one.
  for (size_t size :
       {size_t{0}, size_t{1}, chunk_max, chunk_max + 1, size_t{4} << 20}) {
    auto buf = call<local_mr>(self, conn, alloc_local_mr_atom::value,
                              uint64_t{size}, uint64_t{64});
    if (!buf)
      return false;
    fill_pattern(buf->data(), buf->size(), static_cast<uint32_t>(size));
    t0 = clock_type::now();
    auto sent = call<uint64_t>(self, conn, send_data_atom::value, *buf);
    caf::error err = sent ? caf::error{} : sent.error();
    // One digest per chunk, in order.
    size_t off = 0;
    do {
      if (err)
        break;
      size_t len = 0;
      err = expect_chunk_digest(self, conn, buf->data() + off, size - off, len);
      off += len;
    } while (off < size);
    out.line("send_data + peer verifies", size, err, t0);
  }

  // 5. Lend the peer our memory: it reads it and answers the checksum.
  t0 = clock_type::now();
  auto lent = call<mr_token>(self, conn, send_mr_atom::value, *src);
  caf::error lent_err = lent ? caf::error{} : lent.error();
  if (!lent_err)
    lent_err = expect_digest(self, conn, src_digest);
  out.line("send_mr(local) + peer reads", region, lent_err, t0);

  // 6. The peer lent us its memory: read it and check its pattern.
  t0 = clock_type::now();
  auto theirs = call<remote_mr>(self, conn, receive_remote_mr_atom::value);
  caf::error th_err = theirs ? caf::error{} : theirs.error();
  if (!th_err) {
    // The length is the peer's claim: capped by peer-max-claim-bytes.
    auto dst = call<local_mr>(self, conn, alloc_for_peer_atom::value,
                              theirs->size(), uint64_t{64});
    if (!dst) {
      out.line("receive_remote_mr + read", theirs->size(), dst.error(), t0);
      return false;
    }
    auto n = call<uint64_t>(self, conn, read_atom::value, *dst, *theirs);
    if (!n) {
      th_err = n.error();
    } else {
      std::vector<uint8_t> expect(lent_mr_bytes);
      fill_pattern(expect.data(), expect.size(), lent_mr_seed);
      if (dst->size() != expect.size()
          || fnv1a(dst->data(), dst->size())
                 != fnv1a(expect.data(), expect.size()))
        th_err = mismatch("the peer's lent region has another pattern");
    }
  }
  out.line("receive_remote_mr + read", lent_mr_bytes, th_err, t0);
  if (theirs) {
    t0 = clock_type::now();
    auto rel = call<uint64_t>(self, conn, release_atom::value, *theirs);
    out.line("release remote_mr", lent_mr_bytes,
             rel ? caf::error{} : rel.error(), t0);
  }
  return out.ok();
}

} // namespace rdmactor::demo
