// dpuctl: the operator's view of a running dpu-dataplane over its operator
// socket (dataplane.proto OperatorRequest/OperatorReply).
//
//   dpuctl [--socket PATH] [--json] dump-flows | ports | stats [--all] | problems | startup | neighbours
//
// Exit codes: 0 success, 1 the dataplane could not be reached or answered an
// error, 2 bad command line.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/ipc_proto.h"
#include "common/version.h"
#include "dpu/dataplane/v1/dataplane.pb.h"
#include "dpuctl_format.h"

namespace {

using namespace std::chrono_literals;
namespace v1 = dpu::dataplane::v1;

constexpr const char* kDefaultSocket = "/run/dpu/dpuctl.sock";

void usage(FILE* out) {
  std::fprintf(out,
               "usage: dpuctl [--socket PATH] [--json] COMMAND\n"
               "commands:\n"
               "  dump-flows     every cached datapath flow: match, actions, packets, bytes, age,\n"
               "                 last use and where it runs (hw, or sw with the reason)\n"
               "  ports          ports with role, state, counters (RX_MISSED: dropped by the NIC, its\n"
               "                 receive ring full; MISS_DROP: new flows dropped over the slow-path\n"
               "                 budget; THROTTLED: polls held to smaller bursts for that budget),\n"
               "                 backend, mbufs budgeted, worker and devargs; below them why a\n"
               "                 port is not on its first backend,\n"
               "                 and the representors that could not be opened, with the reason\n"
               "  stats [--all]  drop reasons and events (non-zero ones unless --all)\n"
               "  problems       model objects the dataplane does not forward for (refused, or\n"
               "                 their port could not be opened), with the reason\n"
               "  startup        how the dataplane started, phase by phase (EAL, mbuf pool, each\n"
               "                 port's steps on its backend, sockets, agent, first full sync,\n"
               "                 forwarding), in milliseconds from its start\n"
               "  neighbours     north-south: the host PF port, the node IPs and gateways, the host\n"
               "                 MACs learned on the host PF, the node network's neighbours (ARP)\n"
               "options:\n"
               "  --socket PATH  the dataplane's operator socket (default %s, or $DPUCTL_SOCKET)\n"
               "  --json         print the reply as JSON\n",
               kDefaultSocket);
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket = std::getenv("DPUCTL_SOCKET") ? std::getenv("DPUCTL_SOCKET") : kDefaultSocket;
  bool json = false;
  bool all = false;
  std::string command;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--socket" && i + 1 < argc) {
      socket = argv[++i];
    } else if (arg.rfind("--socket=", 0) == 0) {
      socket = arg.substr(9);
    } else if (arg == "--json") {
      json = true;
    } else if (arg == "--all") {
      all = true;
    } else if (arg == "--version") {
      std::printf("dpuctl %s\n", DPU_VERSION);
      return 0;
    } else if (arg == "-h" || arg == "--help" || arg == "help") {
      usage(stdout);
      return 0;
    } else if (command.empty() && arg[0] != '-') {
      command = arg;
    } else {
      std::fprintf(stderr, "dpuctl: unexpected argument \"%s\"\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  v1::OperatorRequest request;
  if (command == "dump-flows") {
    request.mutable_dump_flows()->set_include_stats(true);
  } else if (command == "ports") {
    request.mutable_ports();
  } else if (command == "stats") {
    request.mutable_stats();
  } else if (command == "problems") {
    request.mutable_problems();
  } else if (command == "startup") {
    request.mutable_stats();
  } else if (command == "neighbours" || command == "neighbors") {
    request.mutable_neighbours();
  } else {
    if (command.empty()) {
      std::fprintf(stderr, "dpuctl: no command given\n");
    } else {
      std::fprintf(stderr, "dpuctl: unknown command \"%s\"\n", command.c_str());
    }
    usage(stderr);
    return 2;
  }
  auto reply = dpu::ipc::call<v1::OperatorReply>(socket, request, dpu::ipc::after(5s));
  if (!reply) {
    std::fprintf(stderr, "dpuctl: %s\n  is dpu-dataplane running? Its operator socket is sockets.operator in its config; "
                 "point dpuctl at it with --socket PATH.\n", reply.error().c_str());
    return 1;
  }
  if (!reply->error().empty()) {
    std::fprintf(stderr, "dpuctl: the dataplane refused %s: %s\n", command.c_str(), reply->error().c_str());
    return 1;
  }
  std::string out;
  if (json) {
    out = dpu::dpuctl::formatJson(*reply);
  } else if (command == "dump-flows") {
    out = dpu::dpuctl::formatFlows(*reply);
  } else if (command == "ports") {
    out = dpu::dpuctl::formatPorts(*reply);
  } else if (command == "problems") {
    out = dpu::dpuctl::formatProblems(*reply);
  } else if (command == "startup") {
    out = dpu::dpuctl::formatStartup(*reply);
  } else if (command == "neighbours" || command == "neighbors") {
    out = dpu::dpuctl::formatNeighbours(*reply);
  } else {
    out = dpu::dpuctl::formatStats(*reply, !all);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
