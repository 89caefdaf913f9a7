// fake-dataplane: a stand-in for dpu-dataplane that speaks the real
// programming API on a unix socket and keeps real state (FakeDataplaneModel),
// for the agent's component tests and for anyone who needs a dataplane
// without DPDK.
//
//   fake-dataplane --socket PATH [--dump FILE] [--restart-file FILE] [--operator-socket PATH]
//                  [--port-capacity N] [--port-unavailable FILE] [--no-ipsec] [--ipsec-traffic FILE]
//
// --dump FILE      after every request, the model, generation, instance id and
//                  the history of what each request changed, as JSON (atomic write)
// --operator-socket PATH  serves the operator API (OperatorRequest → OperatorReply):
//                  ports lists the logical ports in force, problems the refused
//                  objects, stats the request counters
// --port-capacity N  representor ports it can open (default 31: Debian's DPDK
//                  with an uplink); ports beyond it are reported PORT_UNAVAILABLE
// --port-unavailable FILE  a file of lines "PORT_NAME reason": those ports are
//                  reported PORT_UNAVAILABLE (as the real dataplane reports a
//                  representor it could not open), re-read when it changes
// --no-ipsec       a dataplane that ignores IPsec SAs (HelloReply.ipsec false,
//                  no ipsec_sas in its replies), as dpu-dataplane before ESP
// --ipsec-traffic FILE  lines "SA_NAME PACKETS": the packets that SA has
//                  carried (outbound: sent, one sequence number each up to its
//                  limit; inbound: received), read before every request
// SIGUSR1, or creating --restart-file (deleted when seen): behave as a restarted
//                  dataplane — drop the connection, new instance id, state wiped
// SIGTERM/SIGINT   exit
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/ipc_proto.h"
#include "common/log.h"
#include "fake_dataplane_model.h"

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_restart{false};

void onSignal(int sig) {
  if (sig == SIGUSR1) g_restart = true;
  else g_stop = true;
}

struct Options {
  std::string socket, dump, restart_file, operator_socket, port_unavailable, ipsec_traffic;
  std::optional<uint32_t> port_capacity;
  bool ipsec = true;
};

// The --port-unavailable file's lines, "PORT_NAME reason...", as problems.
void loadPortUnavailable(const Options& o, dpu::fakes::FakeDataplaneModel& m) {
  if (o.port_unavailable.empty()) return;
  std::vector<dpu::dataplane::v1::ObjectProblem> extra;
  if (auto text = dpu::readFile(o.port_unavailable)) {
    std::istringstream lines(*text);
    std::string line;
    while (std::getline(lines, line)) {
      const auto space = line.find(' ');
      if (line.empty() || space == 0) continue;
      dpu::dataplane::v1::ObjectProblem p;
      p.set_kind(dpu::dataplane::v1::ObjectProblem::PORT);
      p.set_name(line.substr(0, space));
      p.set_state(dpu::dataplane::v1::ObjectProblem::PORT_UNAVAILABLE);
      p.set_reason(space == std::string::npos ? "could not be opened" : line.substr(space + 1));
      extra.push_back(std::move(p));
    }
  }
  m.setExtraProblems(std::move(extra));
}

// The --ipsec-traffic file's lines, "SA_NAME PACKETS", as transfers.
void loadIpsecTraffic(const Options& o, dpu::fakes::FakeDataplaneModel& m) {
  if (o.ipsec_traffic.empty()) return;
  auto text = dpu::readFile(o.ipsec_traffic);
  if (!text) return;
  std::istringstream lines(*text);
  std::string name;
  uint64_t packets = 0;
  while (lines >> name >> packets) (void)m.transfer(name, packets);
}

dpu::dataplane::v1::ProgramRequest statusRequest() {
  dpu::dataplane::v1::ProgramRequest r;
  r.mutable_status();
  return r;
}

// One operator request per connection, answered from the programmed model.
void serveOperator(const dpu::ipc::Socket& listener, dpu::fakes::FakeDataplaneModel& m) {
  if (!listener.valid()) return;
  auto conn = dpu::ipc::acceptUnix(listener, dpu::ipc::after(std::chrono::milliseconds(0)));
  if (!conn || !conn->valid()) return;
  dpu::dataplane::v1::OperatorRequest req;
  auto f = dpu::ipc::recvMessage(*conn, req, dpu::ipc::after(std::chrono::seconds(1)));
  dpu::dataplane::v1::OperatorReply reply;
  reply.set_generation(m.generation());
  reply.set_instance_id(m.instanceId());
  if (!f.ok()) {
    reply.set_error("bad operator request: " + f.error());
  } else if (req.has_ports()) {
    for (const auto& p : m.inForce().ports) {
      auto* info = reply.add_ports();
      info->set_name(p.representor);
      info->set_role(p.kind == dpu::dataplane::v1::MANAGEMENT ? "management" : "representor");
      info->set_logical_port(p.name);
      info->set_state("up");
    }
  } else if (req.has_problems()) {
    const auto status = m.apply(statusRequest());
    for (const auto& p : status.problems()) *reply.add_problems() = p;
  } else if (req.has_stats()) {
    const auto counts = m.dump()["counts"];
    for (const auto& [name, value] : counts.items()) {
      auto* c = reply.add_counters();
      c->set_name(name);
      c->set_value(value.get<uint64_t>());
    }
  } else if (req.has_ipsec_rotate()) {
    if (auto r = m.requestRotation(); !r) {
      reply.set_error(r.error());
    } else {
      m.describeIpsec(*reply.mutable_ipsec());
    }
  } else if (req.has_ipsec()) {
    m.describeIpsec(*reply.mutable_ipsec());
  } else if (req.has_dump_flows()) {
    // No packets flow through the fake: there are no datapath flows to show.
  } else {
    reply.set_error("empty operator request");
  }
  (void)dpu::ipc::sendMessage(*conn, reply, dpu::ipc::after(std::chrono::seconds(1)));
}

