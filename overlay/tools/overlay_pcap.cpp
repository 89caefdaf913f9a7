// overlay-pcap: applies one overlay transform to every packet of a capture.
//
// Operators use it to see what the wire carries (encapsulate a capture from a
// pod's VF and open it in tshark, or decrypt a capture from the fabric with the
// SA's key); the interop tests use it to hand our packets to tshark and scapy.
// It runs the same library code as the dataplane, packet by packet.
//
//   overlay-pcap geneve-encap -i IN -o OUT --vni N --src-ip A --dst-ip B [...]
//   overlay-pcap geneve-decap -i IN -o OUT [--understand CLASS:TYPE ...]
//   overlay-pcap esp-encrypt  -i IN -o OUT --spi X --key HEX [...]
//   overlay-pcap esp-decrypt  -i IN -o OUT --spi X --key HEX [...]
//
// Exit status: 0 when every packet was transformed, 1 on a usage or file
// error, 3 when some packets were dropped (each is reported with its reason).
#include <arpa/inet.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "overlay/buffer.h"
#include "overlay/esp.h"
#include "overlay/flow_key.h"
#include "overlay/geneve.h"
#include "overlay/headers.h"
#include "overlay/parse.h"
#include "overlay/status.h"
#include "pcap_file.h"

namespace dpu::overlay::tools {
namespace {

constexpr uint32_t kHeadroom = 512;
constexpr uint32_t kTailroom = 512;

const char* kUsage = R"(usage: overlay-pcap OPERATION -i IN.pcap -o OUT.pcap [options]
       overlay-pcap --list-backends   (the ESP crypto backends usable here, best first)

Operations and their options:
  geneve-encap   Encapsulate each Ethernet frame in Geneve (RFC 8926).
      --vni N                 24-bit virtual network identifier (required)
      --src-ip ADDR           outer source, IPv4 or IPv6 (required)
      --dst-ip ADDR           outer destination, same family (required)
      --src-mac MAC           outer source MAC (default 02:00:00:00:00:01)
      --dst-mac MAC           outer destination MAC (default 02:00:00:00:00:02)
      --ovn-option ING:EGR    add the OVN option (15-bit ingress, 16-bit egress port key)
      --option CLASS:TYPE:HEX add a TLV option (data a multiple of 4 bytes); repeatable
      --udp-checksum          compute the UDP checksum over IPv4 (always over IPv6)
      --ttl N                 outer TTL or hop limit (default 64)
      --oam                   set the O bit
  geneve-decap   Strip the outer headers of each Geneve packet; print what each carried.
      --understand CLASS:TYPE an option this receiver understands besides OVN's; repeatable
  esp-encrypt    Protect the IP packet in each frame with ESP AES-GCM (RFC 4303, 4106).
  esp-decrypt    Verify and decrypt the ESP packet in each frame.
      --spi N                 security parameter index (required)
      --key HEX               key followed by the 4-byte salt: 20 bytes for AES-128-GCM,
                              36 for AES-256-GCM (tshark's esp_sa format) (required)
      --mode transport|tunnel (default transport)
      --tunnel-src ADDR       tunnel mode outer source
      --tunnel-dst ADDR       tunnel mode outer destination
      --esn                   64-bit extended sequence numbers
      --seq N                 first sequence number sent, or accepted (default 1)
      --implicit-iv           RFC 8750 implicit IV instead of the explicit 8-byte IV
      --replay-window N       anti-replay window in packets (esp-decrypt, default 1024)
      --backend NAME          ipsec-mb or openssl (default: best available)
)";

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "overlay-pcap: %s\n", message.c_str());
  std::exit(1);
}

