// dpu-cni: the CNI plugin binary the runtime executes for every pod. It stays
// thin and starts fast (the whole exec-to-exit budget is 5 ms): read stdin,
// validate, forward to host-shim, print the answer (cni/plugin.h).
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cni/plugin.h"
#include "cni/render.h"
#include "cni/versions.h"

namespace {

// Reads all of stdin; false on an I/O error.
bool readAll(int fd, std::string& out) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out.append(buf, static_cast<size_t>(n));
    // A network config is a few KB; refuse to buffer an endless stream.
    if (out.size() > (8u << 20)) return false;
  }
}

void writeAll(const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(STDOUT_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

int main() {
  using namespace dpu::cni;
  std::string input;
  if (!readAll(STDIN_FILENO, input)) {
    writeAll(renderError(kNewestVersion, fail(ErrorCode::kIoFailure, "cannot read the network configuration",
                                              std::string("reading stdin failed: ") + std::strerror(errno))));
    return 1;
  }
  Outcome out = run(processEnvironment(), input, unixSocketTransport());
  writeAll(out.stdout_text);
  return out.exit_code;
}
