// dpu-cni: the CNI plugin binary the runtime executes for every pod. It stays
// thin and starts fast (the whole exec-to-exit budget is 5 ms): read stdin,
// validate, forward to host-shim, print the answer (cni/plugin.h).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "cni/invocation.h"
#include "cni/plugin.h"
#include "cni/render.h"
#include "cni/versions.h"

namespace {

// Reads stdin to its end, or to one byte over the cap, which is enough for
// the parser to refuse it (invocation.h): an endless stream is never
// buffered. False on an I/O error.
bool readConfig(int fd, std::string& out) {
  char buf[16384];
  while (out.size() <= dpu::cni::kMaxConfigBytes) {
    ssize_t n = ::read(fd, buf, std::min(sizeof buf, dpu::cni::kMaxConfigBytes + 1 - out.size()));
    if (n == 0) return true;
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    out.append(buf, static_cast<size_t>(n));
  }
  return true;
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
  if (!readConfig(STDIN_FILENO, input)) {
    writeAll(renderError(kNewestVersion, fail(ErrorCode::kIoFailure, "cannot read the network configuration",
                                              std::string("reading stdin failed: ") + std::strerror(errno))));
    return 1;
  }
  Outcome out = run(processEnvironment(), input, unixSocketTransport());
  writeAll(out.stdout_text);
  return out.exit_code;
}
