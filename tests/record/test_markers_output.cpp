#include <catch2/catch.hpp>

#include "mhc/record/markers.hpp"
#include "mhc/record/output.hpp"

using mhc::record::classify_marker;
using mhc::record::last_number;
using mhc::record::output_path;
using mhc::trace::MarkerKind;

TEST_CASE("markers: step, layer and range names") {
    auto marker_class = classify_marker("ProfilerStep#12", 0);
    CHECK(marker_class.kind == MarkerKind::Step);
    CHECK(marker_class.index == 12);
    marker_class = classify_marker("train STEP 7", 0);
    CHECK(marker_class.kind == MarkerKind::Step);
    CHECK(marker_class.index == 7);
    marker_class = classify_marker("step", 4);   // no number: numbered by order
    CHECK(marker_class.kind == MarkerKind::Step);
    CHECK(marker_class.index == 4);
    marker_class = classify_marker("Layer_3.attn", 0);
    CHECK(marker_class.kind == MarkerKind::Layer);
    CHECK(marker_class.index == 3);
    marker_class = classify_marker("decoder layer", 0);
    CHECK(marker_class.kind == MarkerKind::Layer);
    CHECK(marker_class.index == -1);
    marker_class = classify_marker("forward", 0);
    CHECK(marker_class.kind == MarkerKind::Range);
    CHECK(marker_class.index == -1);
    marker_class = classify_marker("", 0);
    CHECK(marker_class.kind == MarkerKind::Range);
}

TEST_CASE("markers: last number") {
    CHECK(last_number("a1b22c") == 22);
    CHECK(last_number("no digits") == -1);
    CHECK(last_number("x12345678901") == 345678901);   // kept within int32
}

TEST_CASE("output: one file per process") {
    CHECK(output_path("run.db", nullptr, nullptr, 99, true) == "run.db");
    CHECK(output_path("run.db", nullptr, nullptr, 99, false) == "run.pid99.db");
    CHECK(output_path("run.db", "3", nullptr, 99, true) == "run.rank3.db");
    CHECK(output_path("run.db", "", "1", 99, false) == "run.rank1.db");
    CHECK(output_path("out/run.db", "0", "0", 99, false) == "out/run.rank0.db");
    CHECK(output_path("dir.d/trace", nullptr, nullptr, 5, false) == "dir.d/trace.pid5");
    CHECK(output_path("run.db", "x/y", nullptr, 5, false) == "run.pid5.db");   // not a rank
}