// Command-line options: "--name value" pairs, flags and repeated options.
class Options {
 public:
  Options(int argc, char** argv, const std::vector<std::string>& flags) {
    for (int i = 2; i < argc; ++i) {
      std::string name = argv[i];
      if (name == "-i") name = "--in";
      if (name == "-o") name = "--out";
      if (name.rfind("--", 0) != 0) fail("unexpected argument '" + name + "' (see --help)");
      name = name.substr(2);
      bool is_flag = false;
      for (const auto& f : flags) is_flag = is_flag || f == name;
      if (is_flag) {
        values_[name].push_back("1");
        continue;
      }
      if (i + 1 >= argc) fail("--" + name + " needs a value");
      values_[name].push_back(argv[++i]);
    }
  }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string get(const std::string& name) const {
    auto it = values_.find(name);
    if (it == values_.end()) fail("--" + name + " is required (see --help)");
    return it->second.back();
  }
  std::string get(const std::string& name, const std::string& fallback) const {
    return has(name) ? get(name) : fallback;
  }
  std::vector<std::string> all(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::vector<std::string>{} : it->second;
  }
  // Every option given must be one the operation knows.
  void allowOnly(const std::vector<std::string>& known) const {
    for (const auto& [name, _] : values_) {
      bool ok = false;
      for (const auto& k : known) ok = ok || k == name;
      if (!ok) fail("--" + name + " does not apply to this operation (see --help)");
    }
  }

 private:
  std::map<std::string, std::vector<std::string>> values_;
};

uint64_t parseNumber(const std::string& text, const std::string& what, uint64_t max) {
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-' || v > max) {
    fail(what + " must be a number from 0 to " + std::to_string(max) + ", got '" + text + "'");
  }
  return v;
}

std::vector<uint8_t> parseHex(std::string text, const std::string& what) {
  if (text.rfind("0x", 0) == 0 || text.rfind("0X", 0) == 0) text = text.substr(2);
  std::vector<uint8_t> out;
  if (text.size() % 2 != 0) fail(what + " must have an even number of hex digits");
  for (size_t i = 0; i < text.size(); i += 2) {
    auto digit = [&](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      fail(what + " is not hex: '" + text + "'");
    };
    out.push_back(static_cast<uint8_t>(digit(text[i]) << 4 | digit(text[i + 1])));
  }
  return out;
}

struct IpAddress {
  bool ipv6 = false;
  std::array<uint8_t, 16> bytes{};
};

IpAddress parseIp(const std::string& text, const std::string& what) {
  IpAddress a;
  if (inet_pton(AF_INET, text.c_str(), a.bytes.data()) == 1) return a;
  a.ipv6 = true;
  if (inet_pton(AF_INET6, text.c_str(), a.bytes.data()) == 1) return a;
  fail(what + " is not an IPv4 or IPv6 address: '" + text + "'");
}

MacAddress parseMac(const std::string& text, const std::string& what) {
  MacAddress m{};
  unsigned v[6];
  char tail;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6) {
    fail(what + " is not a MAC address like 02:00:00:00:00:01: '" + text + "'");
  }
  for (int i = 0; i < 6; ++i) {
    if (v[i] > 0xff) fail(what + " has a byte above ff: '" + text + "'");
    m[i] = static_cast<uint8_t>(v[i]);
  }
  return m;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// One packet in a buffer with room to grow at both ends.
struct WorkBuffer {
  std::vector<uint8_t> storage;
  PacketBuffer packet;
  explicit WorkBuffer(const std::vector<uint8_t>& bytes)
      : storage(kHeadroom + bytes.size() + kTailroom),
        packet(storage.data(), static_cast<uint32_t>(storage.size()), kHeadroom,
               static_cast<uint32_t>(bytes.size())) {
    std::memcpy(packet.data(), bytes.data(), bytes.size());
  }
  std::vector<uint8_t> bytes() const { return {packet.data(), packet.data() + packet.size()}; }
};

// Counts outcomes and reports drops; decides the exit status.
class Tally {
 public:
  void ok() { ++ok_; }
  void drop(size_t index, Status s) {
    ++dropped_;
    std::fprintf(stderr, "packet %zu: dropped: %s (%s)\n", index + 1, std::string(statusText(s)).c_str(),
                 std::string(statusName(s)).c_str());
  }
  int finish(const char* what) const {
    std::fprintf(stderr, "overlay-pcap: %zu packets %s, %zu dropped\n", ok_, what, dropped_);
    return dropped_ ? 3 : 0;
  }

 private:
  size_t ok_ = 0;
  size_t dropped_ = 0;
};

