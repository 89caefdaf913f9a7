// The checkpoint round-trips everything an undo and a replay need.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "host-shim/checkpoint.h"

namespace fs = std::filesystem;
using namespace dpu::hostshim;

TEST_CASE("checkpoint round trip; absent is empty; garbage is refused") {
  std::string path = (fs::temp_directory_path() / ("hs-cp-" + std::to_string(getpid())) / "checkpoint.pb").string();
  fs::remove_all(fs::path(path).parent_path());
  auto empty = loadCheckpoint(path);
  REQUIRE(empty.ok());
  CHECK(empty->attachments_size() == 0);

  dpu::checkpoint::v1::HostShimCheckpoint c;
  c.set_version(kCheckpointVersion);
  c.set_dpu_boot_id("boot-1");
  auto* a = c.add_attachments();
  a->set_container_id("c1");
  a->set_ifname("eth0");
  a->set_netns("/run/netns/pod1");
  a->set_pf_index(0);
  a->set_vf_index(3);
  a->set_pci_address("0000:3b:00.5");
  a->mutable_snapshot()->set_netdev("p0v3");
  a->mutable_snapshot()->set_mac("02:00:00:00:00:03");
  a->mutable_snapshot()->set_mtu(1500);
  a->mutable_snapshot()->set_has_pf_settings(false);
  a->mutable_dpu()->set_mac("0a:58:0a:f4:01:05");
  a->mutable_dpu()->add_ips()->set_address("10.244.1.5/24");
  a->set_plumbed(true);
  c.mutable_management_port()->set_mac("0a:58:0a:f4:01:02");
  REQUIRE(saveCheckpoint(path, c).ok());

  auto back = loadCheckpoint(path);
  REQUIRE(back.ok());
  CHECK(back->SerializeAsString() == c.SerializeAsString());

  REQUIRE(dpu::writeFileAtomic(path, "\xff\xff\xff garbage").ok());
  auto bad = loadCheckpoint(path);
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(bad.error(), Catch::Contains(path));
  fs::remove_all(fs::path(path).parent_path());
}
