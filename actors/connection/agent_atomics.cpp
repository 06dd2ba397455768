// The agent: atomic operations on a peer's memory (fetch-and-add,
// compare-and-swap), checked locally and handed to the transport.

#include "actors/connection/agent_state.hpp"
#include "actors/node/remote_mr_access.hpp"

#include "common/logging.hpp"

namespace rdmactor::agent_detail {

namespace {

/// Checks the word of an atomic locally; returns the 8-byte token to post.
caf::expected<mr_token> atomic_word(self_ptr self, const char* what,
                                    const remote_mr& word) {
  auto fail = [what](errc code, const std::string& why) {
    return make_error(code, std::string{what} + ": " + why);
  };
  if (auto err = check_remote(self, word, remote_use::post, what))
    return err;
  if (word.size() < transport::atomic_word_bytes)
    return fail(errc::out_of_bounds,
                "the remote_mr has " + std::to_string(word.size())
                    + " bytes; the word is its first 8, so it needs at "
                      "least 8");
  auto token = word.token();
  if (token.addr % transport::atomic_word_bytes != 0)
    return fail(errc::misaligned,
                "the word at peer address " + std::to_string(token.addr)
                    + " is not 8-byte aligned; slice the remote_mr at a "
                      "multiple of 8 from an 8-aligned region");
  token.len = transport::atomic_word_bytes;
  return token;
}

/// Posts an atomic `kind` on the agent's link and keeps `word` alive until
/// it completes (as `one_sided` does for WRITE and READ: the ReleaseMR of a
/// dropped handle must not overtake the operation).  The link answers
/// every operation, or the drain fails it when the connection goes, so no
/// timeout of its own is needed; the user's request has one.
caf::result<uint64_t> atomic(self_ptr self, const char* what, remote_mr word,
                             transport::op_kind kind, uint64_t compare_add,
                             uint64_t swap) {
  auto token = atomic_word(self, what, word);
  if (!token)
    return std::move(token.error());
  return run_one_sided(self, std::move(word), [&](auto finish) {
    submit_atomic_op(self, kind, *token, compare_add, swap,
                     finish_with(finish));
  });
}

} // namespace

caf::result<uint64_t> fetch_add_on_peer(self_ptr self, remote_mr word,
                                        uint64_t add) {
  return atomic(self, "fetch_add", std::move(word),
                transport::op_kind::fetch_add, add, 0);
}

caf::result<uint64_t> compare_swap_on_peer(self_ptr self, remote_mr word,
                                           uint64_t expected,
                                           uint64_t desired) {
  return atomic(self, "compare_swap", std::move(word),
                transport::op_kind::compare_swap, expected, desired);
}

} // namespace rdmactor::agent_detail
