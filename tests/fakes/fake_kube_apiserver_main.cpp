// fake_kube_apiserver: the fake Kubernetes API server as its own process, for
// the scale benchmark (so the client's resident memory is measured alone), the
// lab's Kubernetes mode (kubectl and the agents against it) and poking at by
// hand with curl or kubectl.
//
//   fake_kube_apiserver [--port N] [--bind ADDR] [--cert FILE --key FILE]
//                       [--token T] [--token-auth-file FILE] [--rbac FILE]...
//                       [--controllers] [--service-cidr CIDR[,CIDR]]
//                       [--history N] [--bookmark-ms N] [--scale NODES,PODS_PER_NODE,SERVICES,EPS_PER_SERVICE]
//
// --token authenticates system:admin (group system:masters); without any
// token every request is system:admin. --token-auth-file is kube-apiserver's
// static token file: one `token,user,uid[,"group1,group2"]` per line. --rbac
// (repeatable) loads ClusterRoles, Roles and bindings and turns RBAC on.
// --controllers adds the scheduler, the EndpointSlice controller, namespace
// finalization and the objects a new cluster has. --service-cidr is
// kube-apiserver's --service-cluster-ip-range: one CIDR, or an IPv4 and an
// IPv6 one comma-separated for dual-stack Services (the first is the primary
// family; default 10.96.0.0/12).
//
// Prints "listening <url>" on stdout once it accepts connections; runs until
// SIGINT or SIGTERM. Control endpoints: POST /fake/scale?nodes=..., PUT
// /fake/objects/<resource>, DELETE /fake/objects/<resource>/<ns>/<name>,
// POST /fake/compact, POST /fake/drop-watches[?midEvent=true], GET /fake/stats,
// GET /fake/rbac (denials and grants with whether they were used).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "common/atomic_file.h"
#include "fake_kube_apiserver.h"

namespace {

// kube-apiserver's --token-auth-file format.
bool loadTokenFile(const std::string& path, std::vector<dpu::fakes::FakeKubeToken>& out, std::string& error) {
  auto text = dpu::readFile(path);
  if (!text) {
    error = text.error();
    return false;
  }
  std::istringstream in(*text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> fields;
    std::string cur;
    bool quoted = false;
    for (char c : line) {
      if (c == '"') quoted = !quoted;
      else if (c == ',' && !quoted) {
        fields.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    }
    fields.push_back(cur);
    if (fields.size() < 3 || fields[0].empty() || fields[1].empty()) {
      error = path + ":" + std::to_string(n) + ": expected token,user,uid[,\"group1,group2\"]";
      return false;
    }
    dpu::fakes::FakeKubeToken t{fields[0], {fields[1], {}}};
    if (fields.size() >= 4) {
      std::istringstream groups(fields[3]);
      std::string g;
      while (std::getline(groups, g, ','))
        if (!g.empty()) t.user.groups.push_back(g);
    }
    out.push_back(std::move(t));
  }
  return true;
}

}  // namespace

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
    else if (a == "--token-auth-file") {
      std::string error;
      if (!loadTokenFile(next(), opt.tokens, error)) {
        fprintf(stderr, "fake_kube_apiserver: --token-auth-file: %s\n", error.c_str());
        return 2;
      }
    } else if (a == "--rbac") opt.rbac_files.push_back(next());
    else if (a == "--controllers") opt.controllers = true;
    else if (a == "--service-cidr") opt.service_cidr = next();
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
