// Snapshot segment events as rows of the segments table, pre-recording segments reconstructed,
// allocator settings into meta, and inconsistent segment events refused naming the event.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <algorithm>

#include "mhc/common/error.hpp"
#include "mhc/trace/store.hpp"
#include "pickle_writer.hpp"
#include "util.hpp"

using test::event;
using test::Py;

namespace {

constexpr int64_t MiB = 1 << 20;

Py segment(int64_t addr, int64_t size, bool expandable, int64_t stream = 0) {
    return Py::dict({{"device", 0}, {"address", addr}, {"total_size", size}, {"stream", stream},
                     {"is_expandable", Py::boolean(expandable)}, {"blocks", Py::list({})}});
}

std::vector<mhc::trace::Segment> segments_of(const std::string& db) {
    std::vector<mhc::trace::Segment> v;
    mhc::trace::Reader(db).for_each([&](const mhc::trace::Segment& s) { v.push_back(s); });
    return v;
}

std::string import_error(const Py& snap) {
    test::TempDir dir;
    std::string in = dir.file("bad.pickle"), out = dir.file("bad.db");
    test::write_file(in, snap.pickle());
    try {
        mhc::trace::import::import_file(in, out);
    } catch (const mhc::Error& e) {
        CHECK(e.exit_code() == 2);
        CHECK(dir.entries() == 1);   // nothing written beside the input
        return e.what();
    }
    return "(imported without error)";
}

}  // namespace

TEST_CASE("snapshot: segment events, reconstruction and settings become rows and meta", "[import][segments]") {
    const int64_t A = 0x100000000, B = 0x200000000, C = 0x300000000, X = 0x400000000, Y = 0x500000000,
                  Z = 0x600000000;
    std::vector<Py> evs{
        event("segment_alloc", A, 20 * MiB, 0, 100),   // t = 1 ns: a real cudaMalloc at the trace start
        event("alloc", A, 6 * MiB, 0, 101),
        event("segment_alloc", B, 2 * MiB, 0, 102),
        event("free_completed", A, 6 * MiB, 0, 103),
        event("segment_free", A, 20 * MiB, 0, 104),
        event("segment_free", C, 20 * MiB, 0, 105),          // allocated before recording began
        event("segment_map", X, 40 * MiB, 0, 106),           // expandable: two 20 MiB pages
        event("segment_unmap", X + 20 * MiB, 20 * MiB, 0, 107),   // the second page goes
        event("segment_unmap", Y, 20 * MiB, 0, 108),          // a page mapped before recording
    };
    Py settings = Py::dict({{"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True,max_split_size_mb:128"},
                            {"max_split_size", int64_t{128} * MiB},
                            {"garbage_collection_threshold", 0.6},
                            {"expandable_segments", Py::boolean(true)},
                            {"roundup_power2_divisions", Py::dict({{"1", 0}, {"2", 4}, {"4", 0}})}});
    Py snap = Py::dict({{"device_traces", Py::list({Py::list(evs)})},
                        {"segments", Py::list({segment(A, 20 * MiB, false), segment(B, 2 * MiB, false),
                                               segment(X, 20 * MiB, true), segment(Z, 4 * MiB, false)})},
                        {"allocator_settings", settings}});
    test::TempDir dir;
    std::string in = dir.file("s.pickle"), out = dir.file("s.db");
    test::write_file(in, snap.pickle());
    mhc::trace::import::import_file(in, out);
    auto t = mhc::trace::load_trace(out);
    CHECK(t.meta.at("allocator.conf") ==
          "expandable_segments:True,max_split_size_mb:128,roundup_power2_divisions:[1:0,2:4,4:0],"
          "garbage_collection_threshold:0.6");
    CHECK(t.meta.at("allocator.PYTORCH_CUDA_ALLOC_CONF") == "expandable_segments:True,max_split_size_mb:128");
    CHECK(t.meta.at("segments.reconstructed") == "4");

    auto s = segments_of(out);
    REQUIRE(s.size() == 8);
    struct Want { int64_t addr, bytes, t_alloc, t_free; bool exp, recon; };
    const int64_t none = mhc::trace::kNoTime;
    // By t_alloc, then address. Times: (time_us - 100) x 1000 + 1 ns (0: before recording).
    const Want want[] = {
        {C, 20 * MiB, 0, 5001, false, true},       // a free the trace cannot place: alive from 0
        {Y, 20 * MiB, 0, 8001, true, true},        // an unmap of a page mapped before recording
        {Z, 4 * MiB, 0, none, false, true},        // end state only: alive throughout
        {A, 20 * MiB, 1, 4001, false, false},      // segment_alloc at the first event, freed at event 4
        {B, 2 * MiB, 2001, none, false, false},
        {A, 20 * MiB, 4001, none, false, true},    // end state at a freed place: from that free on
        {X, 20 * MiB, 6001, none, true, false},    // the page that stays mapped
        {X + 20 * MiB, 20 * MiB, 6001, 7001, true, false},   // the page unmapped at event 7
    };
    for (size_t i = 0; i < 8; ++i) {
        INFO("row " << i + 1);
        CHECK(s[i].id == static_cast<int64_t>(i) + 1);
        CHECK(s[i].address == want[i].addr);
        CHECK(s[i].bytes == want[i].bytes);
        CHECK(s[i].t_alloc == want[i].t_alloc);
        CHECK(s[i].t_free == want[i].t_free);
        CHECK(s[i].expandable == want[i].exp);
        CHECK(s[i].reconstructed == want[i].recon);
        CHECK(s[i].device == 0);
    }
}

