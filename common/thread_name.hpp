#pragma once

namespace rdmactor {

/// Names the calling thread `name` for `top -H`, `perf report --sort comm`,
/// gdb and /proc/PID/task/TID/comm.  Linux keeps at most 15 characters:
/// longer names are cut there.  Every thread rdmactor starts names itself
/// "rdm." plus its job ("rdm.soft.loop", "rdm.accept", "rdm.keepalive",
/// ...); a thread started before the call keeps its name, a thread
/// started after it inherits the caller's.  Does nothing where the
/// platform has no thread names.
void name_this_thread(const char* name) noexcept;

/// Returns the calling thread's name ("" where the platform has none).
const char* this_thread_name() noexcept;

} // namespace rdmactor
