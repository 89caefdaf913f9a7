// fake_kube_apiserver: the fake Kubernetes API server as its own process, for
// the scale benchmark (so the client's resident memory is measured alone) and
// for poking at by hand with curl.
//
//   fake_kube_apiserver [--port N] [--bind ADDR] [--cert FILE --key FILE] [--token T]
//                       [--history N] [--bookmark-ms N] [--scale NODES,PODS_PER_NODE,SERVICES,EPS_PER_SERVICE]
//
// Prints "listening <url>" on stdout once it accepts connections; runs until
// SIGINT or SIGTERM. Control endpoints: POST /fake/scale?nodes=..., PUT
// /fake/objects/<resource>, DELETE /fake/objects/<resource>/<ns>/<name>,
// POST /fake/compact, POST /fake/drop-watches[?midEvent=true], GET /fake/stats.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_kube_apiserver.h"

int main(int argc, char** argv) {
  dpu::fakes::FakeKubeApiServerOptions opt;
  std::string scale;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        fprintf(stderr, "fake_kube_apiserver: %s needs a value\n", a.c_str());
        exit(2);
      }
      return argv[++i];
    };
    if (a == "--port") opt.port = static_cast<uint16_t>(std::stoul(next()));
    else if (a == "--bind") opt.bind = next();
    else if (a == "--cert") opt.cert_file = next();
    else if (a == "--key") opt.key_file = next();
    else if (a == "--token") opt.token = next();
    else if (a == "--history") opt.history = std::stoul(next());
    else if (a == "--bookmark-ms") opt.bookmark_interval = std::chrono::milliseconds(std::stoul(next()));
    else if (a == "--scale") scale = next();
    else {
      fprintf(stderr, "fake_kube_apiserver: unknown argument %s (see the header of fake_kube_apiserver_main.cpp)\n",
              a.c_str());
      return 2;
    }
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // every thread inherits it; sigwait below takes them
  dpu::fakes::FakeKubeApiServer server;
  if (!scale.empty()) {
    dpu::fakes::FakeKubeScale s;
    if (sscanf(scale.c_str(), "%u,%u,%u,%u", &s.nodes, &s.pods_per_node, &s.services, &s.endpoints_per_service) != 4) {
      fprintf(stderr, "fake_kube_apiserver: --scale wants NODES,PODS_PER_NODE,SERVICES,EPS_PER_SERVICE\n");
      return 2;
    }
    server.loadScale(s);
  }
  if (auto ok = server.start(opt); !ok) {
    fprintf(stderr, "fake_kube_apiserver: %s\n", ok.error().c_str());
    return 1;
  }
  printf("listening %s\n", server.url().c_str());
  fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  server.stop();
  return 0;
}
