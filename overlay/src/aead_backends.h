// Private to the AEAD implementation: the factory and availability probe of
// each backend, so aead.cpp can choose among them without seeing their
// libraries' headers (only aead_ipsec_mb.cpp includes intel-ipsec-mb.h, only
// aead_openssl.cpp includes OpenSSL).
#pragma once

#include <memory>
#include <span>

#include "overlay/aead.h"

namespace dpu::overlay::detail {

// True when this build has intel-ipsec-mb and the CPU runs its AES-NI code.
bool ipsecMbAvailable();
// The key length has been checked by the caller.
Result<std::unique_ptr<AeadContext>> createIpsecMbContext(AeadAlgorithm algorithm, std::span<const uint8_t> key);
Result<std::unique_ptr<AeadContext>> createOpenSslContext(AeadAlgorithm algorithm, std::span<const uint8_t> key);

}  // namespace dpu::overlay::detail
