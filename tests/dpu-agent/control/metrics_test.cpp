// The Prometheus text format: HELP/TYPE lines, label escaping, cumulative buckets.
#include <catch2/catch.hpp>

#include <sstream>

#include "control/metrics.h"

using namespace dpu::control;

TEST_CASE("histograms render cumulative buckets, sum and count") {
  Histogram h({0.001, 0.01, 0.1});
  h.observe(0.0005);
  h.observe(0.005);
  h.observe(0.005);
  h.observe(5);
  PromWriter w;
  w.histogram("lat_seconds", "Latency.", h.snapshot(), {{"op", "attach"}});
  CHECK(w.text() ==
        "# HELP lat_seconds Latency.\n"
        "# TYPE lat_seconds histogram\n"
        "lat_seconds_bucket{op=\"attach\",le=\"0.001\"} 1\n"
        "lat_seconds_bucket{op=\"attach\",le=\"0.01\"} 3\n"
        "lat_seconds_bucket{op=\"attach\",le=\"0.1\"} 3\n"
        "lat_seconds_bucket{op=\"attach\",le=\"+Inf\"} 4\n"
        "lat_seconds_sum{op=\"attach\"} 5.0105\n"
        "lat_seconds_count{op=\"attach\"} 4\n");
  auto s = h.snapshot();
  CHECK(s.quantileUpperBound(0.5) == 0.01);
  CHECK(std::isinf(s.quantileUpperBound(0.99)));
}

TEST_CASE("gauges, counters and label values are escaped") {
  PromWriter w;
  w.gauge("g", "A \\ gauge\nwith two lines.", 2.5);
  w.counter("c_total", "Things.", 3, {{"path", "a\"b\\c\nd"}});
  w.family("f", "gauge", "Per CIDR.", {{{{"cidr", "10.0.0.0/24"}}, 1}, {{{"cidr", "10.0.1.0/24"}}, 2}});
  CHECK(w.text() ==
        "# HELP g A \\\\ gauge\\nwith two lines.\n# TYPE g gauge\ng 2.5\n"
        "# HELP c_total Things.\n# TYPE c_total counter\nc_total{path=\"a\\\"b\\\\c\\nd\"} 3\n"
        "# HELP f Per CIDR.\n# TYPE f gauge\nf{cidr=\"10.0.0.0/24\"} 1\nf{cidr=\"10.0.1.0/24\"} 2\n");
  // Every sample line is "name{labels} value" or "name value".
  std::istringstream lines(w.text());
  for (std::string line; std::getline(lines, line);) {
    if (line[0] == '#') continue;
    CHECK(line.find(' ') != std::string::npos);
  }
}
