// The columnar cache kept inside a trace file (trace/cache.hpp): over generated traces it gives
// the same columns and the same runs as the rows, it is dropped when a row of the trace changes
// (and kept when runs are stored), and a damaged, stale or foreign entry is not used.
#include <sqlite3.h>
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <sstream>

#include "helpers.hpp"
#include "mhc/sim/result.hpp"
#include "mhc/sim/simulate.hpp"
#include "mhc/test/paths.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#if defined(MHC_HAVE_DATASETS)
#include "mhc/datasets/generate.hpp"
#endif
#if defined(MHC_HAVE_IMPORT)
#include "mhc/trace/import/import.hpp"
#endif

using namespace mhc;

namespace {

void sql(const std::string& path, const std::string& statement) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    char* err = nullptr;
    const int rc = sqlite3_exec(db, statement.c_str(), nullptr, nullptr, &err);
    INFO(statement << ": " << (err ? err : ""));
    sqlite3_free(err);
    sqlite3_close(db);
    REQUIRE(rc == SQLITE_OK);
}

int64_t cache_rows(const std::string& path) {
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_stmt* s = nullptr;
    int64_t n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM trace_cache", -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    return n;   // -1: no table
}

void same_columns(const trace::TraceData& a, const trace::TraceData& b) {
    CHECK(a.fingerprint == b.fingerprint);
    CHECK(a.meta == b.meta);
    CHECK(a.strings == b.strings);
    const auto& x = a.allocations;
    const auto& y = b.allocations;
    CHECK(x.id == y.id); CHECK(x.address == y.address); CHECK(x.bytes == y.bytes); CHECK(x.t_alloc == y.t_alloc);
    CHECK(x.t_free == y.t_free); CHECK(x.stream == y.stream); CHECK(x.label == y.label); CHECK(x.device == y.device);
    CHECK(x.category == y.category); CHECK(x.requested_bytes == y.requested_bytes);
    const auto& k = a.kernels;
    const auto& l = b.kernels;
    CHECK(k.id == l.id); CHECK(k.stream == l.stream); CHECK(k.name == l.name); CHECK(k.t_start == l.t_start);
    CHECK(k.t_end == l.t_end); CHECK(k.correlation == l.correlation); CHECK(k.device == l.device);
    CHECK(k.step == l.step); CHECK(k.access_begin == l.access_begin);
    CHECK(a.accesses.allocation == b.accesses.allocation); CHECK(a.accesses.mode == b.accesses.mode);
    CHECK(a.copies.id == b.copies.id); CHECK(a.copies.t_start == b.copies.t_start); CHECK(a.copies.kind == b.copies.kind);
    CHECK(a.copies.bytes == b.copies.bytes); CHECK(a.copies.device == b.copies.device);
    CHECK(a.markers.id == b.markers.id); CHECK(a.markers.t_start == b.markers.t_start);
    CHECK(a.markers.t_end == b.markers.t_end); CHECK(a.markers.kind == b.markers.kind);
    CHECK(a.markers.index == b.markers.index); CHECK(a.markers.name == b.markers.name);
    CHECK(a.segments.size() == b.segments.size());
    CHECK(a.dangling_accesses.size() == b.dangling_accesses.size());
    for (int64_t id : {int64_t(1), int64_t(x.size() / 2), int64_t(x.size())})
        CHECK(a.allocation_at(id) == b.allocation_at(id));
}

