// host-shim: `host-shim --config FILE`. Loads and validates the config (a bad
// one fails here naming the field), starts the attach service and the CNI
// server, and shuts down cleanly on SIGTERM/SIGINT (requests in flight finish).
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "common/log.h"
#include "host-shim/attach_service.h"
#include "host-shim/cni_server.h"
#include "host-shim/config.h"

using namespace dpu::hostshim;

namespace {

int usage() {
  std::fprintf(stderr, "usage: host-shim --config FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc)
      config_path = argv[++i];
    else if (a.rfind("--config=", 0) == 0)
      config_path = a.substr(9);
    else if (a == "--help" || a == "-h")
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
  if (auto lvl = dpu::log::parseLevel(config->log_level)) dpu::log::setLevel(*lvl);
  if (!config->log_file.empty())
    if (auto r = dpu::log::setFile(config->log_file); !r) {
      std::fprintf(stderr, "host-shim: log.file: %s\n", r.error().c_str());
      return 1;
    }

  AttachService service(*config);
  if (auto r = service.start(); !r) {
    DPU_LOG(kError, "host-shim") << "cannot start: " << r.error();
    std::fprintf(stderr, "host-shim: cannot start: %s\n", r.error().c_str());
    return 1;
  }
  CniServer server(service, config->socket_path, config->request_timeout_ms);
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
