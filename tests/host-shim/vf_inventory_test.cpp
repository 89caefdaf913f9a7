// The VF inventory reads a generated sysfs tree the way it reads /sys.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "host-shim/vf_inventory.h"

namespace fs = std::filesystem;
using namespace dpu::hostshim;

namespace {

// The layout of tests/fakes/fake-sysfs.bash, with relative symlinks as the
// kernel writes them (../0000:3b:00.2).
fs::path makeTree(int numvfs) {
  fs::path root = fs::temp_directory_path() / ("hs-sysfs-" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::path devices = root / "bus/pci/devices";
  fs::path pfdev = devices / "0000:3b:00.0";
  fs::create_directories(pfdev);
  fs::create_directories(root / "class/net/p0");
  fs::create_directory_symlink(pfdev, root / "class/net/p0/device");
  std::ofstream(pfdev / "sriov_numvfs") << numvfs << "\n";
  for (int i = 0; i < numvfs; ++i) {
    char pci[32];
    std::snprintf(pci, sizeof pci, "0000:3b:%02x.%x", (i + 2) >> 3, (i + 2) & 7);
    fs::create_directories(devices / pci / "net" / ("p0v" + std::to_string(i)));
    fs::create_directory_symlink(fs::path("..") / pci, pfdev / ("virtfn" + std::to_string(i)));
  }
  return root;
}

}  // namespace

TEST_CASE("VFs, PCI addresses and netdevs come from sysfs") {
  fs::path root = makeTree(8);
  PfConfig pf;
  pf.name = "p0";
  pf.index = 0;
  for (uint32_t i = 0; i < 7; ++i) pf.pool.insert(i);
  pf.reserved = {7};
  auto vfs = scanVfs(root.string(), {pf});
  REQUIRE(vfs.ok());
  REQUIRE(vfs->size() == 8);
  CHECK((*vfs)[0].pci_address == "0000:3b:00.2");
  CHECK((*vfs)[0].netdev == "p0v0");
  CHECK((*vfs)[0].in_pool);
  CHECK((*vfs)[6].pci_address == "0000:3b:01.0");
  CHECK((*vfs)[7].reserved);
  CHECK_FALSE((*vfs)[7].in_pool);
  CHECK(vfNetdevName(root.string(), "0000:3b:00.3") == std::optional<std::string>("p0v1"));
  CHECK_FALSE(vfNetdevName(root.string(), "0000:99:00.0").has_value());

  pf.name = "p9";
  auto missing = scanVfs(root.string(), {pf});
  REQUIRE_FALSE(missing.ok());
  CHECK_THAT(missing.error(), Catch::Contains("p9") && Catch::Contains("sriov_numvfs"));
  fs::remove_all(root);
}
