// Every metric a run writes has the domain the stored-run reader checks it against
// (trace::metric_domain, whose list of counts is kept by hand in trace/src/runs.cpp): a count
// added to sim::fields(Result) without being listed there would be read back unchecked.
#include <catch2/catch.hpp>

#include <string>
#include <type_traits>
#include <vector>

#include "mhc/sim/result.hpp"
#include "mhc/sim/result_fields.hpp"
#include "mhc/trace/runs.hpp"

using namespace mhc;

namespace {

struct Metric {
    std::string name;
    bool whole;   // an integer or a flag, not a ratio
};

struct CollectMetrics {
    std::vector<Metric>& out;
    template <class T>
    void operator()(const sim::Field& f, const T& x) {
        if constexpr (std::is_same_v<T, sim::Oom>) {
            sim::fields(x, *this);
        } else if constexpr (std::is_arithmetic_v<T>) {
            if (f.metric) out.push_back({f.metric, std::is_integral_v<T>});
            if (f.metric_after_oom) out.push_back({f.metric_after_oom, std::is_integral_v<T>});
        }
    }
};

bool ends_with(const std::string& s, const std::string& end) {
    return s.size() >= end.size() && s.compare(s.size() - end.size(), end.size(), end) == 0;
}

}  // namespace

TEST_CASE("every whole-valued metric of a run has a domain the stored-run reader checks", "[sim][runs]") {
    std::vector<Metric> metrics;
    const sim::Result r;
    sim::fields(r, CollectMetrics{metrics});
    REQUIRE(metrics.size() > 20);
    for (const Metric& m : metrics) {
        INFO(m.name);
        const trace::MetricDomain d = trace::metric_domain(m.name);
        if (m.name == "capacity_bytes" || m.name == "host_capacity_bytes") {
            CHECK(d == trace::MetricDomain::Capacity);
        } else if (m.name == "oom_time_ns") {
            // a time on the trace's clock, not an amount: it may lie below 0 (docs/trace-format.md)
            CHECK(d == trace::MetricDomain::Signed);
        } else if (ends_with(m.name, "_bytes") || ends_with(m.name, "_ns") || ends_with(m.name, "_seconds") ||
                   m.name.starts_with("oom_bytes_")) {
            CHECK(d == trace::MetricDomain::Amount);
        } else if (m.whole) {
            CHECK(d == trace::MetricDomain::Count);   // a count or a flag: list it in runs.cpp
        } else {
            CHECK(d == trace::MetricDomain::Signed);  // a ratio, a loss, an error
        }
    }
}
