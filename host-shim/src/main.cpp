// host-shim: `host-shim --config FILE [--check-config]`. Loads and validates
// the config (a bad one fails here naming the field; --check-config stops
// there), starts the attach service and the CNI server, and shuts down
// cleanly on SIGTERM/SIGINT (requests in flight finish).
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "common/log.h"
#include "common/version.h"
#include "host-shim/attach_service.h"
#include "host-shim/cni_server.h"
#include "host-shim/config.h"
#include "host-shim/dpu_client.h"
#include "host-shim/netlink.h"

using namespace dpu::hostshim;

namespace {

int usage() {
  std::fprintf(stderr,
               "usage: host-shim --config FILE [--check-config]\n"
               "  --config FILE    the host-shim configuration (JSON or YAML)\n"
               "  --check-config   validate the configuration and exit\n"
               "  --version        print the version and exit\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc)
      config_path = argv[++i];
    else if (a.rfind("--config=", 0) == 0)
      config_path = a.substr(9);
    else if (a == "--check-config")
      check_only = true;
    else if (a == "--version") {
      std::printf("host-shim %s\n", DPU_VERSION);
      return 0;
    } else if (a == "--help" || a == "-h")
      return usage();
    else {
      std::fprintf(stderr, "host-shim: unknown argument '%s'\n", a.c_str());
      return usage();
    }
  }
  if (config_path.empty()) return usage();

  // Signals go to one thread only; block them before any other thread exists.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto config = loadConfig(config_path);
  if (!config) {
    std::fprintf(stderr, "host-shim: bad config: %s\n", config.error().c_str());
    return 1;
  }
  if (check_only) {
    size_t pool = 0;
    for (const auto& pf : config->pfs) pool += pf.pool.size();
    std::printf("%s: OK: %zu PF(s), %zu pool VF(s), socket %s, DPU agent at %s%s\n", config_path.c_str(),
                config->pfs.size(), pool, config->socket_path.c_str(), config->dpu.url.c_str(),
                config->management.enabled ? ", management port on" : "");
    return 0;
  }
  if (auto lvl = dpu::log::parseLevel(config->log_level)) dpu::log::setLevel(*lvl);
  if (!config->log_file.empty())
    if (auto r = dpu::log::setFile(config->log_file); !r) {
      std::fprintf(stderr, "host-shim: log.file: %s\n", r.error().c_str());
      return 1;
    }

  auto netlink = dpu::hostshim::nl::libnlNetlink();
  DpuClient dpu(config->dpu);
  AttachService::Options options;
  // Test and benchmark knobs, not configuration: a delay before each return
  // (to observe the in-between state) and the return worker's quiet period.
  if (const char* d = std::getenv("HOSTSHIM_TEST_RETURN_DELAY_MS"))
    options.returns.delay = std::chrono::milliseconds(std::atoi(d));
  if (const char* q = std::getenv("HOSTSHIM_TEST_RETURN_QUIET_MS"))
    options.returns.quiet = std::chrono::milliseconds(std::atoi(q));
  AttachService service(*config, *netlink, dpu, options);
  if (auto r = service.start(); !r) {
    DPU_LOG(kError, "host-shim") << "cannot start: " << r.error();
    std::fprintf(stderr, "host-shim: cannot start: %s\n", r.error().c_str());
    return 1;
  }
  CniServerOptions server_options;
  server_options.socket_path = config->socket_path;
  server_options.mode = config->socket_mode;
  server_options.group = config->socket_group;
  server_options.allowed_uids = config->socket_allowed_uids;
  server_options.max_connections = config->max_connections;
  server_options.request_timeout_ms = config->request_timeout_ms;
  CniServer server(service, server_options);
  if (auto r = server.listen(); !r) {
    std::fprintf(stderr, "host-shim: %s\n", r.error().c_str());
    service.stop();
    return 1;
  }
  std::thread signals([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    DPU_LOG(kInfo, "host-shim") << "signal " << sig << ": shutting down";
    server.stop();
  });
  DPU_LOG(kInfo, "host-shim") << "serving CNI on " << config->socket_path << ", DPU agent at " << config->dpu.url;
  server.serve();
  service.stop();
  // The signal thread is still in sigwait when serve() ended for another reason.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  DPU_LOG(kInfo, "host-shim") << "stopped";
  return 0;
}
