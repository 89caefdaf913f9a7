// The overlay's setup code (SA creation, AEAD backends) reports failures with
// the project-wide Result<T> (common/result.h).
#pragma once

#include "common/result.h"

namespace dpu::overlay {
using dpu::Error;
using dpu::Result;
}  // namespace dpu::overlay
