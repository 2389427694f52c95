// The toolbar's controls that depend on the trace (controls.hpp) and the memory plots' y range
// fitted to the data (axis.hpp's byte_range), without a window.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "mhc/test/paths.hpp"
#include "mhc/viewer/axis.hpp"
#include "mhc/viewer/controls.hpp"
#include "mhc/viewer/curve.hpp"
#include "mhc/viewer/data.hpp"
#include "fixtures.hpp"
#include "mhc/trace/import/import.hpp"

using mhc::viewer::byte_range;
using mhc::viewer::byte_tick_labels;
using mhc::viewer::byte_tick_labels_fitted;
using mhc::viewer::byte_ticks;
using mhc::viewer::ByteRange;
using mhc::viewer::columns_min_max;
using mhc::viewer::Curve;
using mhc::viewer::CurveColumns;
using mhc::viewer::device_choices;
using mhc::viewer::load_view_trace;
using mhc::viewer::prepare_curve;
using mhc::viewer::snap_step;
using mhc::viewer::step_control;
using mhc::viewer::StepControl;
using mhc::viewer::steps_origin;
using mhc::viewer::StepSpan;
using mhc::viewer::ViewTrace;

TEST_CASE("the step field is off for a trace without steps, and starts at the first step there is") {
    // No steps: off, with the reason (the field read 0 and Go said "no step 0 in this trace").
    const StepControl none = step_control({});
    CHECK(!none.enabled);
    CHECK(none.why.rfind("no steps in this trace", 0) == 0);
    // A recording begun at step 12: the field starts there, not at 0.
    const std::vector<StepSpan> late{{12, 0, 10}, {13, 10, 20}, {14, 20, 30}};
    const StepControl on = step_control(late);
    CHECK(on.enabled);
    CHECK(on.why.empty());
    CHECK(on.first == 12);
    CHECK(on.last == 14);
    CHECK(snap_step(late, 0, 12) == 12);    // below the first: the first
    CHECK(snap_step(late, 99, 14) == 14);   // past the last: the last
    // Steps 0, 2, 4 (every other step marked): +/- move to the next step there is.
    const std::vector<StepSpan> even{{0, 0, 10}, {2, 20, 30}, {4, 40, 50}};
    CHECK(snap_step(even, 3, 2) == 4);   // + from 2
    CHECK(snap_step(even, 1, 2) == 0);   // - from 2
    CHECK(snap_step(even, 3, 4) == 2);   // - from 4
    CHECK(snap_step(even, 1, 0) == 2);   // + from 0
    CHECK(snap_step(even, 2, 0) == 2);   // typed: a step there is stays
    CHECK(snap_step(even, -7, 0) == 0);
    CHECK(snap_step({}, 5, 0) == 5);
}

TEST_CASE("memory device choices: one per device with allocations, none for a single device") {
    CHECK(device_choices({}).empty());
    CHECK(device_choices({{0, 10, 1024}}).empty());
    const auto choices = device_choices({{-1, 4, 305 * 1024 * 1024}, {0, 12, 320'000'000}});
    REQUIRE(choices.size() == 2);
    CHECK(choices[0].device == -1);
    CHECK(choices[0].label == "host (peak 305.00 MiB)");
    CHECK(choices[1].device == 0);
    CHECK(choices[1].label == "GPU 0 (peak 305.18 MiB)");
}