int geneveEncap(const Options& opt, const std::vector<CapturedPacket>& in, std::vector<CapturedPacket>& out) {
  opt.allowOnly({"in", "out", "vni", "src-ip", "dst-ip", "src-mac", "dst-mac", "ovn-option", "option",
                 "udp-checksum", "ttl", "oam"});
  GeneveTunnel tunnel;
  tunnel.vni = static_cast<uint32_t>(parseNumber(opt.get("vni"), "--vni", kGeneveMaxVni));
  IpAddress src = parseIp(opt.get("src-ip"), "--src-ip");
  IpAddress dst = parseIp(opt.get("dst-ip"), "--dst-ip");
  if (src.ipv6 != dst.ipv6) fail("--src-ip and --dst-ip must both be IPv4 or both IPv6");
  tunnel.family = src.ipv6 ? UnderlayFamily::kIpv6 : UnderlayFamily::kIpv4;
  tunnel.src_ip = src.bytes;
  tunnel.dst_ip = dst.bytes;
  tunnel.src_mac = parseMac(opt.get("src-mac", "02:00:00:00:00:01"), "--src-mac");
  tunnel.dst_mac = parseMac(opt.get("dst-mac", "02:00:00:00:00:02"), "--dst-mac");
  tunnel.ttl = static_cast<uint8_t>(parseNumber(opt.get("ttl", "64"), "--ttl", 255));
  tunnel.udp_checksum = opt.has("udp-checksum");
  tunnel.oam = opt.has("oam");

  std::vector<GeneveOption> options;
  std::array<uint8_t, kOvnOptionDataLen> ovn_storage{};
  if (opt.has("ovn-option")) {
    auto parts = split(opt.get("ovn-option"), ':');
    if (parts.size() != 2) fail("--ovn-option takes INGRESS:EGRESS, e.g. 5:7");
    OvnPortKeys keys;
    keys.ingress = static_cast<uint16_t>(parseNumber(parts[0], "OVN ingress port key", kOvnMaxIngressPortKey));
    keys.egress = static_cast<uint16_t>(parseNumber(parts[1], "OVN egress port key", 0xffff));
    GeneveOption o;
    if (makeOvnOption(keys, ovn_storage, o) != Status::kOk) fail("cannot encode the OVN option");
    options.push_back(o);
  }
  std::vector<std::vector<uint8_t>> option_data;
  option_data.reserve(opt.all("option").size());
  for (const auto& text : opt.all("option")) {
    auto parts = split(text, ':');
    if (parts.size() != 3) fail("--option takes CLASS:TYPE:HEXDATA, e.g. 0x0103:0x01:deadbeef");
    option_data.push_back(parseHex(parts[2], "--option data"));
    GeneveOption o;
    o.option_class = static_cast<uint16_t>(parseNumber(parts[0], "option class", 0xffff));
    o.type = static_cast<uint8_t>(parseNumber(parts[1], "option type", 0xff));
    o.data = option_data.back();
    options.push_back(o);
  }
  tunnel.options = options;

  GeneveEncapTemplate encap;
  if (Status s = encap.build(tunnel); s != Status::kOk) {
    fail("the tunnel parameters are not valid: " + std::string(statusText(s)));
  }

  Tally tally;
  for (size_t i = 0; i < in.size(); ++i) {
    WorkBuffer work(in[i].bytes);
    // The outer source port spreads inner flows (RFC 8926 §3.3): hash the inner
    // flow when it parses, else fall back to a constant.
    ParsedPacket parsed;
    uint32_t hash = 0;
    if (parsePacket(work.packet.bytes(), parsed) == Status::kOk) {
      hash = flowHash32(extractFlowKey(work.packet.bytes(), parsed, 0));
    }
    if (Status s = encap.encap(work.packet, hash); s != Status::kOk) {
      tally.drop(i, s);
      continue;
    }
    out.push_back({in[i].ts_sec, in[i].ts_usec, work.bytes()});
    tally.ok();
  }
  return tally.finish("encapsulated");
}