// Runs of several policies, as JSON with their events: every array of the prepared form is read
// by one of them.
std::vector<std::string> runs(const sim::Prepared& p) {
    std::vector<std::string> out;
    for (auto [ev, pf] : std::vector<std::pair<std::string, std::string>>{
             {"lru", "none"}, {"belady", "lookahead:8"}, {"dtr", "periodic"}, {"cost_aware", "capuchin"}, {"largest", "forecast"}})
        for (double f : {0.6, 0.8}) {
            sim::Config c;
            c.eviction = ev;
            c.prefetch = pf;
            c.capacity.fraction = f;
            std::istringstream json(sim::to_json(sim::simulate(p, c)));
            std::string same;
            for (std::string line; std::getline(json, line);)
                if (line.find("\"sim_seconds\"") == std::string::npos) same += line + "\n";   // its wall time
            out.push_back(same);
        }
    out.push_back(std::to_string(sim::baseline_peak(p, "caching")) + " " + std::to_string(sim::device_of(p)) + " " +
                  std::to_string(sim::assumed_accesses(p)));
    for (const auto& w : sim::trace_warnings(p)) out.push_back(w);
    return out;
}

struct Env {
    std::string name, old;
    bool had;
    Env(const char* n, const char* v) : name(n), had(std::getenv(n) != nullptr) {
        if (had) old = std::getenv(n);
        setenv(n, v, 1);
    }
    ~Env() { had ? (void)setenv(name.c_str(), old.c_str(), 1) : (void)unsetenv(name.c_str()); }
};

// The same trace from its rows (cache off) and from the cache (written by the first
// prepare_cached), with the same runs.
void check_same_as_rows(const std::string& path) {
    trace::TraceData slow;
    std::vector<std::string> want;
    {
        Env off("MHC_TRACE_CACHE", "0");
        slow = trace::load_trace(path);
        CHECK_FALSE(slow.from_cache);
        want = runs(*sim::prepare_cached(slow));
        CHECK(cache_rows(path) == -1);   // off: nothing written
    }
    {
        trace::TraceData first = trace::load_trace(path);
        CHECK_FALSE(first.from_cache);
        auto p = sim::prepare_cached(first);
        CHECK(runs(*p) == want);   // prepared
        CHECK(cache_rows(path) == -1);
        sim::keep_prepared(*p, 0);   // and written
        CHECK(cache_rows(path) > 0);
    }
    trace::TraceData fast = trace::load_trace(path);
    CHECK(fast.from_cache);
    same_columns(fast, slow);
    CHECK(runs(*sim::prepare_cached(fast)) == want);   // read back
}

}  // namespace

TEST_CASE("the cache gives the rows' columns and the same runs over generated traces", "[sim][cache]") {
    // Hand-built: host and device allocations, accesses on some kernels only, one never freed.
    const std::string hand = simtest::temp_path("cache-hand.db");
    simtest::write(hand, {{4 * simtest::MiB, 0, 50 * simtest::ms}, {8 * simtest::MiB, 5 * simtest::ms, 30 * simtest::ms},
                          {2 * simtest::MiB, 12 * simtest::ms, trace::kNoTime}, {6 * simtest::MiB, 20 * simtest::ms, 60 * simtest::ms}},
                   {{1 * simtest::ms, 4 * simtest::ms, {{0, 'w'}}, 0},
                    {6 * simtest::ms, 9 * simtest::ms, {{0, 'r'}, {1, 'w'}}, 0},
                    {13 * simtest::ms, 15 * simtest::ms, {{1, 'x'}, {2, 'w'}}, 1},
                    {21 * simtest::ms, 25 * simtest::ms, {{3, 'w'}, {0, 'r'}}, 1},
                    {31 * simtest::ms, 40 * simtest::ms, {}, 1}});
    check_same_as_rows(hand);
    std::filesystem::remove(hand);
#if defined(MHC_HAVE_DATASETS)
    for (std::string preset : {"gpt2-small", "mhc-27b"}) {
        INFO(preset);
        auto cfg = datasets::preset(preset);
        cfg.steps = 2;
        cfg.layers = 4;   // a multiple of every preset's pipeline stages
        const std::string path = simtest::temp_path("cache-" + preset + ".db");
        datasets::generate_file(cfg, path);
        check_same_as_rows(path);
        std::filesystem::remove(path);
    }
#endif
}

