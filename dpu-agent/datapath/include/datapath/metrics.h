// dpu-dataplane's Prometheus endpoint: the dataplane's counters — per-port
// packets and bytes, drops by reason, flows in hardware and in software,
// slow-path setups, queue drops — as Prometheus text on `GET /metrics`.
//
// The dataplane serves this itself, not through dpu-agent, because it keeps
// forwarding while the agent is down or being upgraded, which is exactly when
// an operator wants to see it. It never costs an lcore anything: the endpoint
// runs on its own thread, and for each scrape it asks the dataplane's own
// operator socket (the same read-only API as dpuctl) for `ports`, `stats`,
// `services`, `conntrack` (the counts per state) and `ipsec` (per SA),
// so the counters are summed over the lcores by the control thread as for
// dpuctl, and a slow or broken HTTP client only ever holds this thread.
//
// Names follow Prometheus's conventions: the `dpu_dataplane_` prefix, base
// units (bytes, packets), `_total` on counters, labels for dimensions
// (`port`, `role`, `reason`, `where="hw|sw"`). Reasons are the names dpuctl
// prints, so an alert and `dpuctl stats` speak of the same thing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "common/result.h"
#include "datapath/dataplane_config.h"

namespace dpu::dataplane::v1 {
class OperatorReply;
}

namespace dpu::datapath {

// The Prometheus text of a `ports`, a `stats`, a `services` and a
// `conntrack` answer of the operator API (of the conntrack answer only the
// counts per state are used: a scrape asks it to list one entry).
// With an `ipsec` answer, the IPsec SAs too, per SA.
std::string renderMetrics(const dataplane::v1::OperatorReply& ports, const dataplane::v1::OperatorReply& stats,
                          const dataplane::v1::OperatorReply& services, const dataplane::v1::OperatorReply& conntrack,
                          const dataplane::v1::OperatorReply* ipsec = nullptr);

// HTTP/1.1, one request per connection (Connection: close), one connection at
// a time: a scraper asks every few seconds. GET /metrics answers 200 with the
// text, or 503 saying why the operator API did not answer; GET /healthz 200;
// other paths 404, other methods 405, a malformed or oversized request 400.
class MetricsEndpoint {
 public:
  MetricsEndpoint(MetricsConfig config, std::string operator_socket);
  ~MetricsEndpoint();
  MetricsEndpoint(const MetricsEndpoint&) = delete;
  MetricsEndpoint& operator=(const MetricsEndpoint&) = delete;

  // Binds the listener (failing with the address and the reason) and starts the thread.
  Result<void> start();
  void stop();
  // The bound port (the configured one, or the kernel's choice for port 0).
  uint16_t port() const { return bound_port_; }

 private:
  void serve();
  void handle(int fd);
  std::string scrape(int& status) const;

  MetricsConfig config_;
  std::string operator_socket_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() wakes the thread's poll
  uint16_t bound_port_ = 0;
  std::thread thread_;
};

}  // namespace dpu::datapath