TEST_CASE("snapshot: inconsistent segment events are refused naming the event", "[import][segments]") {
    const int64_t A = 0x100000000;
    auto snap = [](std::vector<Py> evs) { return Py::dict({{"device_traces", Py::list({Py::list(std::move(evs))})}}); };
    // Freed twice: the second free is of an unknown segment.
    std::string e = import_error(snap({event("segment_alloc", A, 2 * MiB), event("alloc", A, 512),
                                       event("segment_free", A, 2 * MiB), event("segment_free", A, 2 * MiB)}));
    CHECK(e.find("device_traces[0][3] (segment_free): free of an unknown segment") != std::string::npos);
    // Overlapping live segments.
    e = import_error(snap({event("segment_alloc", A, 20 * MiB), event("segment_alloc", A + 2 * MiB, 2 * MiB)}));
    CHECK(e.find("device_traces[0][1] (segment_alloc): 2097152 bytes at 0x100200000 overlap the live segment at "
                 "0x100000000 of 20971520 bytes") != std::string::npos);
    // A free inside a live segment, not at its start.
    e = import_error(snap({event("segment_alloc", A, 20 * MiB), event("segment_free", A + 2 * MiB, 2 * MiB)}));
    CHECK(e.find("device_traces[0][1] (segment_free): free of an unknown segment: none starts at 0x100200000") !=
          std::string::npos);
    // A free of another size than the segment's.
    e = import_error(snap({event("segment_alloc", A, 20 * MiB), event("segment_free", A, 2 * MiB)}));
    CHECK(e.find("device_traces[0][1] (segment_free): frees 2097152 bytes at 0x100000000, but the live segment "
                 "there holds 20971520") != std::string::npos);
    // An unmap of cudaMalloc'd memory.
    e = import_error(snap({event("segment_alloc", A, 20 * MiB), event("segment_unmap", A, 20 * MiB)}));
    CHECK(e.find("device_traces[0][1] (segment_unmap): unmaps part of the cudaMalloc'd segment") != std::string::npos);
}

TEST_CASE("mhc import: a double segment free is one line and exit 2", "[import][segments][cli]") {
    test::TempDir dir;
    std::string in = dir.file("double.pickle"), out = dir.file("double.db");
    const int64_t A = 0x100000000;
    test::write_file(in, Py::dict({{"device_traces", Py::list({Py::list({event("segment_alloc", A, 2 * MiB),
                                                                          event("segment_free", A, 2 * MiB),
                                                                          event("segment_free", A, 2 * MiB)})})}})
                             .pickle());
    std::string err;
    CHECK(test::run_mhc("import " + in + " -o " + out, &err) == 2);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHECK(err.find(in + ": device_traces[0][2] (segment_free): free of an unknown segment") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(out));
}

TEST_CASE("snapshot: the public snapshots' segments", "[import][segments][public]") {
    test::TempDir dir;
    SECTION("stanford-cs336: 216 segments held before recording, settings recorded") {
        std::string out = dir.file("cs336.db");
        mhc::trace::import::import_file(test::pub("torch-snapshot/stanford-cs336-training-step.pickle"), out);
        auto s = segments_of(out);
        REQUIRE(s.size() == 216);
        int64_t bytes = 0;
        for (const auto& g : s) {
            CHECK(g.reconstructed);
            CHECK_FALSE(g.expandable);
            CHECK(g.t_alloc == 0);
            CHECK(g.t_free == mhc::trace::kNoTime);
            bytes += g.bytes;
        }
        CHECK(bytes == 14180941824);   // sum of the end state's total_size
        auto t = mhc::trace::load_trace(out);
        CHECK(t.meta.at("allocator.conf") == "expandable_segments:False");
    }
    SECTION("mosaic (synthetic): its 5 expandable segments cannot hold its blocks: imported without them") {
        std::string out = dir.file("mosaic.db");
        auto r = mhc::trace::import::import_file(test::pub("torch-snapshot/mosaic-synthetic.pickle"), out);
        CHECK(segments_of(out).empty());
        auto t = mhc::trace::load_trace(out);
        CHECK(t.meta.at("segments") ==
              "none: 5 rows dropped: 520 of 537 allocations lie in no segment alive when they were made "
              "(a synthetic or damaged snapshot)");
        CHECK(t.meta.count("segments.hold_allocations") == 0);
        REQUIRE(r.warnings.size() == 1);
        CHECK(r.warnings[0].find("imported without them") != std::string::npos);
        CHECK(t.meta.count("allocator.conf") == 0);
    }
}

