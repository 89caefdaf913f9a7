// dpuctl: the operator's view of a running dpu-dataplane over its operator
// socket (dataplane.proto OperatorRequest/OperatorReply).
//
//   dpuctl [--socket PATH] [--json] dump-flows | ports | stats [--all] | problems | startup | neighbours
//          | services | ipsec [rotate] | conntrack [--address IP] [--port N] [--protocol P] [--limit N]
//          | policy [--port NAME]
//
// Exit codes: 0 success, 1 the dataplane could not be reached or answered an
// error, 2 bad command line.
#include <arpa/inet.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "common/ipc_proto.h"
#include "common/version.h"
#include "dpu/dataplane/v1/dataplane.pb.h"
#include "dpuctl_format.h"

namespace {

using namespace std::chrono_literals;
namespace v1 = dpu::dataplane::v1;

constexpr const char* kDefaultSocket = "/run/dpu/dpuctl.sock";
// `dpuctl services` counts connections per frontend over at most this many
// entries, so the answer stays well inside one operator frame (16 MiB).
constexpr uint32_t kServicesConntrackLimit = 50000;
constexpr uint32_t kMaxConntrackLimit = 100000;

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
               "                 MACs learned on the host PF, the node network's neighbours (ARP, IPv6 ND)\n"
               "  ipsec          the IPsec SAs in force (never a key): peer, direction, SPI, epochs,\n"
               "                 highest sequence number, packets, bytes, drops, age; encryption on or\n"
               "                 not, and the crypto backend\n"
               "  ipsec rotate   asks this node's dpu-agent for an IPsec key rotation (a new epoch,\n"
               "                 two-phase: nothing lost); the agent takes the request within a second\n"
               "  services       one row per service frontend (cluster IP, node port, external IP):\n"
               "                 address, protocol, traffic policy, affinity, usable/total backends,\n"
               "                 Maglev table size, connections; then each backend with its\n"
               "                 condition and its share of the Maglev tables\n"
               "  conntrack      tracked connections: original and reply tuples, state, NAT,\n"
               "                 service, idle time, expiry; the table's fill and counts per state\n"
               "    --address IP   only connections with IP in either tuple\n"
               "    --port N       only connections with port N (1-65535) in either tuple\n"
               "    --protocol P   only tcp, udp, sctp, icmp or icmpv6 connections\n"
               "    --limit N      list at most N connections (1-%u, default 1000)\n"
               "  policy         NetworkPolicy per pod port: isolation per direction, the rules\n"
               "                 (peers, protocol, ports, policy) and the new connections each\n"
               "                 isolating policy denied\n"
               "    --port NAME    only this logical port (its attachment id)\n"
               "options:\n"
               "  --socket PATH  the dataplane's operator socket (default %s, or $DPUCTL_SOCKET)\n"
               "  --json         print the reply as JSON\n",
               kMaxConntrackLimit, kDefaultSocket);
}

// A decimal in [min, max], or nullopt.
std::optional<uint32_t> number(const std::string& text, uint32_t min, uint32_t max) {
  if (text.empty() || text.size() > 9) return std::nullopt;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  if (v < min || v > max) return std::nullopt;
  return v;
}

bool ipAddress(const std::string& text) {
  unsigned char buf[16];
  return inet_pton(AF_INET, text.c_str(), buf) == 1 || inet_pton(AF_INET6, text.c_str(), buf) == 1;
}