TEST_CASE("a y axis fitted to the data: a curve over a large baseline fills the plot, its labels readable") {
    constexpr double MiB = 1024.0 * 1024.0, GiB = 1024.0 * MiB;
    // Zero-based (the default) is the range as it always was: [0, peak x 1.08], at least 1 B.
    const ByteRange zero = byte_range(141.39 * GiB, 141.40 * GiB, false);
    CHECK(zero.lo == 0);
    CHECK(zero.hi == Approx(141.40 * GiB * 1.08));
    CHECK(byte_range(0, 0, false).hi == Approx(1.08));
    CHECK(byte_ticks(zero, 300.f, 16.f) == byte_ticks(zero.hi, 300.f, 16.f));
    // SGLang's decode capture: 141.4 GiB held from before recording, moving by about 10 MB. From
    // 0 B the moves are 10 MB of 152 GiB: 0.02 px of a 300 px plot. Fitted: the spread and 8% of
    // it either side, so the moves take 86% of the height.
    const double base = 141.4 * GiB, top = base + 10e6;
    const ByteRange fit = byte_range(base, top, true);
    CHECK(fit.lo == Approx(base - 0.8e6));
    CHECK(fit.hi == Approx(top + 0.8e6));
    CHECK((top - base) / zero.span() * 300 < 0.1);
    CHECK((top - base) / fit.span() == Approx(1 / 1.16));
    // Lines on the 1-2-5 x 1024^k grid of the span (10.4 MB over 300 px: every 2 MiB), inside the
    // range, none within half a 16 px label of either edge.
    const std::vector<double> ticks = byte_ticks(fit, 300.f, 16.f);
    REQUIRE(ticks.size() >= 3);
    CHECK(ticks.size() <= 7);
    const double step = ticks[1] - ticks[0];
    CHECK(step == 2 * MiB);
    for (double line : ticks) {
        CHECK(std::fmod(line, step) == 0);
        CHECK(fit.fraction(line) * 300 >= 8 - 1e-6);
        CHECK((1 - fit.fraction(line)) * 300 >= 8 - 1e-6);
    }
    // Labels: the lowest line whole (141.4 GiB to a step's resolution), the others above it; in
    // one unit they would read "144794 MiB", "144796 MiB".
    const std::vector<std::string> labels = byte_tick_labels_fitted(ticks);
    REQUIRE(labels.size() == ticks.size());
    char first[32];
    std::snprintf(first, sizeof first, "%.3f GiB", ticks[0] / GiB);
    CHECK(labels[0] == first);
    CHECK(labels[0].rfind("141.4", 0) == 0);
    for (size_t i = 1; i < labels.size(); ++i) CHECK(labels[i] == "+" + std::to_string(2 * i) + " MiB");
    // A fitted range whose lines stay short keeps the plain labels: 20 GiB to 23 GiB.
    const ByteRange small = byte_range(20 * GiB, 23 * GiB, true);
    const std::vector<double> plain = byte_ticks(small, 300.f, 16.f);
    CHECK(byte_tick_labels_fitted(plain) == byte_tick_labels(plain));
    CHECK(byte_tick_labels_fitted(plain).front() == "20.0 GiB");
    // Zero-based labels are unchanged.
    CHECK(byte_tick_labels_fitted(byte_ticks(ByteRange{0, 141.4 * 1.1 * GiB}, 400.f, 16.f)) ==
          std::vector<std::string>{"50 GiB", "100 GiB", "150 GiB"});
    // A flat curve sits mid-plot on a range of 1% of its value; near 0 the range stops at 0 B.
    const ByteRange flat = byte_range(base, base, true);
    CHECK(flat.fraction(base) == Approx(0.5));
    CHECK(flat.span() == Approx(base * 0.01));
    CHECK(byte_range(100, 1000, true).lo == 28);
    CHECK(byte_range(1, 1000, true).lo == 0);
    // Every range: lines inside and apart, a label per line.
    for (double lo : {0.0, 1e3, 5e6, 3 * GiB, base})
        for (double spread : {0.0, 1.0, 4096.0, 10e6, 2 * GiB})
            for (float height : {70.f, 300.f, 900.f}) {
                const ByteRange fitted = byte_range(lo, lo + spread, true);
                const auto lines = byte_ticks(fitted, height, 16.f);
                INFO("lo " << lo << " spread " << spread << " height " << height);
                CHECK(byte_tick_labels_fitted(lines).size() == lines.size());
                for (size_t i = 0; i < lines.size(); ++i) {
                    CHECK(lines[i] >= fitted.lo);
                    CHECK(lines[i] <= fitted.hi);
                    if (i) CHECK((lines[i] - lines[i - 1]) / fitted.span() * height >= 16 - 1e-6);
                }
            }
}

