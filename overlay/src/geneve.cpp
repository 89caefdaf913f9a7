// The OVN Geneve option: logical port keys in 4 bytes of option data, laid out
// as ovn-architecture(7) describes ("Tunnel Encapsulations") and as
// ovn-controller writes them into OVS tunnel metadata.
#include "overlay/bytes.h"
#include "overlay/geneve.h"

namespace dpu::overlay {

Status encodeOvnOption(OvnPortKeys keys, std::span<uint8_t, kOvnOptionDataLen> data) {
  // The top bit is reserved and sent as zero; a key that needs it is a
  // control-plane bug, not something to truncate silently.
  if (keys.ingress > kOvnMaxIngressPortKey) return Status::kBadGeneveOption;
  store16(data.data(), keys.ingress);
  store16(data.data() + 2, keys.egress);
  return Status::kOk;
}

Status makeOvnOption(OvnPortKeys keys, std::array<uint8_t, kOvnOptionDataLen>& storage, GeneveOption& option) {
  if (Status s = encodeOvnOption(keys, storage); s != Status::kOk) return s;
  option = GeneveOption{kOvnOptionClass, kOvnOptionType, storage};
  return Status::kOk;
}

}  // namespace dpu::overlay