void writeDump(const Options& o, const dpu::fakes::FakeDataplaneModel& m) {
  if (o.dump.empty()) return;
  if (auto w = dpu::writeFileAtomic(o.dump, m.dump().dump(1) + "\n", 0644); !w) {
    DPU_LOG(kError, "fake-dataplane") << w.error();
  }
}

bool restartRequested(const Options& o) {
  if (g_restart.exchange(false)) return true;
  if (!o.restart_file.empty() && dpu::fileExists(o.restart_file)) {
    ::unlink(o.restart_file.c_str());
    return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--socket") o.socket = next();
    else if (a == "--dump") o.dump = next();
    else if (a == "--restart-file") o.restart_file = next();
    else if (a == "--operator-socket") o.operator_socket = next();
    else if (a == "--port-capacity") o.port_capacity = static_cast<uint32_t>(std::stoul("0" + next()));
    else if (a == "--port-unavailable") o.port_unavailable = next();
    else if (a == "--no-ipsec") o.ipsec = false;
    else if (a == "--ipsec-traffic") o.ipsec_traffic = next();
    else {
      std::cerr << "usage: fake-dataplane --socket PATH [--dump FILE] [--restart-file FILE] [--operator-socket PATH]"
                   " [--port-capacity N] [--port-unavailable FILE] [--no-ipsec] [--ipsec-traffic FILE]\n";
      return 2;
    }
  }
  if (o.socket.empty()) {
    std::cerr << "fake-dataplane: --socket is required\n";
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto listener = dpu::ipc::listenUnix(o.socket, 0660);
  if (!listener) {
    std::cerr << "fake-dataplane: " << listener.error() << "\n";
    return 1;
  }
  dpu::ipc::Socket op_listener;
  if (!o.operator_socket.empty()) {
    auto l = dpu::ipc::listenUnix(o.operator_socket, 0660);
    if (!l) {
      std::cerr << "fake-dataplane: " << l.error() << "\n";
      return 1;
    }
    op_listener = std::move(*l);
  }
  dpu::fakes::FakeDataplaneModel model;
  if (o.port_capacity) model.setPortCapacity(*o.port_capacity, 32);
  model.setIpsec(o.ipsec);
  writeDump(o, model);
  DPU_LOG(kInfo, "fake-dataplane") << "serving " << o.socket << " as instance " << model.instanceId();
  const auto tick = std::chrono::milliseconds(50);
  while (!g_stop) {
    if (restartRequested(o)) {
      model.wipe();
      writeDump(o, model);
      DPU_LOG(kInfo, "fake-dataplane") << "restarted as instance " << model.instanceId();
    }
    serveOperator(op_listener, model);
    auto conn = dpu::ipc::acceptUnix(*listener, dpu::ipc::after(tick));
    if (!conn || !conn->valid()) continue;
    while (!g_stop) {
      if (restartRequested(o)) {
        model.wipe();
        writeDump(o, model);
        DPU_LOG(kInfo, "fake-dataplane") << "restarted as instance " << model.instanceId() << "; dropping the agent";
        break;
      }
      serveOperator(op_listener, model);
      dpu::dataplane::v1::ProgramRequest req;
      auto got = dpu::ipc::recvMessage(*conn, req, dpu::ipc::after(tick));
      if (!got && got.code() == dpu::ErrorCode::kTimeout) continue;
      if (!got) {
        if (got.code() != dpu::ErrorCode::kClosed) {
          DPU_LOG(kWarn, "fake-dataplane") << got.error();
        }
        break;
      }
      loadPortUnavailable(o, model);
      loadIpsecTraffic(o, model);
      auto reply = model.apply(req);
      // Status polls change no state, but traffic moves counters the tests read.
      if (!req.has_status() || !o.ipsec_traffic.empty()) writeDump(o, model);
      if (auto sent = dpu::ipc::sendMessage(*conn, reply, dpu::ipc::after(std::chrono::seconds(5))); !sent) break;
    }
  }
  ::unlink(o.socket.c_str());
  if (!o.operator_socket.empty()) ::unlink(o.operator_socket.c_str());
  return 0;
}