TEST_CASE("a fitted plot spans the columns drawn") {
    Curve curve;
    curve.assign({0, 100, 200, 300}, {5.0, 9.0, 7.0, 1.0});
    CurveColumns cols;
    prepare_curve(curve, {0, 400}, 4, cols);
    const Curve::MinMax all = columns_min_max(cols);
    CHECK(all.min == 1.0);
    CHECK(all.max == 9.0);
    const Curve::MinMax first3 = columns_min_max(cols, 3);   // the last column (value 1) not drawn
    CHECK(first3.min == 5.0);
    CHECK(first3.max == 9.0);
    CHECK(columns_min_max(cols, 0).max == 0);
}

TEST_CASE("where the steps came from is said only when the importer took them from the optimizer") {
    // The importer writes meta steps_from; the viewer says it where the steps are not the profiler's
    // own markers. A trace of step markers with steps_from naming the optimizer's ranges, and the
    // known trace (steps from its markers, no steps_from).
    using fixture::us;
    using mhc::trace::Kernel;
    using mhc::trace::Marker;
    using mhc::trace::MarkerKind;
    const std::string said = "Optimizer.step#SGD.step ranges (no ProfilerStep#N in the trace)";
    for (const std::string& from : {said, std::string("ProfilerStep#N ranges (the profiler's step markers)")}) {
        INFO(from);
        fixture::TempPath db("optsteps.db");
        {
            mhc::trace::Writer writer(db.path);
            writer.set_meta("source", "viewer-test-optimizer");
            writer.set_meta("steps_from", from);
            Kernel kernel;
            kernel.id = 1;
            kernel.name = writer.intern("gemm");
            kernel.t_start = 0;
            kernel.t_end = 50 * us;
            writer.add(kernel);
            writer.add(Marker{1, writer.intern("step 0"), 0, 200 * us, MarkerKind::Step, 0});
            writer.add(Marker{2, writer.intern("step 1"), 200 * us, 600 * us, MarkerKind::Step, 1});
            writer.finish();
        }
        const ViewTrace view = load_view_trace(db.path);
        REQUIRE(view.steps.size() == 2);
        CHECK(step_control(view.steps).enabled);
        if (from == said) {
            CHECK(view.steps_from == said);
            CHECK(steps_origin(view).find("Optimizer.step#SGD.step") != std::string::npos);
        } else {
            CHECK(view.steps_from.empty());
            CHECK(steps_origin(view).empty());
        }
    }
    fixture::TempPath known("known.db");
    fixture::write_known_trace(known.path, false);
    const ViewTrace marked = load_view_trace(known.path);
    REQUIRE(marked.steps.size() == 1);
    CHECK(marked.steps_from.empty());
    CHECK(steps_origin(marked).empty());
}

TEST_CASE("steps from the optimizer's ranges of the public Kineto traces that have no step markers") {
    // TraceLens's MI300X ResNet-18 DDP trace: 10 Optimizer.step#SGD.step ranges, nested in pairs:
    // 5 steps. param's ResNet Kineto trace: 30 ranges, none nested: 30 steps. Each step ends where
    // its optimizer step ends, after the one before.
    for (const auto& [file, count] :
         std::vector<std::pair<std::string, size_t>>{{"kineto/tracelens-mi300x-ddp-resnet18-no-pool-pid1.json.gz", 5},
                                                     {"kineto/param-resnet-kineto.json.gz", 30}}) {
        INFO(file);
        fixture::TempPath db("public-steps.db");
        mhc::trace::import::Options options;
        options.warn = false;
        mhc::trace::import::import_file(std::string(mhc::test::public_datasets()) + "/" + file, db.path, options);
        const ViewTrace view = load_view_trace(db.path);
        CHECK(view.steps.size() == count);
        CHECK(view.steps_from.rfind("Optimizer.step#SGD.step ranges", 0) == 0);
        for (size_t k = 1; k < view.steps.size(); ++k) {
            CHECK(view.steps[k].t0 == view.steps[k - 1].t1);
            CHECK(view.steps[k].t1 > view.steps[k].t0);
        }
    }
}