#if defined(MHC_HAVE_IMPORT)
TEST_CASE("the cache keeps each allocation's private pool (a snapshot's torch.cuda.MemPool)", "[sim][cache][pools]") {
    // slime's MemPool snapshot: 800 of its allocations in the pool. The prepared form read back
    // gives the same runs and the caching peak with the pool (38,780,534,784 B, as recorded), not
    // the one-pool figure (36,821,794,816 B) an entry written before pools held: that entry lacks
    // the array alloc_pool and is not used.
    const std::string path = simtest::temp_path("cache-slime.db");
    trace::import::import_file(std::string(mhc::test::public_datasets()) + "/torch-snapshot/slime-megatron-mempool-device3.pickle.gz", path);
    check_same_as_rows(path);
    const trace::TraceData t = trace::load_trace(path);
    const auto p = sim::prepare_cached(t);
    CHECK(t.from_cache);
    CHECK(sim::baseline_peak(*p, "caching") == 38780534784);
    std::filesystem::remove(path);
}
#endif

TEST_CASE("the cache is kept when runs are stored and dropped when a row of the trace changes", "[sim][cache]") {
    const std::string path = simtest::temp_path("cache-change.db");
    simtest::write(path, {{4 * simtest::MiB, 0, 50 * simtest::ms}, {8 * simtest::MiB, 5 * simtest::ms, 30 * simtest::ms}},
                   {{1 * simtest::ms, 4 * simtest::ms, {{0, 'w'}}}, {6 * simtest::ms, 9 * simtest::ms, {{0, 'r'}, {1, 'w'}}}});
    {
        auto t = trace::load_trace(path);
        auto p = sim::prepare_cached(t);
        sim::Config c;
        c.capacity.fraction = 0.7;
        trace::add_runs(path, {sim::to_run(sim::simulate(*p, c))}, "", t.fingerprint);   // a run: the trace is the same
        sim::keep_prepared(*p, 1);   // written after the command's one store
        c.capacity.fraction = 0.8;
        trace::add_runs(path, {sim::to_run(sim::simulate(*p, c))}, "", t.fingerprint);   // and kept by the next
    }
    CHECK(trace::load_trace(path).from_cache);
    SECTION("a row changed in place (same counts, same meta) by another program") {
        sql(path, "UPDATE allocations SET bytes = 16777216 WHERE id = 2");
        CHECK(cache_rows(path) == 0);
        auto t = trace::load_trace(path);
        CHECK_FALSE(t.from_cache);
        CHECK(t.allocations.bytes[1] == 16 * simtest::MiB);
        auto p = sim::prepare_cached(t);
        CHECK(sim::baseline_peak(*p, "ideal") == 20 * simtest::MiB);   // not the cached 12 MiB
        sim::keep_prepared(*p, 0);
        CHECK(trace::load_trace(path).from_cache);   // cached again, of the new rows
    }
    SECTION("a row deleted and one inserted") {
        sql(path, "DELETE FROM accesses WHERE kernel = 2 AND allocation = 1; INSERT INTO accesses VALUES (1, 2, 2)");
        CHECK(cache_rows(path) == 0);
        auto t = trace::load_trace(path);
        CHECK_FALSE(t.from_cache);
        CHECK(t.kernels.access_begin == std::vector<int64_t>{0, 2, 3});
    }
    SECTION("an entry of another fingerprint (the meta changed with the triggers gone) is not used") {
        sql(path, "DROP TRIGGER trace_cache_insert_meta; INSERT INTO meta VALUES ('note', 'x')");
        CHECK(cache_rows(path) > 0);
        CHECK_FALSE(trace::load_trace(path).from_cache);
    }
    std::filesystem::remove(path);
}

