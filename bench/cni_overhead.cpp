// dpu-cni's own overhead: exec to exit of the real binary, host-shim excluded.
// A trivial in-process stand-in answers on a unix socket, so what is measured
// is process start, dynamic linking, parsing, validation, the socket round
// trip and rendering. Prints p50/p99 over N runs for VERSION, STATUS and ADD,
// next to posix_spawn of /bin/true (the floor of any exec) and the bare socket
// round trip. Target: p50 under 5 ms.
//   cni_overhead_bench <path to dpu-cni> [runs=200]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "plugin_exec.h"

using namespace dpu::cni::test;
namespace v1 = dpu::cni::v1;

namespace {

struct Stats {
  double p50 = 0, p99 = 0;
};

template <class F>
Stats measure(int runs, F&& f) {
  std::vector<double> ms;
  f();  // warm the page cache
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms[std::min(ms.size() - 1, ms.size() * 99 / 100)]};
}

void print(const char* what, Stats s) { std::printf("%-44s p50 %6.3f ms  p99 %6.3f ms\n", what, s.p50, s.p99); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DPU_CNI_BINARY [runs]\n", argv[0]);
    return 2;
  }
  std::string binary = argv[1];
  int runs = argc > 2 ? std::atoi(argv[2]) : 200;
  v1::CniResponse answer = dpu::cni::test::podAddedResponse();
  answer.mutable_result()->add_routes()->set_dst("0.0.0.0/0");
  std::string sock = "/tmp/dpu-cni-overhead-" + std::to_string(::getpid()) + ".sock";
  FakeHostShim shim(sock, answer);
  std::string conf = R"({"cniVersion":"1.1.0","name":"dpunet","type":"dpu-cni","socket":")" + sock + R"("})";
  bool ok = true;

  std::printf("dpu-cni overhead, %d runs each (exec to exit, stand-in host-shim answers at once)\n", runs);
  print("posix_spawn /bin/true (floor)", measure(runs, [&] { runPlugin("/bin/true", {}, ""); }));
  print("socket round trip alone (in process)", measure(runs, [&] {
          v1::CniRequest req;
          req.set_command(v1::STATUS);
          ok &= dpu::ipc::call<v1::CniResponse>(sock, req, dpu::ipc::after(std::chrono::seconds(2))).ok();
        }));
  Stats version = measure(runs, [&] {
    ok &= runPlugin(binary, {{"CNI_COMMAND", "VERSION"}}, R"({"cniVersion":"1.1.0"})").exit_code == 0;
  });
  print("dpu-cni VERSION", version);
  Stats status = measure(runs, [&] {
    ok &= runPlugin(binary, {{"CNI_COMMAND", "STATUS"}, {"CNI_PATH", "/usr/lib/cni"}}, conf).exit_code == 0;
  });
  print("dpu-cni STATUS (socket round trip)", status);
  Stats add = measure(runs, [&] {
    ok &= runPlugin(binary,
                    {{"CNI_COMMAND", "ADD"}, {"CNI_CONTAINERID", "bench"}, {"CNI_NETNS", "/proc/self/ns/net"},
                     {"CNI_IFNAME", "eth0"}, {"CNI_PATH", "/usr/lib/cni"},
                     {"CNI_ARGS", "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web"}},
                    conf)
              .exit_code == 0;
  });
  print("dpu-cni ADD (validate, round trip, render)", add);
  std::printf("RESULT overhead_p50_ms version=%.3f status=%.3f add=%.3f target=5.0 %s\n", version.p50, status.p50,
              add.p50, std::max({version.p50, status.p50, add.p50}) < 5.0 ? "MET" : "MISSED");
  if (!ok) {
    std::fprintf(stderr, "some runs failed\n");
    return 1;
  }
  return 0;
}
