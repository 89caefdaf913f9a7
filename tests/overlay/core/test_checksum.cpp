// Checksum arithmetic: full sums against RFC 1071's worked example and a real
// IPv4 header, and RFC 1624 incremental updates against full recomputation.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include "overlay/bytes.h"
#include "overlay/checksum.h"
#include "overlay/status.h"

using namespace dpu::overlay;

TEST_CASE("checksum of RFC 1071 section 3 example") {
  // Words 0001 f203 f4f5 f6f7 sum to 0xddf2 (folded); the checksum is its complement.
  const uint8_t data[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  CHECK(checksumFinish(checksumAdd(data, sizeof data)) == static_cast<uint16_t>(~0xddf2));
}

TEST_CASE("IPv4 header checksum of a known header") {
  // 45000073 00004000 4011 b861 c0a80001 c0a800c7 (the classic Wikipedia example)
  uint8_t hdr[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                   0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  CHECK(internetChecksum(hdr) == 0xb861);
  store16(hdr + 10, 0xb861);
  CHECK(internetChecksum(hdr) == 0);  // a valid header sums to zero
}

TEST_CASE("the inline IPv4 header checksum agrees with the general sum") {
  std::mt19937 rng(3);
  for (int round = 0; round < 1000; ++round) {
    uint8_t hdr[60];
    for (auto& b : hdr) b = static_cast<uint8_t>(rng());
    for (size_t len : {20, 24, 60}) {
      REQUIRE(ipv4HeaderChecksum(hdr, len) == internetChecksum({hdr, len}));
    }
  }
  uint8_t valid[] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                     0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  CHECK(ipv4HeaderChecksum(valid, 20) == 0);
}

// The lane's test of a received header: random headers (nearly all
// invalid), each made valid with its computed checksum and with the other
// representation of zero where it has one, and the all-zero header.
TEST_CASE("the IPv4 header check agrees with the checksum for valid and invalid headers") {
  std::mt19937 rng(5);
  auto agrees = [](const uint8_t* hdr) { return ipv4HeaderChecksumOk(hdr) == (ipv4HeaderChecksum(hdr, 20) == 0); };
  unsigned valid = 0;
  for (int round = 0; round < 200000; ++round) {
    uint8_t hdr[20];
    for (auto& b : hdr) b = static_cast<uint8_t>(rng());
    if (round % 2000 == 0) std::fill(hdr, hdr + 20, round % 4000 == 0 ? 0x00 : 0xff);
    REQUIRE(agrees(hdr));
    store16(hdr + 10, 0);
    store16(hdr + 10, ipv4HeaderChecksum(hdr, 20));
    REQUIRE(agrees(hdr));
    valid += ipv4HeaderChecksumOk(hdr) ? 1 : 0;
    // 0x0000 and 0xffff are both zero in ones' complement.
    if (load16(hdr + 10) == 0 || load16(hdr + 10) == 0xffff) {
      store16(hdr + 10, static_cast<uint16_t>(~load16(hdr + 10)));
      REQUIRE(agrees(hdr));
    }
    // One bit flipped anywhere makes it invalid.
    hdr[rng() % 20] ^= static_cast<uint8_t>(1u << (rng() % 8));
    REQUIRE(agrees(hdr));
  }
  CHECK(valid >= 199000);
  uint8_t zero[20] = {};
  CHECK_FALSE(ipv4HeaderChecksumOk(zero));
  CHECK(agrees(zero));
}

TEST_CASE("odd lengths pad the last byte with zero") {
  const uint8_t odd[] = {0x12, 0x34, 0x56};
  const uint8_t even[] = {0x12, 0x34, 0x56, 0x00};
  CHECK(checksumAdd(odd, 3) == checksumAdd(even, 4));
}

TEST_CASE("sums chain across buffers split at even offsets, at any alignment") {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(301);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  uint16_t whole = checksumFinish(checksumAdd(buf.data(), buf.size()));
  for (size_t split = 0; split <= buf.size(); split += 2) {
    uint32_t s = checksumAdd(buf.data(), split);
    s = checksumAdd(buf.data() + split, buf.size() - split, s);
    REQUIRE(checksumFinish(s) == whole);
  }
  // Unaligned start: the same bytes copied one byte later give the same sum.
  std::vector<uint8_t> shifted(buf.size() + 1);
  std::copy(buf.begin(), buf.end(), shifted.begin() + 1);
  CHECK(checksumFinish(checksumAdd(shifted.data() + 1, buf.size())) == whole);
}

TEST_CASE("RFC 1624 incremental updates equal full recomputation") {
  std::mt19937 rng(42);
  for (int round = 0; round < 2000; ++round) {
    std::vector<uint8_t> buf(40);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    const uint16_t before = internetChecksum(buf);

    {
      size_t off = (rng() % 20) * 2;
      uint16_t oldw = load16(&buf[off]);
      uint16_t neww = static_cast<uint16_t>(rng());
      store16(&buf[off], neww);
      uint16_t inc = checksumUpdate16(before, oldw, neww);
      uint16_t full = internetChecksum(buf);
      // 0x0000 and 0xffff are the two ones' complement zeros; RFC 1624 §3 yields
      // the form that full recomputation would not produce only for all-zero data.
      REQUIRE((inc == full || (inc ^ full) == 0xffff));
      store16(&buf[off], oldw);
    }
    {
      size_t off = (rng() % 10) * 4;
      uint32_t oldv = load32(&buf[off]);
      uint32_t newv = static_cast<uint32_t>(rng());
      store32(&buf[off], newv);
      REQUIRE(checksumUpdate32(before, oldv, newv) == internetChecksum(buf));
      store32(&buf[off], oldv);
    }
    {
      size_t off = (rng() % 3) * 8;
      std::vector<uint8_t> old(buf.begin() + off, buf.begin() + off + 16);
      for (size_t i = 0; i < 16; ++i) buf[off + i] = static_cast<uint8_t>(rng());
      REQUIRE(checksumUpdateBytes(before, old.data(), &buf[off], 16) == internetChecksum(buf));
    }
  }
}

TEST_CASE("pseudo-header sums match the byte layout") {
  const uint8_t src[] = {10, 0, 0, 1};
  const uint8_t dst[] = {10, 0, 0, 2};
  const uint8_t ph[] = {10, 0, 0, 1, 10, 0, 0, 2, 0, 17, 0x01, 0x00};
  CHECK(checksumFinish(pseudoHeaderSumV4(src, dst, 17, 256)) == checksumFinish(checksumAdd(ph, sizeof ph)));

  uint8_t src6[16] = {0x20, 0x01, 0x0d, 0xb8};
  uint8_t dst6[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  src6[15] = 1;
  std::vector<uint8_t> ph6(src6, src6 + 16);
  ph6.insert(ph6.end(), dst6, dst6 + 16);
  const uint8_t tail[] = {0x00, 0x01, 0x00, 0x10, 0, 0, 0, 58};  // length 65552, next header 58
  ph6.insert(ph6.end(), tail, tail + 8);
  CHECK(checksumFinish(pseudoHeaderSumV6(src6, dst6, 58, 65552)) == internetChecksum(ph6));
}

TEST_CASE("every status has a name and a text") {
  for (size_t i = 0; i < kStatusCount; ++i) {
    auto s = static_cast<Status>(i);
    CHECK(!statusText(s).empty());
    CHECK(statusName(s) != "Unknown");
  }
  CHECK(statusName(Status::kOk) == "Ok");
  CHECK(statusText(Status::kEspReplay) == "ESP sequence number replayed");
}
