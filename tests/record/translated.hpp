#pragma once
// How the recorder's tests judge a translated trace, and where its times start.
#include <catch2/catch.hpp>
#include <cstdint>

#include "helpers.hpp"

namespace mhc::record::test {

// The translated trace passes `mhc check`; its problems are said when it does not.
inline void require_valid(const trace::TraceData& data) {
    auto report = trace::check_trace(data);
    INFO(problems(report));
    REQUIRE(report.ok());
}

// The translator's options for events stamped in CUPTI's raw time: times from `origin`.
inline TranslatorOptions origin_at(uint64_t origin) {
    TranslatorOptions options;
    options.origin = static_cast<int64_t>(origin);
    return options;
}

}   // namespace mhc::record::test