int geneveDecap(const Options& opt, const std::vector<CapturedPacket>& in, std::vector<CapturedPacket>& out) {
  opt.allowOnly({"in", "out", "understand"});
  std::vector<GeneveOptionKey> understood{kOvnOptionKey};
  for (const auto& text : opt.all("understand")) {
    auto parts = split(text, ':');
    if (parts.size() != 2) fail("--understand takes CLASS:TYPE, e.g. 0x0103:0x81");
    understood.push_back({static_cast<uint16_t>(parseNumber(parts[0], "option class", 0xffff)),
                          static_cast<uint8_t>(parseNumber(parts[1], "option type", 0xff))});
  }
  GeneveDecapConfig config;
  config.understood = understood;

  Tally tally;
  for (size_t i = 0; i < in.size(); ++i) {
    WorkBuffer work(in[i].bytes);
    GeneveHeaders headers;
    if (Status s = decapGeneve(work.packet, config, headers); s != Status::kOk) {
      tally.drop(i, s);
      continue;
    }
    std::printf("packet %zu: vni %u sport %u%s%s options %u", i + 1, headers.vni, headers.src_port,
                headers.oam ? " oam" : "", headers.critical ? " critical" : "", headers.option_count);
    for (const auto& o : headers.optionList()) {
      std::printf(" [class 0x%04x type 0x%02x len %zu]", o.option_class, o.type, o.data.size());
    }
    if (headers.ovn) std::printf(" ovn ingress %u egress %u", headers.ovn->ingress, headers.ovn->egress);
    std::printf("\n");
    out.push_back({in[i].ts_sec, in[i].ts_usec, work.bytes()});
    tally.ok();
  }
  return tally.finish("decapsulated");
}

EspSaConfig espConfig(const Options& opt) {
  EspSaConfig config;
  config.spi = static_cast<uint32_t>(parseNumber(opt.get("spi"), "--spi", 0xffffffff));
  std::vector<uint8_t> keymat = parseHex(opt.get("key"), "--key");
  if (keymat.size() != 20 && keymat.size() != 36) {
    fail("--key must be the key followed by the 4-byte salt: 20 bytes (AES-128-GCM) or 36 (AES-256-GCM), got " +
         std::to_string(keymat.size()));
  }
  config.key.assign(keymat.begin(), keymat.end() - 4);
  std::copy(keymat.end() - 4, keymat.end(), config.salt.begin());
  std::string mode = opt.get("mode", "transport");
  if (mode == "tunnel") {
    config.mode = EspMode::kTunnel;
    IpAddress src = parseIp(opt.get("tunnel-src"), "--tunnel-src");
    IpAddress dst = parseIp(opt.get("tunnel-dst"), "--tunnel-dst");
    if (src.ipv6 != dst.ipv6) fail("--tunnel-src and --tunnel-dst must be of one family");
    config.tunnel.ipv6 = src.ipv6;
    config.tunnel.src = src.bytes;
    config.tunnel.dst = dst.bytes;
  } else if (mode != "transport") {
    fail("--mode must be transport or tunnel, got '" + mode + "'");
  } else if (opt.has("tunnel-src") || opt.has("tunnel-dst")) {
    fail("--tunnel-src and --tunnel-dst need --mode tunnel");
  }
  config.esn = opt.has("esn");
  if (opt.has("implicit-iv")) config.iv_mode = EspIvMode::kImplicit;
  if (opt.has("seq")) config.initial_sequence = parseNumber(opt.get("seq"), "--seq", UINT64_MAX);
  if (opt.has("replay-window")) {
    config.replay_window = static_cast<uint32_t>(parseNumber(opt.get("replay-window"), "--replay-window", 65536));
  }
  if (opt.has("backend")) {
    auto backend = aeadBackendFromName(opt.get("backend"));
    if (!backend) fail("--backend must be ipsec-mb or openssl, got '" + opt.get("backend") + "'");
    config.backend = *backend;
  }
  return config;
}

// The IP packet inside an Ethernet frame: where it starts (after any VLAN tags).
std::optional<uint32_t> ipOffset(const std::vector<uint8_t>& frame) {
  uint32_t off = eth::kHeaderLen;
  if (frame.size() < off) return std::nullopt;
  uint16_t type = load16(frame.data() + 12);
  for (size_t tags = 0; (type == eth::kTypeVlan || type == eth::kTypeQinq) && tags < vlan::kMaxTags; ++tags) {
    if (frame.size() < off + vlan::kTagLen) return std::nullopt;
    type = load16(frame.data() + off + 2);
    off += vlan::kTagLen;
  }
  if (type != eth::kTypeIpv4 && type != eth::kTypeIpv6) return std::nullopt;
  return off;
}

