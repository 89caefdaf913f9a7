// Reading and writing capture files for the overlay tools, through libpcap so
// that pcapng captures from tshark/dumpcap read as well as classic pcap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dpu::overlay::tools {

struct CapturedPacket {
  int64_t ts_sec = 0;
  int64_t ts_usec = 0;
  std::vector<uint8_t> bytes;
};

// Reads every packet of an Ethernet capture. Returns false with `error` set
// when the file cannot be read or is not Ethernet (link type EN10MB).
bool readCapture(const std::string& path, std::vector<CapturedPacket>& out, std::string& error);

// Writes an Ethernet capture (classic pcap, microsecond timestamps).
bool writeCapture(const std::string& path, const std::vector<CapturedPacket>& packets, std::string& error);

}  // namespace dpu::overlay::tools
