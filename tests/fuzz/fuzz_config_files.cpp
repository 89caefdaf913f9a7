// The three daemons' config files (host-shim, dpu-agent, dpu-dataplane): YAML
// or JSON text an operator writes. The first byte picks the parser, the rest is
// the file. Bad text must come back as an error, never a crash.
#include <cstdint>
#include <string_view>

#include "common/config_doc.h"
#include "control/agent_config.h"
#include "datapath/dataplane_config.h"
#include "host-shim/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      (void)dpu::hostshim::parseConfig(text, "fuzz");
      break;
    case 1:
      // What loadAgentConfig does, without the file and the environment.
      if (auto doc = dpu::parseConfigText(text, "fuzz"); doc.ok()) (void)dpu::control::parseAgentConfig(*doc);
      break;
    default:
      (void)dpu::datapath::parseDataplaneConfig(text, "fuzz");
      break;
  }
  return 0;
}