// Runs an ESP transform on the IP part of each frame and puts the Ethernet
// header back in front, with its EtherType following the IP version it now carries.
template <class Transform>
int espTransform(const std::vector<CapturedPacket>& in, std::vector<CapturedPacket>& out, Transform&& transform,
                 const char* what) {
  Tally tally;
  for (size_t i = 0; i < in.size(); ++i) {
    auto l3 = ipOffset(in[i].bytes);
    if (!l3) {
      tally.drop(i, Status::kUnsupported);
      continue;
    }
    std::vector<uint8_t> ip(in[i].bytes.begin() + *l3, in[i].bytes.end());
    WorkBuffer work(ip);
    if (Status s = transform(work.packet); s != Status::kOk) {
      tally.drop(i, s);
      continue;
    }
    std::vector<uint8_t> frame(in[i].bytes.begin(), in[i].bytes.begin() + *l3);
    if (work.packet.size() > 0) {
      uint16_t type = (work.packet.data()[0] >> 4) == 6 ? eth::kTypeIpv6 : eth::kTypeIpv4;
      store16(frame.data() + *l3 - 2, type);
    }
    frame.insert(frame.end(), work.packet.data(), work.packet.data() + work.packet.size());
    out.push_back({in[i].ts_sec, in[i].ts_usec, std::move(frame)});
    tally.ok();
  }
  return tally.finish(what);
}

int espEncrypt(const Options& opt, const std::vector<CapturedPacket>& in, std::vector<CapturedPacket>& out) {
  opt.allowOnly({"in", "out", "spi", "key", "mode", "tunnel-src", "tunnel-dst", "esn", "seq", "implicit-iv",
                 "backend"});
  auto sa = EspOutboundSa::create(espConfig(opt));
  if (!sa) fail("cannot create the SA: " + sa.error());
  std::fprintf(stderr, "overlay-pcap: SPI 0x%08x %s on %s\n", sa->spi(),
               std::string(aeadAlgorithmName(sa->algorithm())).c_str(),
               std::string(aeadBackendName(sa->backend())).c_str());
  return espTransform(in, out, [&](PacketBuffer& p) { return sa->encrypt(p); }, "encrypted");
}

int espDecrypt(const Options& opt, const std::vector<CapturedPacket>& in, std::vector<CapturedPacket>& out) {
  opt.allowOnly({"in", "out", "spi", "key", "mode", "tunnel-src", "tunnel-dst", "esn", "seq", "implicit-iv",
                 "replay-window", "backend"});
  auto sa = EspInboundSa::create(espConfig(opt));
  if (!sa) fail("cannot create the SA: " + sa.error());
  return espTransform(in, out, [&](PacketBuffer& p) { return sa->decrypt(p); }, "decrypted");
}

int run(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 1 : 0;
  }
  const std::string op = argv[1];
  if (op == "--list-backends") {
    for (AeadBackend b : availableAeadBackends()) std::printf("%s\n", std::string(aeadBackendName(b)).c_str());
    return 0;
  }
  Options opt(argc, argv, {"udp-checksum", "oam", "esn", "implicit-iv"});
  std::vector<CapturedPacket> in;
  std::vector<CapturedPacket> out;
  std::string error;
  using Handler = int (*)(const Options&, const std::vector<CapturedPacket>&, std::vector<CapturedPacket>&);
  const std::map<std::string, Handler> handlers = {
      {"geneve-encap", geneveEncap},
      {"geneve-decap", geneveDecap},
      {"esp-encrypt", espEncrypt},
      {"esp-decrypt", espDecrypt},
  };
  auto handler = handlers.find(op);
  if (handler == handlers.end()) fail("unknown operation '" + op + "' (see --help)");
  const std::string in_path = opt.get("in");
  const std::string out_path = opt.get("out");
  if (!readCapture(in_path, in, error)) fail(error);
  int rc = handler->second(opt, in, out);
  if (!writeCapture(out_path, out, error)) fail(error);
  return rc;
}

}  // namespace
}  // namespace dpu::overlay::tools

int main(int argc, char** argv) { return dpu::overlay::tools::run(argc, argv); }