TEST_CASE("what-if: expandable segments avoid a fragmentation OOM, and mhc allocator refuses bad input", "[import][segments][cli]") {
    // bench/allocator/whatif_fragmentation.py's sequence: x, y 6 MiB in one 20 MiB segment, x
    // freed, z 12 MiB (its own segment), w 10 MiB: at 40 MiB, with nothing evictable (a 4-byte
    // host buffer), cudaMalloc'd segments run out with 18 MiB in use; expandable ones do not.
    const int64_t X = 0x7f0000000000, Y = X + 6 * MiB, Z = 0x7f0001400000, W = 0x7f0002000000;
    std::vector<Py> evs{event("segment_alloc", X, 20 * MiB, 0, 1), event("alloc", X, 6 * MiB, 0, 1),
                        event("alloc", Y, 6 * MiB, 0, 2), event("free_completed", X, 6 * MiB, 0, 3),
                        event("segment_alloc", Z, 12 * MiB, 0, 4), event("alloc", Z, 12 * MiB, 0, 4),
                        event("segment_alloc", W, 10 * MiB, 0, 5), event("alloc", W, 10 * MiB, 0, 5),
                        event("free_completed", W, 10 * MiB, 0, 6), event("free_completed", Y, 6 * MiB, 0, 7),
                        event("free_completed", Z, 12 * MiB, 0, 8)};
    Py settings = Py::dict({{"expandable_segments", Py::boolean(false)}, {"max_split_size", -1},
                            {"garbage_collection_threshold", 0.0}});
    test::TempDir dir;
    std::string in = dir.file("frag.pickle"), db = dir.file("frag.db");
    test::write_file(in, Py::dict({{"device_traces", Py::list({Py::list(evs)})}, {"allocator_settings", settings}}).pickle());
    REQUIRE(test::run_mhc("-q import " + in + " -o " + db) == 0);
    const std::string sim = "simulate " + db + " --allocator caching --capacity 40MiB --cpu-buffer-ratio 0.0000001 --no-store";
    CHECK(test::run_mhc(sim) == 3);
    CHECK(test::run_mhc(sim + " --allocator-conf expandable_segments:True") == 0);
    std::string err;
    CHECK(test::run_mhc(sim + " --allocator-conf expandable_segments:yes", &err) == 2);
    CHECK(err == "mhc: --allocator-conf: 'expandable_segments:yes': 'yes' is not True or False; expandable_segments "
                 "takes True or False\n");
    CHECK(test::run_mhc("simulate " + db + " --allocator ideal --capacity 40MiB --allocator-conf expandable_segments:True",
                        &err) == 2);
    CHECK(err.find("--allocator-conf applies to the caching allocator model") != std::string::npos);

    CHECK(test::run_mhc("allocator " + db) == 0);
    CHECK(test::run_mhc("allocator " + db + " --allocator-conf garbage_collection:0.5", &err) == 2);
    CHECK(err.find("--allocator-conf: 'garbage_collection:0.5': garbage_collection is not an option") != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    // A trace without segments (an Nsight Systems export).
    std::string nsys = dir.file("nsys.db");
    REQUIRE(test::run_mhc("-q import " + test::pub("nsys/con_kernel.sqlite") + " -o " + nsys) == 0);
    CHECK(test::run_mhc("allocator " + nsys, &err) == 2);
    CHECK(err.find(nsys + ": no segments recorded") != std::string::npos);
}

TEST_CASE("segments doubled and one freed before it was allocated: check and allocator refuse, naming rows",
          "[import][segments][cli]") {
    // The real CS336 step's 216 segments, each written twice, and one copy freed before it was
    // allocated: a recorded reserved peak twice the real one (26.41 GiB against 13.21 GiB).
    test::TempDir dir;
    std::string db = dir.file("cs336.db");
    mhc::trace::import::import_file(test::pub("torch-snapshot/stanford-cs336-training-step.pickle"), db);
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h,
                         "INSERT INTO segments SELECT id + 1000, device, stream, address, bytes, t_alloc, t_free, "
                         "expandable, reconstructed FROM segments; "
                         "UPDATE segments SET t_alloc = 500, t_free = 400 WHERE id = 1001;",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
    int rc = -1;
    std::string out = test::mhc_stdout("check " + db, &rc);
    CHECK(rc == 2);
    CHECK(out.find("segments row 1001: freed at 400 ns, before it was allocated at 500 ns [free-before-alloc]") !=
          std::string::npos);
    CHECK(out.find("segments row 1002: ") != std::string::npos);   // each duplicate overlaps its original
    CHECK(out.find("[overlap]") != std::string::npos);
    std::string err;
    CHECK(test::run_mhc("allocator " + db, &err) == 2);
    CHECK(err.find("segments row 1001") != std::string::npos);
    CHECK(std::count(err.begin(), err.end(), '\n') == 1);   // one line
}
