// dpuctl's text output for the operator API replies (dataplane.proto
// OperatorReply): dump-flows as one line per flow in the manner of
// `ovs-appctl dpctl/dump-flows`, ports and stats as aligned tables, or the
// reply as JSON (--json). Pure functions, so the formats are unit-tested.
#pragma once

#include <string>

#include "dpu/dataplane/v1/dataplane.pb.h"

namespace dpu::dpuctl {

// "1.5s", "250ms", "2m03s", "1h02m".
std::string formatDuration(uint64_t ms);
std::string formatFlows(const dataplane::v1::OperatorReply& reply);
std::string formatPorts(const dataplane::v1::OperatorReply& reply);
// Every counter unless `nonzero_only`.
std::string formatStats(const dataplane::v1::OperatorReply& reply, bool nonzero_only);
// One row per object not forwarding (kind, name, state, reason), or a line
// saying every object forwards.
std::string formatProblems(const dataplane::v1::OperatorReply& reply);
// The dataplane's start-up phases (stats answer): when each began and how
// long it took, in milliseconds from the process's start; moments have no duration.
std::string formatStartup(const dataplane::v1::OperatorReply& reply);
// North–south: the host PF port, the node addresses, the host MACs learned
// and the neighbours on the node network.
std::string formatNeighbours(const dataplane::v1::OperatorReply& reply);
// Services: one row per frontend (service, port, kind, address, protocol,
// traffic policy, affinity, usable/total backends, Maglev table size,
// connections), then one row per backend of each service port with its
// condition and its share of the Maglev tables. `conntrack` is a conntrack
// answer whose entries are counted per frontend (by their original
// destination); when it lists fewer than it tracks, a note says the counts
// are partial.
std::string formatServices(const dataplane::v1::OperatorReply& services, const dataplane::v1::OperatorReply& conntrack);
// Connections: one row per entry (original and reply tuples, state, NAT,
// service, idle, expiry), then the table's fill and the count per state,
// and, once the table has been full, what it did then (early drops, refusals).
std::string formatConntrack(const dataplane::v1::OperatorReply& reply);
// NetworkPolicy per port: each direction's isolation with the drops of the
// policies isolating it, then its rules (peers, protocol, ports, policy).
std::string formatPolicy(const dataplane::v1::OperatorReply& reply);
// IPsec: whether the node encrypts, the crypto backend, then one row per SA
// in force (peer, direction, SPI, epochs, sequence, packets, bytes, drops,
// age). Never a key: the reply has none.
std::string formatIpsec(const dataplane::v1::OperatorReply& reply);
// dpuctl ipsec rotate: the request taken, and what happens next.
std::string formatIpsecRotate(const dataplane::v1::OperatorReply& reply);
std::string formatJson(const dataplane::v1::OperatorReply& reply);

}  // namespace dpu::dpuctl