int badArgument(const std::string& message) {
  std::fprintf(stderr, "dpuctl: %s\n", message.c_str());
  usage(stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string socket = std::getenv("DPUCTL_SOCKET") ? std::getenv("DPUCTL_SOCKET") : kDefaultSocket;
  bool json = false;
  bool all = false;
  std::string command, subcommand;  // subcommand: "dpuctl ipsec rotate"
  v1::ConntrackRequest filter;
  std::string filter_given;  // the first conntrack option, refused with another command
  std::string port_text;     // --port: a number for conntrack, a port name for policy
  bool port_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    // The conntrack filters: "--port 80" or "--port=80".
    std::string option, value;
    for (const char* name : {"--address", "--port", "--protocol", "--limit"}) {
      const std::string n = name;
      if (arg == n) {
        if (i + 1 >= argc) return badArgument(n + " needs a value");
        option = n;
        value = argv[++i];
      } else if (arg.rfind(n + "=", 0) == 0) {
        option = n;
        value = arg.substr(n.size() + 1);
      }
    }
    if (!option.empty()) {
      if (option == "--port") {
        port_text = value;
        port_given = true;
        continue;
      }
      if (filter_given.empty()) filter_given = option;
      if (option == "--address") {
        if (!ipAddress(value)) return badArgument("--address \"" + value + "\": not an IPv4 or IPv6 address");
        filter.set_address(value);
      } else if (option == "--protocol") {
        if (value != "tcp" && value != "udp" && value != "sctp" && value != "icmp" && value != "icmpv6")
          return badArgument("--protocol \"" + value + "\": use tcp, udp, sctp, icmp or icmpv6");
        filter.set_protocol(value);
      } else {
        auto n = number(value, 1, kMaxConntrackLimit);
        if (!n) {
          return badArgument("--limit \"" + value + "\": not a number from 1 to " +
                             std::to_string(kMaxConntrackLimit));
        }
        filter.set_limit(*n);
      }
      continue;
    }
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
    } else if (command == "ipsec" && subcommand.empty() && arg[0] != '-') {
      subcommand = arg;
    } else {
      std::fprintf(stderr, "dpuctl: unexpected argument \"%s\"\n", arg.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (!filter_given.empty() && !command.empty() && command != "conntrack")
    return badArgument(filter_given + " filters dpuctl conntrack only, not \"" + command + "\"");
  if (port_given && command == "policy") {
    if (port_text.empty()) return badArgument("--port needs a logical port name (its attachment id)");
  } else if (port_given) {
    if (!command.empty() && command != "conntrack") {
      return badArgument("--port filters dpuctl conntrack and policy only, not \"" + command + "\"");
    }
    auto p = number(port_text, 1, 65535);
    if (!p) return badArgument("--port \"" + port_text + "\": not a port number from 1 to 65535");
    filter.set_port(*p);
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
  } else if (command == "ipsec" && subcommand == "rotate") {
    request.mutable_ipsec_rotate();
  } else if (command == "ipsec" && !subcommand.empty()) {
    return badArgument("unknown ipsec command \"" + subcommand + "\" (dpuctl ipsec, or dpuctl ipsec rotate)");
  } else if (command == "ipsec") {
    request.mutable_ipsec();
  } else if (command == "services") {
    request.mutable_services();
  } else if (command == "conntrack") {
    *request.mutable_conntrack() = filter;
  } else if (command == "policy") {
    request.mutable_policy()->set_port(port_text);
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
    const std::string what = subcommand.empty() ? command : command + " " + subcommand;
    std::fprintf(stderr, "dpuctl: the dataplane refused %s: %s\n", what.c_str(), reply->error().c_str());
    return 1;
  }
  // services: the connections per frontend come from a conntrack answer.
  v1::OperatorReply connections;
  if (command == "services" && !json) {
    v1::OperatorRequest ct;
    ct.mutable_conntrack()->set_limit(kServicesConntrackLimit);
    auto got = dpu::ipc::call<v1::OperatorReply>(socket, ct, dpu::ipc::after(5s));
    if (!got || !got->error().empty()) {
      std::fprintf(stderr, "dpuctl: the dataplane answered services but not conntrack: %s\n",
                   !got ? got.error().c_str() : got->error().c_str());
      return 1;
    }
    connections = std::move(*got);
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
  } else if (command == "ipsec" && subcommand == "rotate") {
    out = dpu::dpuctl::formatIpsecRotate(*reply);
  } else if (command == "ipsec") {
    out = dpu::dpuctl::formatIpsec(*reply);
  } else if (command == "services") {
    out = dpu::dpuctl::formatServices(*reply, connections);
  } else if (command == "conntrack") {
    out = dpu::dpuctl::formatConntrack(*reply);
  } else if (command == "policy") {
    out = dpu::dpuctl::formatPolicy(*reply);
  } else {
    out = dpu::dpuctl::formatStats(*reply, !all);
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}
