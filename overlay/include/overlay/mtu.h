// MTU arithmetic for pod traffic carried in Geneve (RFC 8926), optionally
// inside ESP (RFC 4303 transport mode, AES-GCM per RFC 4106, optional NAT-T
// UDP encapsulation per RFC 3948).
//
// An MTU here is always an IP MTU: the largest IP packet (header included, link
// header excluded) a link carries. The pod MTU is what the pod's VF gets, the
// underlay MTU is the DPU uplink's. "MTU breakage under IPsec" is a complaint
// users have about today's DPU CNIs, so every number is exact, not a guess
// with slack: the largest pod packet fits the underlay, one byte more does not.
//
// An outer packet, front to back (IPv4 20 / IPv6 40 outer header):
//   Geneve only:  IP | UDP 8 | Geneve 8 | options O | inner Ethernet 14 | inner IP P
//   with ESP:     IP | [NAT-T UDP 8] | ESP 8 | IV 8 | <UDP .. inner IP> | pad | 2 | ICV 16
// Without ESP:  outer = IP + 30 + O + P, so  P_max = U - IP - 30 - O.
// With ESP the protected payload E = 30 + O + P is followed by 0..3 padding
// bytes and the pad-length and next-header bytes, so that the ciphertext ends
// on a 4-byte boundary (RFC 4303 §2.4; GCM itself needs no block padding,
// RFC 4106 §3):  outer = IP + natt + 16 + roundUp4(E + 2) + 16.  It fits iff
//   E + 2 <= floor4(U - IP - natt - 32),  so  P_max = floor4(U - IP - natt - 32) - 2 - 30 - O.
// Flooring is what makes the answer exact rather than worst case: a pod MTU
// computed with a fixed 3 bytes of padding would waste up to 3 bytes, and one
// computed without padding would be up to 3 bytes too large.
#pragma once

#include <cstdint>

