// Histograms and the Prometheus text writer (see prometheus.h).
#include "common/prometheus.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace dpu::prom {

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0);
}

std::vector<double> Histogram::latencyBounds() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
}

void Histogram::observe(double seconds) {
  if (!(seconds >= 0)) seconds = 0;
  size_t i = 0;
  while (i < bounds_.size() && seconds > bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_nanos_.fetch_add(static_cast<uint64_t>(seconds * 1e9), std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = static_cast<double>(sum_nanos_.load(std::memory_order_relaxed)) / 1e9;
  return s;
}

double Histogram::Snapshot::quantileUpperBound(double q) const {
  if (count == 0) return 0;
  double rank = q * static_cast<double>(count);
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (static_cast<double>(cumulative[i]) >= rank) return bounds[i];
  }
  return std::numeric_limits<double>::infinity();
}

std::string Writer::escapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string Writer::formatValue(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void Writer::header(const std::string& name, const std::string& type, const std::string& help) {
  std::string h;
  for (char c : help) {
    if (c == '\\') h += "\\\\";
    else if (c == '\n') h += "\\n";
    else h += c;
  }
  out_ += "# HELP " + name + " " + h + "\n# TYPE " + name + " " + type + "\n";
}

void Writer::sample(const std::string& name, const Labels& labels, double value) {
  out_ += name;
  if (!labels.empty()) {
    out_ += "{";
    for (size_t i = 0; i < labels.size(); ++i) {
      out_ += (i ? "," : "") + labels[i].first + "=\"" + escapeLabel(labels[i].second) + "\"";
    }
    out_ += "}";
  }
  out_ += " " + formatValue(value) + "\n";
}

void Writer::gauge(const std::string& name, const std::string& help, double value, const Labels& labels) {
  header(name, "gauge", help);
  sample(name, labels, value);
}

void Writer::counter(const std::string& name, const std::string& help, double value, const Labels& labels) {
  header(name, "counter", help);
  sample(name, labels, value);
}

void Writer::family(const std::string& name, const std::string& type, const std::string& help,
                        const std::vector<std::pair<Labels, double>>& samples) {
  header(name, type, help);
  for (const auto& [labels, v] : samples) sample(name, labels, v);
}

void Writer::histogram(const std::string& name, const std::string& help, const Histogram::Snapshot& h,
                           const Labels& labels) {
  header(name, "histogram", help);
  for (size_t i = 0; i <= h.bounds.size(); ++i) {
    Labels l = labels;
    l.emplace_back("le", i < h.bounds.size() ? formatValue(h.bounds[i]) : "+Inf");
    sample(name + "_bucket", l, static_cast<double>(h.cumulative[i]));
  }
  sample(name + "_sum", labels, h.sum);
  sample(name + "_count", labels, static_cast<double>(h.count));
}

}  // namespace dpu::prom
