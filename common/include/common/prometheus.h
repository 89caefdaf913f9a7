// Prometheus text exposition (format 0.0.4), shared by every process that
// serves /metrics (dpu-agent's API listener, dpu-dataplane's own endpoint):
// lock-free histograms hot paths observe into, and a writer that renders
// gauges, counters and histograms with HELP/TYPE lines, escaped label values
// and cumulative buckets ending in +Inf. Naming follows Prometheus's
// conventions: a `dpu_` prefix, base units, `_total` on counters.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace dpu::prom {


class Histogram {
 public:
  // Upper bounds in seconds, ascending.
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf last
    uint64_t count = 0;
    double sum = 0;
    // The smallest bucket bound holding quantile q (an upper estimate); +Inf as infinity.
    double quantileUpperBound(double q) const;
  };
  Snapshot snapshot() const;

  static std::vector<double> latencyBounds();  // 50 µs .. 10 s

 private:
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1
  std::atomic<uint64_t> sum_nanos_{0};
};

using Labels = std::vector<std::pair<std::string, std::string>>;

class Writer {
 public:
  void gauge(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void counter(const std::string& name, const std::string& help, double value, const Labels& labels = {});
  void histogram(const std::string& name, const std::string& help, const Histogram::Snapshot& h,
                 const Labels& labels = {});
  // Several samples of one metric family, each with its labels.
  void family(const std::string& name, const std::string& type, const std::string& help,
              const std::vector<std::pair<Labels, double>>& samples);
  const std::string& text() const { return out_; }

  static std::string escapeLabel(const std::string& v);
  static std::string formatValue(double v);

 private:
  void header(const std::string& name, const std::string& type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double value);
  std::string out_;
};

}  // namespace dpu::prom
