#include "common/thread_name.hpp"

#include <cstring>

#if defined(__linux__)
#  include <pthread.h>
#endif

namespace rdmactor {

void name_this_thread(const char* name) noexcept {
#if defined(__linux__)
  char cut[16];
  std::strncpy(cut, name, sizeof(cut) - 1);
  cut[sizeof(cut) - 1] = '\0';
  ::pthread_setname_np(::pthread_self(), cut);
#else
  (void)name;
#endif
}

const char* this_thread_name() noexcept {
#if defined(__linux__)
  thread_local char buf[16];
  if (::pthread_getname_np(::pthread_self(), buf, sizeof(buf)) != 0)
    buf[0] = '\0';
  return buf;
#else
  return "";
#endif
}

} // namespace rdmactor
