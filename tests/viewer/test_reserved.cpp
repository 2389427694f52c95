// The memory view's reserved curves, computed in the viewer core (on a worker in the window):
// the recorded segments' bytes and the caching allocator model's, and what happens when the
// segments cannot be read (an error naming the file and row, kept by the job for the view).
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <stdexcept>

#include "fixtures.hpp"
#include "mhc/common/error.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/job.hpp"
#include "mhc/viewer/reserved.hpp"

using fixture::MiB;
using fixture::us;
using mhc::viewer::Job;
using mhc::viewer::pool_name;
using mhc::viewer::reserved_curves;
using mhc::viewer::ReservedCurves;

TEST_CASE("reserved curves: the recorded segments over time and the caching model's") {
    fixture::TempPath db("segments.db");
    fixture::write_segments_trace(db.path);
    ReservedCurves curves = reserved_curves(db.path);
    CHECK(curves.model_error.empty());
    // Recorded: 2 GiB held from the start, 2.5 GiB while the empty segment lives.
    CHECK(curves.recorded.value_at(100 * us) == 2048.0 * MiB);
    CHECK(curves.recorded.value_at(300 * us) == 2560.0 * MiB);
    CHECK(curves.recorded.value_at(700 * us) == 2048.0 * MiB);
    CHECK(curves.recorded.peak() == 2560.0 * MiB);
    CHECK(curves.recorded.peak_time() == 200 * us);
    // The model places the allocation in the warm-started 2 GiB segment and asks for no more.
    REQUIRE(!curves.model.empty());
    CHECK(curves.model_device == 0);
    CHECK(curves.model.peak() == 2048.0 * MiB);
    CHECK(curves.model.value_at(300 * us) == 2048.0 * MiB);
}

TEST_CASE("reserved curves: segments that hold less than the allocations at their peak are not drawn, and said") {
    // An old H200 --torch recording: 432 KiB of static segments while its pool allocations (outside
    // them) peak at 556 MiB; the violet line lay at the plot's floor under the live bytes.
    using mhc::viewer::Curve;
    using mhc::viewer::reserved_mismatch;
    fixture::TempPath db("segments-held.db");
    fixture::write_segments_trace(db.path);
    const mhc::viewer::ViewTrace view = mhc::viewer::load_view_trace(db.path);
    CHECK(reserved_mismatch(reserved_curves(db.path).recorded, view.live).empty());             // they hold them
    const Curve live = Curve::from_intervals({100, 300}, {900, 800}, {400 * MiB, 156 * MiB});   // 556 MiB at 300
    const Curve statics = Curve::from_intervals({0}, {1000}, {int64_t{442368}});                // 432 KiB
    CHECK(reserved_mismatch(statics, live) ==
          "recorded reserved not shown: the trace's segments hold 432.00 KiB at the live bytes' peak of "
          "556.00 MiB, so they do not hold its allocations");
    const Curve held = Curve::from_intervals({0}, {1000}, {556 * MiB});   // exactly the peak: drawn
    CHECK(reserved_mismatch(held, live).empty());
    CHECK(reserved_mismatch(Curve{}, live).empty());   // no segments: nothing to say
}

TEST_CASE("reserved curves: none for a trace without segments") {
    fixture::TempPath db("imported.db");
    fixture::write_imported_trace(db.path);
    ReservedCurves curves = reserved_curves(db.path);
    CHECK(curves.recorded.empty());
    CHECK(curves.model.empty());
    CHECK(curves.model_error.empty());
}

