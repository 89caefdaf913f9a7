// EAL arguments and initialisation (eal.h).
#include "datapath/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <sched.h>

#include <cstring>

#include "common/log.h"

namespace dpu::datapath {

std::vector<int> allowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int i = 0; i < CPU_SETSIZE; ++i)
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

std::vector<std::string> buildEalArgs(const DataplaneConfig& config, const std::string& program,
                                      const std::vector<int>& allowed_cpus) {
  std::vector<std::string> args{program};
  if (!config.eal.lcores.empty()) {
    args.push_back("--lcores");
    args.push_back(config.eal.lcores);
  } else {
    // "0@0,1@1,2@0": lcore ids are ours (0 control, 1..N workers), CPUs wrap around.
    std::string map;
    for (unsigned i = 0; i <= config.workers; ++i) {
      if (!map.empty()) map += ',';
      map += std::to_string(i) + "@" + std::to_string(allowed_cpus[i % allowed_cpus.size()]);
    }
    args.push_back("--lcores");
    args.push_back(map);
  }
  args.push_back("--main-lcore");
  args.push_back("0");
  if (config.eal.no_huge) args.push_back("--no-huge");
  if (config.eal.no_pci) args.push_back("--no-pci");
  args.push_back("-m");
  args.push_back(std::to_string(config.eal.memory_mb));
  args.push_back("--file-prefix");
  args.push_back(config.eal.file_prefix);
  for (const auto& a : config.eal.allow) {
    args.push_back("-a");
    args.push_back(a);
  }
  for (const auto& v : config.eal.vdevs) {
    args.push_back("--vdev");
    args.push_back(v);
  }
  if (!config.eal.log_level.empty()) args.push_back("--log-level=" + config.eal.log_level);
  for (const auto& e : config.eal.extra_args) args.push_back(e);
  return args;
}

Result<void> initEal(const DataplaneConfig& config, const std::string& program) {
  std::vector<std::string> args = buildEalArgs(config, program, allowedCpus());
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
  DPU_LOG(kInfo, "dataplane") << "EAL: " << line;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int consumed = rte_eal_init(static_cast<int>(args.size()), argv.data());
  if (consumed < 0) {
    return Error{std::string("EAL initialisation failed: ") + rte_strerror(rte_errno) + " (arguments: " + line +
                 "); check eal.* in the config: hugepages, memory_mb, a file_prefix another process does not use"};
  }
  unsigned workers = rte_lcore_count() - 1;
  if (workers < config.workers) {
    rte_eal_cleanup();
    return Error{"EAL has " + std::to_string(workers) + " worker lcores, the config asks for " +
                 std::to_string(config.workers) + "; fix eal.lcores or workers"};
  }
  return {};
}

void cleanupEal() { rte_eal_cleanup(); }

}  // namespace dpu::datapath
