#pragma once

// A child process running reliability_peer, with its stdout on a pipe.

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace rdmactor::test {

/// A peer process; killed (SIGKILL) and reaped by the destructor.
class peer_process {
public:
  /// Starts `program` with `args`; `started()` says whether it worked.
  peer_process(const std::string& program,
               const std::vector<std::string>& args) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    std::vector<std::string> all{program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    if (::posix_spawn(&pid_, program.c_str(), &actions, nullptr, argv.data(),
                      environ)
        != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_ = fds[0];
  }

  peer_process(const peer_process&) = delete;
  peer_process& operator=(const peer_process&) = delete;

  ~peer_process() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0)
      ::close(out_);
  }

  bool started() const noexcept {
    return pid_ > 0;
  }

  /// Waits up to `timeout` for a line that starts with `prefix` and
  /// returns it; returns "" when the time runs out or the output ends.
  /// Other lines are collected in `lines`.
  std::string wait_for(const std::string& prefix,
                       std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = buf_.find('\n');
      while (nl != std::string::npos) {
        auto line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        lines.push_back(line);
        if (line.compare(0, prefix.size(), prefix) == 0)
          return line;
        nl = buf_.find('\n');
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || out_ < 0) {
        ended = "no such line in time";
        return {};
      }
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
        continue;
      char chunk[512];
      auto n = ::read(out_, chunk, sizeof(chunk));
      if (n < 0 && (errno == EINTR || errno == EAGAIN))
        continue; // a signal (TSan delivers its own) is not the end
      if (n <= 0) {
        ended = n == 0 ? "its output ended: " + reap()
                       : std::string{"reading its output failed: "}
                             + std::strerror(errno);
        return {};
      }
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  /// Sends `sig` to the process.
  void signal(int sig) {
    if (pid_ > 0 && !reaped_)
      ::kill(pid_, sig);
  }

  /// Stops the process (SIGSTOP) and waits until every thread of it is
  /// stopped (state T in /proc), so that nothing it does lags behind.
  bool stop(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    signal(SIGSTOP);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto dir = "/proc/" + std::to_string(pid_) + "/task";
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      bool any = false;
      if (auto* d = ::opendir(dir.c_str())) {
        while (auto* e = ::readdir(d)) {
          if (e->d_name[0] == '.')
            continue;
          any = true;
          if (task_state(dir + "/" + e->d_name + "/stat") != 'T')
            all = false;
        }
        ::closedir(d);
      }
      if (any && all)
        return true;
      ::usleep(1000);
    }
    return false;
  }

  /// Waits up to `timeout` for the process to exit; returns its exit
  /// status, 128 + signal when a signal ended it, -1 on timeout.
  int wait_exit(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0 && !reaped_) {
      int status = 0;
      auto rc = ::waitpid(pid_, &status, WNOHANG);
      if (rc == pid_) {
        reaped_ = true;
        status_
            = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline)
        return -1;
      ::usleep(10000);
    }
    return status_;
  }

  /// Kills the process (SIGKILL) and reaps it.
  void kill() {
    signal(SIGKILL);
    wait_exit(std::chrono::seconds(10));
  }

  /// Lines read so far that `wait_for` did not return.
  std::vector<std::string> lines;
  /// Waits for the process to end; how it ended, in words.
  std::string reap() {
    if (pid_ <= 0 || reaped_)
      return "ended";
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_)
      return "not reaped";
    reaped_ = true;
    if (WIFSIGNALED(status))
      return "killed by signal " + std::to_string(WTERMSIG(status));
    return "exit status " + std::to_string(WEXITSTATUS(status));
  }

  /// Why the last `wait_for` returned "" (for failure messages).
  std::string ended;

private:
  /// The state letter of a /proc stat file ('?' when unreadable).
  static char task_state(const std::string& path) {
    char buf[512] = {};
    auto fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return '?';
    auto n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    // "pid (comm) S ...": the state follows the last ')'.
    auto* p = n > 0 ? std::strrchr(buf, ')') : nullptr;
    return p != nullptr && p[1] == ' ' ? p[2] : '?';
  }

  pid_t pid_ = -1;
  int out_ = -1;
  bool reaped_ = false;
  int status_ = -1;
  std::string buf_;
};

} // namespace rdmactor::test
