// Walks sysfs for the configured PFs' VFs (see vf_inventory.h for the layout).
#include "host-shim/vf_inventory.h"

#include <filesystem>

#include "common/atomic_file.h"

namespace fs = std::filesystem;

namespace dpu::hostshim {

std::optional<std::string> vfNetdevName(const std::string& sysfs_root, const std::string& pci_address) {
  std::error_code ec;
  fs::path dir = fs::path(sysfs_root) / "bus/pci/devices" / pci_address / "net";
  for (const auto& e : fs::directory_iterator(dir, ec)) return e.path().filename().string();
  return std::nullopt;
}

Result<std::vector<VfInfo>> scanVfs(const std::string& sysfs_root, const std::vector<PfConfig>& pfs) {
  std::vector<VfInfo> out;
  for (const auto& pf : pfs) {
    fs::path dev = fs::path(sysfs_root) / "class/net" / pf.name / "device";
    std::string numvfs_path = (dev / "sriov_numvfs").string();
    auto text = readFile(numvfs_path);
    if (!text)
      return Error{"PF " + pf.name + ": cannot read " + numvfs_path + " (" + text.error() +
                   "); check pfs[].name and sysfsRoot, and that SR-IOV is enabled on the PF"};
    uint32_t numvfs = 0;
    try {
      numvfs = static_cast<uint32_t>(std::stoul(*text));
    } catch (...) {
      return Error{"PF " + pf.name + ": " + numvfs_path + " does not hold a number"};
    }
    for (uint32_t vf = 0; vf < numvfs; ++vf) {
      fs::path link = dev / ("virtfn" + std::to_string(vf));
      std::error_code ec;
      fs::path target = fs::read_symlink(link, ec);
      if (ec) return Error{"PF " + pf.name + ": " + link.string() + " is not a symlink (" + ec.message() + ")"};
      VfInfo info;
      info.pf_index = pf.index;
      info.pf_name = pf.name;
      info.vf_index = vf;
      info.pci_address = target.filename().string();
      fs::path netdir = (target.is_absolute() ? target : dev / target) / "net";
      for (const auto& e : fs::directory_iterator(netdir, ec)) {
        info.netdev = e.path().filename().string();
        break;
      }
      info.reserved = pf.reserved.count(vf) > 0;
      info.in_pool = pf.pool.count(vf) > 0;
      out.push_back(std::move(info));
    }
  }
  return out;
}

}  // namespace dpu::hostshim
