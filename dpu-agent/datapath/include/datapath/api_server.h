// The two local APIs of dpu-dataplane on unix sockets (proto/dpu/dataplane/v1):
//  - programming: one agent at a time; Hello, FullSync, Delta, Status →
//    Engine::program, one ProgramReply each. After each accepted change the
//    representor ports are reconciled with the model; the first accepted model
//    starts polling. Every reply also carries the logical ports whose
//    representor could not be opened (PORT_UNAVAILABLE), and the answer to
//    Hello the port capacity (DataplanePorts::annotate).
//    A second agent is refused while one is connected (two writers would undo
//    each other); when the agent goes away the dataplane keeps forwarding.
//  - operator (dpuctl): one request per connection → Engine::operate, with the
//    process's own knowledge (devargs, DPDK counters, XDP counters) added.
// The loop runs on the control thread (the main lcore), sleeps in poll(2) on
// the sockets and the netlink events of the underlay next hops
// (dataplane_neighbours.h), calls Engine::maintain (and sends the NAT
// keepalives that are due, nat_keepalive.h) about every 100 ms, gives
// the next hops the engine's peers after each change and every second (when a
// peer that did not answer is asked again), and retries representors that
// could not be opened when their backoff is due. The engine's north–south
// eventfd (lcores learned a host MAC or a neighbour) is polled too: what they
// learned is published at once, and the uplink's XDP program told.
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "common/ipc.h"
#include "common/result.h"
#include "datapath/dataplane_config.h"

namespace dpu::datapath {

class Engine;
class DataplanePorts;
class TunnelNeighbours;
class StartupTimeline;
class NatKeepalives;

class ApiServer {
 public:
  ApiServer(Engine& engine, DataplanePorts& ports, TunnelNeighbours& neighbours, SocketConfig sockets);
  ~ApiServer();

  Result<void> open();
  // Start-up phases: the agent's connection, the first full sync, the
  // representors it wants, forwarding (then logged); the stats answer carries
  // them. nullptr: none. It must outlive this.
  void setTimeline(StartupTimeline* timeline) { timeline_ = timeline; }
  // NAT keepalives, sent from the maintenance loop and counted in the stats
  // answer. nullptr: none. It must outlive this.
  void setNatKeepalives(NatKeepalives* keepalives) { keepalives_ = keepalives; }
  // Serves until `stop` is set, or until the dataplane cannot forward at all
  // (its worker lcores would not start): then failure() says why.
  void run(const std::atomic<bool>& stop);
  const std::string& failure() const { return failure_; }
  // Closes the sockets and removes their files.
  void close();

 private:
  void acceptAgent();
  void serveAgent();
  void serveOperator();

  Engine& engine_;
  DataplanePorts& ports_;
  TunnelNeighbours& neighbours_;
  SocketConfig sockets_;
  ipc::Socket programming_;
  ipc::Socket operator_;
  ipc::Socket agent_;
  std::chrono::steady_clock::time_point next_reconcile_{};  // tunnel next hops
  int agent_pid_ = -1;
  StartupTimeline* timeline_ = nullptr;
  NatKeepalives* keepalives_ = nullptr;
  std::string failure_;
};

}  // namespace dpu::datapath
