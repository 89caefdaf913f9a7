// Runs the real dpu-cni binary the way a runtime does (environment, stdin,
// stdout captured, exit code), and a tiny stand-in host-shim on a unix socket
// that answers every CniRequest with a canned CniResponse. Shared by the
// binary test and the overhead benchmark.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "common/ipc_proto.h"
#include "dpu/cni/v1/cni.pb.h"

extern char** environ;

namespace dpu::cni::test {

// What host-shim answers for a pod on 10.244.1.0/24: the stand-in's reply in
// the binary tests and the overhead benchmark.
inline cni::v1::CniResponse podAddedResponse() {
  cni::v1::CniResponse r;
  auto* res = r.mutable_result();
  auto* i = res->add_interfaces();
  i->set_name("eth0");
  i->set_mac("0a:58:0a:f4:01:05");
  i->set_sandbox("/proc/self/ns/net");
  auto* ip = res->add_ips();
  ip->set_address("10.244.1.5/24");
  ip->set_gateway("10.244.1.1");
  ip->set_interface(0);
  return r;
}

struct Exec {
  int exit_code = -1;
  std::string out;
  std::string err;
  long max_rss_kb = 0;  // the child's peak resident set (getrusage's ru_maxrss)
};

// Only the variables given are set: a runtime passes a controlled environment.
inline Exec runPlugin(const std::string& binary, const std::map<std::string, std::string>& env,
                      const std::string& input) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC)) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  std::vector<std::string> kv;
  for (auto& [k, v] : env) kv.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : kv) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string bin = binary;
  char* argv[] = {bin.data(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, bin.c_str(), &fa, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  Exec result;
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    return result;
  }
  // A config that fits in the pipe buffer is written whole, then the output
  // read; a larger one blocks until the plugin has read it or stops reading
  // (EPIPE), while its small answer waits in its own pipe.
  signal(SIGPIPE, SIG_IGN);
  (void)!::write(in[1], input.data(), input.size());
  ::close(in[1]);
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[8192];
  while (open_fds > 0) {
    if (::poll(fds, 2, 30000) <= 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  for (auto& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  result.max_rss_kb = usage.ru_maxrss;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Answers every request with `response` until destroyed; records the last request.
class FakeHostShim {
 public:
  FakeHostShim(std::string path, dpu::cni::v1::CniResponse response)
      : path_(std::move(path)), response_(std::move(response)) {
    auto l = ipc::listenUnix(path_, 0600);
    if (!l) throw std::runtime_error(l.error());
    listener_ = std::move(*l);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeHostShim() {
    stop_ = true;
    thread_.join();
    ::unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  int requests() const { return requests_.load(); }
  dpu::cni::v1::Command lastCommand() const { return static_cast<dpu::cni::v1::Command>(last_command_.load()); }

 private:
  void serve() {
    while (!stop_) {
      auto conn = ipc::acceptUnix(listener_, ipc::after(std::chrono::milliseconds(50)));
      if (!conn || !conn->valid()) continue;
      dpu::cni::v1::CniRequest req;
      auto f = ipc::recvMessage(*conn, req, ipc::after(std::chrono::seconds(2)));
      if (!f.ok()) continue;
      last_command_ = req.command();
      ++requests_;
      (void)ipc::sendMessage(*conn, response_, ipc::after(std::chrono::seconds(2)));
    }
  }
  std::string path_;
  dpu::cni::v1::CniResponse response_;
  ipc::Socket listener_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::atomic<int> last_command_{0};
};

}  // namespace dpu::cni::test
