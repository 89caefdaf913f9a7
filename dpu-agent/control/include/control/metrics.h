// The agent's /metrics: the Prometheus writer and histograms of
// common/prometheus.h under the names the control plane has always used.
#pragma once

#include "common/prometheus.h"

namespace dpu::control {

using Histogram = prom::Histogram;
using Labels = prom::Labels;
using PromWriter = prom::Writer;

}  // namespace dpu::control
