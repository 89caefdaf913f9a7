// libpcap-backed capture I/O for overlay-pcap.
#include "pcap_file.h"

#include <pcap/pcap.h>

#include <memory>

namespace dpu::overlay::tools {
namespace {

struct PcapCloser {
  void operator()(pcap_t* p) const { pcap_close(p); }
};
struct DumperCloser {
  void operator()(pcap_dumper_t* d) const { pcap_dump_close(d); }
};

}  // namespace

bool readCapture(const std::string& path, std::vector<CapturedPacket>& out, std::string& error) {
  char errbuf[PCAP_ERRBUF_SIZE] = {};
  std::unique_ptr<pcap_t, PcapCloser> handle(pcap_open_offline(path.c_str(), errbuf));
  if (!handle) {
    error = "cannot read capture " + path + ": " + errbuf;
    return false;
  }
  if (pcap_datalink(handle.get()) != DLT_EN10MB) {
    error = "capture " + path + " is not Ethernet (link type " +
            std::to_string(pcap_datalink(handle.get())) + "); capture on an Ethernet interface";
    return false;
  }
  pcap_pkthdr* hdr = nullptr;
  const u_char* data = nullptr;
  int rc;
  while ((rc = pcap_next_ex(handle.get(), &hdr, &data)) == 1) {
    CapturedPacket p;
    p.ts_sec = hdr->ts.tv_sec;
    p.ts_usec = hdr->ts.tv_usec;
    p.bytes.assign(data, data + hdr->caplen);
    out.push_back(std::move(p));
  }
  if (rc == PCAP_ERROR) {
    error = "error reading " + path + ": " + pcap_geterr(handle.get());
    return false;
  }
  return true;
}

bool writeCapture(const std::string& path, const std::vector<CapturedPacket>& packets, std::string& error) {
  std::unique_ptr<pcap_t, PcapCloser> dead(pcap_open_dead(DLT_EN10MB, 262144));
  if (!dead) {
    error = "libpcap could not open a writer";
    return false;
  }
  std::unique_ptr<pcap_dumper_t, DumperCloser> dumper(pcap_dump_open(dead.get(), path.c_str()));
  if (!dumper) {
    error = "cannot write capture " + path + ": " + pcap_geterr(dead.get());
    return false;
  }
  for (const auto& p : packets) {
    pcap_pkthdr hdr{};
    hdr.ts.tv_sec = p.ts_sec;
    hdr.ts.tv_usec = p.ts_usec;
    hdr.caplen = static_cast<bpf_u_int32>(p.bytes.size());
    hdr.len = hdr.caplen;
    pcap_dump(reinterpret_cast<u_char*>(dumper.get()), &hdr, p.bytes.data());
  }
  if (pcap_dump_flush(dumper.get()) != 0) {
    error = "cannot flush capture " + path;
    return false;
  }
  return true;
}

}  // namespace dpu::overlay::tools