namespace dpu::overlay {

// The IP version of the underlay (the outer header); the pod's own packets may
// be of either version independently.
enum class UnderlayFamily : uint8_t { kIpv4, kIpv6 };

// Header sizes that enter the arithmetic (bytes).
namespace overhead {
inline constexpr uint32_t kIpv4 = 20;        // outer IPv4 without options (we never send any)
inline constexpr uint32_t kIpv6 = 40;        // outer IPv6 without extension headers
inline constexpr uint32_t kUdp = 8;
inline constexpr uint32_t kGeneve = 8;       // RFC 8926 §3.4 fixed header
inline constexpr uint32_t kInnerEthernet = 14;  // the inner frame is Ethernet (protocol 0x6558), untagged
inline constexpr uint32_t kEspHeader = 8;    // SPI + sequence number (RFC 4303 §2)
inline constexpr uint32_t kEspTrailer = 2;   // pad length + next header (RFC 4303 §2.4-2.6)
inline constexpr uint32_t kEspAlign = 4;     // ciphertext alignment (RFC 4303 §2.4)
inline constexpr uint32_t kNatT = 8;         // UDP/4500 in front of ESP (RFC 3948 §2.1)
// Minimum MTUs an ICMP "packet too big" may announce.
inline constexpr uint32_t kMinIpv4Mtu = 68;    // RFC 791
inline constexpr uint32_t kMinIpv6Mtu = 1280;  // RFC 8200 §5
}  // namespace overhead

// How a pod packet is carried to the other node.
struct OverlayEncap {
  UnderlayFamily family = UnderlayFamily::kIpv4;
  uint32_t geneve_options_len = 0;  // total TLV bytes (the OVN option is 8)
  bool esp = false;                 // ESP transport mode around the outer UDP
  bool esp_nat_t = false;           // ESP inside UDP/4500 (only with esp)
  uint32_t esp_iv_len = 8;          // AES-GCM explicit IV (RFC 4106 §3.1)
  uint32_t esp_icv_len = 16;        // AES-GCM 16-byte ICV (RFC 4106 §3.2)
};

namespace detail {
constexpr uint32_t outerIpLen(const OverlayEncap& e) {
  return e.family == UnderlayFamily::kIpv4 ? overhead::kIpv4 : overhead::kIpv6;
}
// Bytes from the outer UDP header to the start of the inner IP packet.
constexpr uint32_t geneveLayers(const OverlayEncap& e) {
  return overhead::kUdp + overhead::kGeneve + e.geneve_options_len + overhead::kInnerEthernet;
}
constexpr uint32_t espFixed(const OverlayEncap& e) {
  return (e.esp_nat_t ? overhead::kNatT : 0) + overhead::kEspHeader + e.esp_iv_len + e.esp_icv_len;
}
constexpr uint32_t roundUp(uint32_t v, uint32_t a) { return (v + a - 1) / a * a; }
}  // namespace detail

// The size of the outer IP packet that carries an inner IP packet of
// `inner_ip_len` bytes (add 14 for the outer Ethernet header on the wire).
constexpr uint32_t outerPacketSize(uint32_t inner_ip_len, const OverlayEncap& e) {
  const uint32_t protected_len = detail::geneveLayers(e) + inner_ip_len;
  if (!e.esp) return detail::outerIpLen(e) + protected_len;
  return detail::outerIpLen(e) + detail::espFixed(e) +
         detail::roundUp(protected_len + overhead::kEspTrailer, overhead::kEspAlign);
}

// The largest pod (inner IP) MTU whose packets fit an underlay of
// `underlay_mtu`; 0 when not even an empty inner packet fits.
constexpr uint32_t podMtuFor(uint32_t underlay_mtu, const OverlayEncap& e) {
  uint32_t avail = underlay_mtu;
  const uint32_t fixed = detail::outerIpLen(e) + (e.esp ? detail::espFixed(e) : 0);
  if (avail < fixed) return 0;
  avail -= fixed;
  if (e.esp) {
    avail -= avail % overhead::kEspAlign;  // the ciphertext ends on a 4-byte boundary
    if (avail < overhead::kEspTrailer) return 0;
    avail -= overhead::kEspTrailer;
  }
  const uint32_t layers = detail::geneveLayers(e);
  return avail < layers ? 0 : avail - layers;
}

// The smallest underlay MTU that carries pod packets of `pod_mtu` bytes.
constexpr uint32_t underlayMtuFor(uint32_t pod_mtu, const OverlayEncap& e) {
  return outerPacketSize(pod_mtu, e);
}

// The MTU to announce in an ICMP "fragmentation needed" (RFC 1191) or ICMPv6
// "packet too big" (RFC 4443 §3.2) sent back to a pod whose packet does not fit
// the tunnel: the pod MTU of the underlay path (the uplink MTU, or less once
// the underlay itself reported a smaller path MTU to the DPU). Never below the
// protocol minimum: an IPv6 host ignores a smaller value (RFC 8201 §4), and a
// tunnel that cannot carry 1280 bytes must fragment the outer packet instead.
constexpr uint32_t innerPathMtu(uint32_t underlay_path_mtu, const OverlayEncap& e, bool inner_ipv6) {
  const uint32_t mtu = podMtuFor(underlay_path_mtu, e);
  const uint32_t floor = inner_ipv6 ? overhead::kMinIpv6Mtu : overhead::kMinIpv4Mtu;
  return mtu < floor ? floor : mtu;
}

static_assert(podMtuFor(1500, OverlayEncap{}) == 1450);
static_assert(podMtuFor(1500, OverlayEncap{.family = UnderlayFamily::kIpv6}) == 1430);
static_assert(podMtuFor(1500, OverlayEncap{.geneve_options_len = 8}) == 1442);
static_assert(podMtuFor(1500, OverlayEncap{.geneve_options_len = 8, .esp = true}) == 1408);
static_assert(outerPacketSize(1408, OverlayEncap{.geneve_options_len = 8, .esp = true}) == 1500);
static_assert(outerPacketSize(1409, OverlayEncap{.geneve_options_len = 8, .esp = true}) > 1500);

}  // namespace dpu::overlay