TEST_CASE("reserved curves: a broken segments row is an error naming the file and row, kept by the job") {
    fixture::TempPath db("broken-segments.db");
    fixture::write_segments_trace(db.path);
    sqlite3* handle = nullptr;
    REQUIRE(sqlite3_open(db.path.c_str(), &handle) == SQLITE_OK);
    REQUIRE(sqlite3_exec(handle, "UPDATE segments SET bytes = 'lots' WHERE id = 2", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(handle);
    std::string what;
    try {
        reserved_curves(db.path);
    } catch (const mhc::Error& e) {
        what = e.what();
    }
    CHECK_THAT(what, Catch::Contains(db.path) && Catch::Contains("segments"));
    // On the worker: the same message, for the view to show; no value.
    Job<ReservedCurves> job([&] { return reserved_curves(db.path); });
    job.wait();
    CHECK(job.done());
    CHECK(job.value() == nullptr);
    CHECK(job.error() == what);
}

TEST_CASE("jobs: a value once done, an exception's message kept") {
    Job<int> ok([] { return 42; });
    ok.wait();
    REQUIRE(ok.value());
    CHECK(*ok.value() == 42);
    CHECK(ok.error().empty());
    Job<int> bad([]() -> int { throw std::runtime_error("disk on fire"); });
    while (!bad.done()) {}
    CHECK(bad.value() == nullptr);
    CHECK(bad.error() == "disk on fire");
}

TEST_CASE("reserved curves: the live bytes in private pools, by the simulator's rule") {
    // fixtures.hpp's pools trace. In the pool: 256 MiB at 250 us, 384 MiB at 350 us, 256 MiB at
    // 500 us, none at 700 us.
    fixture::TempPath db("pools.db");
    fixture::write_pools_trace(db.path);
    ReservedCurves curves = reserved_curves(db.path, 0);
    CHECK(curves.pool_error.empty());
    CHECK(curves.pools == 1);
    REQUIRE(!curves.pool_live.empty());
    CHECK(curves.pool_live.value_at(250 * us) == 256.0 * MiB);
    CHECK(curves.pool_live.value_at(350 * us) == 384.0 * MiB);
    CHECK(curves.pool_live.value_at(500 * us) == 256.0 * MiB);
    CHECK(curves.pool_live.value_at(700 * us) == 0.0);
    CHECK(curves.pool_live.peak() == 384.0 * MiB);
    // Another device has no pools; a trace without the meta entry neither.
    CHECK(reserved_curves(db.path, 1).pool_live.empty());
    fixture::TempPath plain("segments.db");
    fixture::write_segments_trace(plain.path);
    CHECK(reserved_curves(plain.path).pools == 0);
}

TEST_CASE("reserved curves: the reserved bytes by pool, where the device has private pools") {
    // fixtures.hpp's pools trace: segment 1 (2 GiB at 0x1000, held from 0) lies in no private pool,
    // segment 2 (512 MiB at 0x100000000, held from 100 us) in private pool (0, 1). So the default
    // pool reserves 2 GiB throughout, pool 1 nothing before 100 us and 512 MiB from then; their sum
    // is the recorded reserved curve. Before, the view drew the reserved bytes of all pools as one line.
    fixture::TempPath db("pools.db");
    fixture::write_pools_trace(db.path);
    const ReservedCurves curves = reserved_curves(db.path, 0);
    REQUIRE(curves.pool_reserved.size() == 1);
    // Named by its id in the snapshot, (0, 1): a MemPool the program made (it read "pool 1"), and by
    // the label of its allocations (2 and 3, both at kFrameA).
    CHECK(curves.pool_reserved[0].name == "MemPool (0, 1)");
    CHECK(curves.pool_reserved[0].holds == fixture::kFrameA);
    CHECK(curves.default_name == "default pool");
    CHECK(curves.pool_reserved[0].reserved.value_at(50 * us) == 0.0);
    CHECK(curves.pool_reserved[0].reserved.value_at(100 * us) == 512.0 * MiB);
    CHECK(curves.pool_reserved[0].reserved.value_at(900 * us) == 512.0 * MiB);
    CHECK(curves.default_reserved.value_at(50 * us) == 2048.0 * MiB);
    CHECK(curves.default_reserved.value_at(900 * us) == 2048.0 * MiB);
    for (int64_t when : {50 * us, 100 * us, 500 * us})
        CHECK(curves.default_reserved.value_at(when) + curves.pool_reserved[0].reserved.value_at(when) ==
              curves.recorded.value_at(when));
    // Without private pools (another device, a trace without the meta entry): no lines by pool.
    CHECK(reserved_curves(db.path, 1).pool_reserved.empty());
    fixture::TempPath plain("segments.db");
    fixture::write_segments_trace(plain.path);
    CHECK(reserved_curves(plain.path).pool_reserved.empty());
    CHECK(reserved_curves(plain.path).default_reserved.empty());
}

TEST_CASE("reserved curves: each private pool named by its snapshot id and what its allocations are") {
    // fixtures.hpp's pools trace with a CUDA graph's pool beside the MemPool: meta names (0, 1) first,
    // then (1, 0). PyTorch's MempoolId_t: a graph's pool is (n, 0), a torch.cuda.MemPool's (0, n).
    // The graph's pool holds allocation 4 (kFrameB) in its 256 MiB segment from 150 us.
    fixture::TempPath db("two_pools.db");
    fixture::write_pools_trace(db.path, true);
    const ReservedCurves curves = reserved_curves(db.path, 0);
    REQUIRE(curves.pool_reserved.size() == 2);
    CHECK(curves.pool_reserved[0].name == "MemPool (0, 1)");
    CHECK(curves.pool_reserved[1].name == "CUDA graph pool (1, 0)");
    CHECK(curves.pool_reserved[1].holds == fixture::kFrameB);
    CHECK(curves.pool_reserved[1].reserved.value_at(100 * us) == 0.0);
    CHECK(curves.pool_reserved[1].reserved.value_at(150 * us) == 256.0 * MiB);
    CHECK(curves.pools == 2);
    // Each pool's tooltip says what kind it is, its rows and what its bytes were allocated at.
    CHECK(curves.pool_reserved[1].detail.find("a CUDA graph's private pool") != std::string::npos);
    CHECK(curves.pool_reserved[1].detail.find("1 segment row") != std::string::npos);
    CHECK(curves.pool_reserved[1].detail.find("100% of its allocated bytes were allocated at optim.py:88 step") !=
          std::string::npos);
    CHECK(curves.pool_reserved[0].detail.find("torch.cuda.MemPool") != std::string::npos);
    CHECK(curves.default_detail.find("1 segment row on 1 stream") != std::string::npos);
    // The default pool, the three kinds, and an id that is neither.
    CHECK(pool_name(0, 0) == "default pool");
    CHECK(pool_name(3, 0) == "CUDA graph pool (3, 0)");
    CHECK(pool_name(0, 2) == "MemPool (0, 2)");
    CHECK(pool_name(2, 5) == "pool (2, 5)");
}