TEST_CASE("a damaged cache entry is not used: the rows decide", "[sim][cache]") {
    const std::string path = simtest::temp_path("cache-damaged.db");
    simtest::write(path, {{4 * simtest::MiB, 0, 50 * simtest::ms}, {8 * simtest::MiB, 5 * simtest::ms, 30 * simtest::ms},
                          {1 * simtest::MiB, 7 * simtest::ms, 20 * simtest::ms}},
                   {{1 * simtest::ms, 4 * simtest::ms, {{0, 'w'}}}, {6 * simtest::ms, 9 * simtest::ms, {{0, 'r'}, {1, 'w'}}},
                    {10 * simtest::ms, 12 * simtest::ms, {{2, 'w'}, {1, 'r'}}}});
    trace::TraceData slow;
    {
        Env off("MHC_TRACE_CACHE", "0");
        slow = trace::load_trace(path);
    }
    const trace::TraceData first = trace::load_trace(path);
    const auto prepared = sim::prepare_cached(first);
    const auto want = runs(*prepared);
    sim::keep_prepared(*prepared, 0);
    REQUIRE(cache_rows(path) > 0);
    SECTION("a byte of a column changed") {
        // Every payload part: whichever columns are stored raw, each one is now off by one byte.
        sql(path, "UPDATE trace_cache SET data = CAST(zeroblob(length(data)) AS BLOB) WHERE part > 0 AND length(data) > 2");
    }
    SECTION("the header cut short") {
        sql(path, "UPDATE trace_cache SET data = substr(data, 1, 20) WHERE part = 0");
    }
    SECTION("a part missing") {
        sql(path, "DELETE FROM trace_cache WHERE part = 3");
    }
    SECTION("an entry of another format version") {
        sql(path, "UPDATE trace_cache SET data = X'4D48434341434845FF000000' || substr(data, 13) WHERE part = 0");
    }
    auto t = trace::load_trace(path);
    CHECK_FALSE(t.from_cache);
    same_columns(t, slow);
    CHECK(runs(*sim::prepare_cached(t)) == want);
    std::filesystem::remove(path);
}

TEST_CASE("the cache is written only into the file as it was read, and never waits for a lock", "[sim][cache]") {
    const std::string path = simtest::temp_path("cache-stale.db");
    simtest::write(path, {{4 * simtest::MiB, 0, 50 * simtest::ms}}, {{1 * simtest::ms, 4 * simtest::ms, {{0, 'w'}}}});
    auto t = trace::load_trace(path);
    trace::CacheWriter w;
    trace::cache_columns(t, w);
    // Another process wrote the file after it was read: its counter moved on.
    sql(path, "INSERT INTO meta VALUES ('note', 'written after the read')");
    CHECK_FALSE(trace::write_cache(path, t.fingerprint, t.change_counter, {{trace::kTraceCacheKey, &w}}));
    CHECK(cache_rows(path) == -1);
    // A writer holds the lock: the cache is skipped at once rather than waited for.
    auto u = trace::load_trace(path);
    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
    trace::CacheWriter v;
    trace::cache_columns(u, v);
    CHECK_FALSE(trace::write_cache(path, u.fingerprint, u.change_counter, {{trace::kTraceCacheKey, &v}}));
    sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(other);
    CHECK(trace::write_cache(path, u.fingerprint, u.change_counter, {{trace::kTraceCacheKey, &v}}));
    CHECK(trace::load_trace(path).from_cache);
    // keep_prepared: a row changed by another process after the read (before any trigger
    // exists): the counter moved on, nothing is written.
    const std::string second = simtest::temp_path("cache-second.db");
    simtest::write(second, {{4 * simtest::MiB, 0, 50 * simtest::ms}}, {{1 * simtest::ms, 4 * simtest::ms, {{0, 'w'}}}});
    auto loaded = trace::load_trace(second);
    auto p = sim::prepare_cached(loaded);
    sql(second, "UPDATE allocations SET stream = stream + 1 WHERE id = 1");
    sim::keep_prepared(*p, 0);
    CHECK(cache_rows(second) == -1);
    std::filesystem::remove(second);
    std::filesystem::remove(path);
}
