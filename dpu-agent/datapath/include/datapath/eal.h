// EAL set-up for dpu-dataplane: the argument vector built from the config
// (pure, so it is unit-tested) and rte_eal_init around it. The same code
// serves a BlueField (hugepages, -a <PF>,representor=[...]) and a lab or CI
// machine (--no-huge --no-pci, small memory, a unique --file-prefix so several
// dataplanes and testpmd run side by side).
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "datapath/dataplane_config.h"

namespace dpu::datapath {

// argv for rte_eal_init, argv[0] included. Lcore 0 is the control thread;
// lcores 1..workers run the packet loop. Without eal.lcores, lcore i is pinned
// to CPU i modulo the CPUs we may run on, so two workers on a two-core machine work.
std::vector<std::string> buildEalArgs(const DataplaneConfig& config, const std::string& program,
                                      const std::vector<int>& allowed_cpus);
// The CPUs this process may run on (sched_getaffinity).
std::vector<int> allowedCpus();

// rte_eal_init with buildEalArgs; checks that enough worker lcores exist.
Result<void> initEal(const DataplaneConfig& config, const std::string& program);
void cleanupEal();

}  // namespace dpu::datapath
