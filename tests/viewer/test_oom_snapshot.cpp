// "At the OOM" on a real out-of-memory snapshot: FlexGen's, taken by its out-of-memory handler
// (tests/data/public/torch-snapshot/flexgen-oom-snapshot.pickle, SOURCES.md). What the viewer groups
// at a simulated out-of-memory of it is checked against the snapshot's own end state, read here from
// the pickle with the plain pickle reader, sharing nothing with the snapshot importer: its active
// blocks, their sizes and the first frame of each block's history, grouped.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "fixtures.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/import/import.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/viewer/data.hpp"
#include "mhc/viewer/stats.hpp"

namespace fs = std::filesystem;
using mhc::trace::import::PickleDoc;

namespace {

struct Group {
    size_t count = 0;
    int64_t bytes = 0, largest = 0;
};

std::string basename_of(std::string_view path) {
    const size_t slash = path.find_last_of("/\\");
    return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The snapshot's end state as the file says it: every active_allocated block of every segment,
// grouped by the innermost frame of its history ("allocate (pytorch_backend.py:190)"); also the
// segments' allocated_size and the snapshot entry's size.
struct EndState {
    std::map<std::string, Group> groups;
    int64_t blocks = 0, bytes = 0, allocated_size = 0, snapshot_size = 0, segments = 0;
};
EndState read_end_state(const std::string& data) {
    const PickleDoc doc(data, "flexgen-oom-snapshot.pickle");
    EndState out;
    for (PickleDoc::Id segment : doc.items(*doc.get(doc.root(), "segments"))) {
        ++out.segments;
        out.allocated_size += doc.as_int(*doc.get(segment, "allocated_size"));
        for (PickleDoc::Id block : doc.items(*doc.get(segment, "blocks"))) {
            if (doc.as_str(*doc.get(block, "state")) != "active_allocated") continue;
            const int64_t size = doc.as_int(*doc.get(block, "size"));
            const PickleDoc::Id first = doc.items(*doc.get(block, "history"))[0];
            const PickleDoc::Id frame = doc.items(*doc.get(first, "frames"))[0];
            const std::string label = std::string(doc.as_str(*doc.get(frame, "name"))) + " (" +
                                      basename_of(doc.as_str(*doc.get(frame, "filename"))) + ":" +
                                      std::to_string(doc.as_int(*doc.get(frame, "line"))) + ")";
            Group& group = out.groups[label];
            ++group.count;
            group.bytes += size;
            group.largest = std::max(group.largest, size);
            ++out.blocks;
            out.bytes += size;
        }
    }
    const PickleDoc::Id entry = doc.items(doc.items(*doc.get(doc.root(), "device_traces"))[0])[0];
    out.snapshot_size = doc.as_int(*doc.get(entry, "size"));
    return out;
}

}   // namespace

TEST_CASE("At the OOM on FlexGen's real out-of-memory snapshot: the groups are the snapshot's own blocks") {
    const std::string in = std::string(mhc::test::public_datasets()) + "/torch-snapshot/flexgen-oom-snapshot.pickle";
    std::ifstream file(in, std::ios::binary);
    std::stringstream bytes;
    bytes << file.rdbuf();
    const std::string data = bytes.str();
    const EndState state = read_end_state(data);
    // What the file says (also read with Python's pickle, 2026-12-05): 176 segments holding
    // 11,840,159,744 B allocated, the same as its one trace entry (a "snapshot", no "oom" entry: the
    // file has no requested size or device_free of the failed request to compare with), 460 active
    // blocks, every one first allocated at FlexGen's allocate (pytorch_backend.py:190).
    REQUIRE(state.segments == 176);
    CHECK(state.allocated_size == 11840159744);
    CHECK(state.snapshot_size == state.allocated_size);
    CHECK(state.bytes == state.allocated_size);
    CHECK(state.blocks == 460);
    REQUIRE(state.groups.size() == 1);

    // Imported as mhc import does, simulated as mhc simulate --capacity 300MiB --policy lru would: the
    // 392.75 MiB block (the largest, 411,828,224 B) cannot be placed; everything placed before it was
    // swapped out to the host.
    fixture::TempPath db("flexgen-oom.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(in, db.path, opt);
    mhc::sim::Config config;
    config.capacity = mhc::sim::parse_capacity("300MiB");
    config.allocator = "caching";
    const mhc::sim::Result result = mhc::sim::simulate(mhc::trace::load_trace(db.path), config);
    mhc::trace::Run run = mhc::sim::to_run(result);
    run.name = mhc::sim::run_name(config);
    REQUIRE(run.status == mhc::trace::RunStatus::Oom);
    mhc::trace::add_run(db.path, run);

    const mhc::viewer::ViewTrace view = mhc::viewer::load_view_trace(db.path);
    const mhc::viewer::ViewRun oom_run = mhc::viewer::load_view_run(view, 1);
    const mhc::viewer::RunOom oom = mhc::viewer::live_at_run_oom(view, oom_run);
    REQUIRE(oom.found);
    REQUIRE(oom.needed >= 0);
    const auto& needed = oom.live.rows[static_cast<size_t>(oom.needed)];
    CHECK(view.allocations.bytes[needed.row] == 411828224);
    const auto groups = mhc::viewer::group_live_by_label(view, oom.live, &oom);
    // The snapshot's blocks in the order every reader replays them (those of one instant by id): the
    // run made the ones before the block it could not place, and stopped there.
    int64_t made_before = 0, count_before = 0;
    const int64_t needed_id = view.allocations.id[needed.row];
    for (size_t i = 0; i < view.allocations.size(); ++i)
        if (view.allocations.id[i] < needed_id) {
            made_before += view.allocations.bytes[i];
            ++count_before;
        }
    // Those, in the snapshot's one group, and the one it could not place.
    REQUIRE(groups.size() == state.groups.size());
    const auto& [label, want] = *state.groups.begin();
    CHECK(groups[0].name == label);
    CHECK(groups[0].count == static_cast<size_t>(count_before) + 1);
    CHECK(groups[0].bytes == made_before + 411828224);
    CHECK(groups[0].largest == want.largest);
    CHECK(groups[0].needed);
    CHECK(groups[0].needed_bytes == 411828224);
    // Where the policy had put them: none on the device (0 B in use, as mhc simulate said: it swapped
    // out every block it made, 10.62 GiB), the rest on the host. Before, the 287 blocks the run never
    // reached read as on the device (18.9 MiB).
    CHECK(groups[0].on_device == 0);
    CHECK(groups[0].on_host == made_before);
    CHECK(oom.live.on_device == 0);
    // The import kept every block of the end state (whatever the run reached).
    int64_t imported = 0;
    for (int64_t size : view.allocations.bytes) imported += size;
    CHECK(imported == want.bytes);
    CHECK(static_cast<int64_t>(view.allocations.size()) == state.blocks);
}
