#include "common/fd_limit.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <sys/resource.h>

namespace rdmactor {

namespace {

std::string limit_text(rlim_t x) {
  return x == RLIM_INFINITY ? std::string{"unlimited"} : std::to_string(x);
}

} // namespace

open_files_limit raise_open_files_limit(uint64_t want_files) noexcept {
  open_files_limit out;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0)
    return out;
  out.before = out.after = lim.rlim_cur;
  out.hard = lim.rlim_max;
  auto want = lim.rlim_max == RLIM_INFINITY
                  ? static_cast<rlim_t>(want_files)
                  : std::min<rlim_t>(lim.rlim_max, want_files);
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    lim.rlim_cur = want;
    if (::setrlimit(RLIMIT_NOFILE, &lim) == 0)
      out.after = want;
  }
  return out;
}

std::string describe_fd_error(int err) {
  std::string out = std::strerror(err);
  if (err == EMFILE) {
    rlimit lim{};
    if (::getrlimit(RLIMIT_NOFILE, &lim) == 0)
      out += " (this process may have " + limit_text(lim.rlim_cur)
             + " open files: its soft RLIMIT_NOFILE; hard limit "
             + limit_text(lim.rlim_max) + ")";
    out += "; raise the limit (ulimit -n, LimitNOFILE= in a systemd unit, "
           "nofile in /etc/security/limits.conf) or use fewer connections";
  } else if (err == ENFILE) {
    out += "; the system-wide limit of open files is reached: raise it "
           "(sysctl fs.file-max) or close files elsewhere";
  }
  return out;
}

} // namespace rdmactor
