// The accesses of an allocation (hover count, details, highlights) are the same whether the
// viewer groups them at load (a file without an index of accesses by allocation, read from its
// rows or from its cache entry) or asks the file's index (files written before the index was
// dropped, or where a user made it).
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

#include "fixtures.hpp"
#include "mhc/trace/cache.hpp"
#include "mhc/trace/columns.hpp"
#include "mhc/viewer/data.hpp"

using mhc::viewer::access_count_of;
using mhc::viewer::accesses_of;
using mhc::viewer::AccessHit;
using mhc::viewer::load_view_trace;
using mhc::viewer::ViewTrace;
namespace trace = mhc::trace;

namespace {

void sql(const std::string& path, const char* statement) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    CHECK(sqlite3_exec(db, statement, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
}

// Kernels on three streams of two devices, ids with gaps (so ids are found by search, not by
// offset); starts drawn from few values so that kernels of different streams tie; every kernel
// touches up to five of 40 allocations (ids with gaps too), one allocation touched by none.
void write_random_trace(const std::string& path) {
    std::mt19937_64 rng(7);
    trace::Writer writer(path);
    writer.set_meta("source", "viewer-accesses-test");
    const int64_t name = writer.intern("k");
    std::vector<int64_t> allocs;
    for (int64_t i = 0; i < 40; ++i) {
        trace::Allocation alloc;
        alloc.id = 3 + i * 2 + (i > 20 ? 100 : 0);
        alloc.bytes = 4096 * (i + 1);
        alloc.t_alloc = 0;
        alloc.category = trace::Category::Activation;
        writer.add(alloc);
        allocs.push_back(alloc.id);
    }
    for (int64_t i = 0; i < 300; ++i) {
        trace::Kernel kernel;
        kernel.id = 10 + i * 3 + (i > 150 ? 1000 : 0);
        kernel.device = static_cast<int32_t>(i % 2);
        kernel.stream = 7 + i % 3;
        kernel.name = name;
        kernel.t_start = 1000 * static_cast<int64_t>(rng() % 60);
        kernel.t_end = kernel.t_start + 500;
        writer.add(kernel);
        const auto count = static_cast<int>(rng() % 6);
        for (int j = 0; j < count; ++j)
            writer.add(trace::Access{kernel.id, allocs[1 + rng() % (allocs.size() - 1)],
                                static_cast<trace::AccessMode>(1 + rng() % 3)});
    }
    writer.finish();
}

void same_accesses(const ViewTrace& grouped, const ViewTrace& asked) {
    std::vector<int64_t> ids = grouped.allocations.id;
    ids.push_back(999999);   // no such allocation
    int64_t total = 0;
    for (int64_t id : ids) {
        INFO("allocation " << id);
        std::vector<AccessHit> mine = accesses_of(grouped, id), file = accesses_of(asked, id);
        REQUIRE(mine.size() == file.size());
        for (size_t i = 0; i < mine.size(); ++i) {
            CHECK(mine[i].kernel == file[i].kernel);
            CHECK(mine[i].stream == file[i].stream);
            CHECK(mine[i].device == file[i].device);
            CHECK(mine[i].t_start == file[i].t_start);
            CHECK(mine[i].t_end == file[i].t_end);
            CHECK(mine[i].mode == file[i].mode);
            if (i > 0) CHECK(mine[i - 1].t_start <= mine[i].t_start);
        }
        CHECK(access_count_of(grouped, id) == static_cast<int64_t>(mine.size()));
        CHECK(access_count_of(asked, id) == static_cast<int64_t>(mine.size()));
        total += static_cast<int64_t>(mine.size());
    }
    CHECK(total == grouped.access_count);
    CHECK(accesses_of(grouped, grouped.allocations.id[0]).empty());   // touched by no kernel
}

}   // namespace

TEST_CASE("accesses by allocation: grouped at load from the rows or the cache, or from the file's index, alike") {
    fixture::TempPath rows("accesses-rows.db"), indexed("accesses-indexed.db"), cached("accesses-cached.db");
    write_random_trace(rows.path);
    std::filesystem::copy_file(rows.path, indexed.path);
    std::filesystem::copy_file(rows.path, cached.path);
    // Older files (and users who query by allocation) have the index.
    sql(indexed.path, "CREATE INDEX accesses_by_allocation ON accesses (allocation)");
    // The cache entry the simulator's first run leaves.
    trace::TraceData full = trace::load_trace(cached.path);
    trace::CacheWriter cw;
    trace::cache_columns(full, cw);
    REQUIRE(trace::write_cache(cached.path, full.fingerprint, full.change_counter, {{trace::kTraceCacheKey, &cw}}));

    ViewTrace from_rows = load_view_trace(rows.path);
    ViewTrace from_index = load_view_trace(indexed.path);
    ViewTrace from_cache = load_view_trace(cached.path);
    REQUIRE(from_rows.access_index);
    CHECK_FALSE(from_rows.access_index->from_cache);
    CHECK_FALSE(from_index.access_index);   // the file answers
    REQUIRE(from_cache.access_index);
    CHECK(from_cache.access_index->from_cache);
    CHECK(from_rows.access_count > 500);
    same_accesses(from_rows, from_index);
    same_accesses(from_cache, from_index);
}

TEST_CASE("accesses by allocation on the known trace: worked by hand") {
    fixture::TempPath path("known-accesses.db");
    fixture::write_known_trace(path.path);
    ViewTrace view = load_view_trace(path.path);
    REQUIRE(view.access_index);   // a new file has no index of accesses by allocation
    // weights (#1) is read by alpha (#1, stream 7, [100, 300) us) and beta (#2, [500, 700) us);
    // act_big (#2) is written by beta, the workspace (#3) by alpha (fixtures.hpp's rows).
    std::vector<AccessHit> hits = accesses_of(view, 1);
    REQUIRE(hits.size() == 2);
    CHECK(hits[0].kernel == 1);
    CHECK(hits[0].stream == 7);
    CHECK(hits[0].t_start == 100 * fixture::us);
    CHECK(hits[0].t_end == 300 * fixture::us);
    CHECK(hits[0].mode == trace::AccessMode::Read);
    CHECK(hits[1].kernel == 2);
    CHECK(hits[1].t_start == 500 * fixture::us);
    REQUIRE(accesses_of(view, 2).size() == 1);
    CHECK(accesses_of(view, 2)[0].mode == trace::AccessMode::Write);
    CHECK(access_count_of(view, 3) == 1);
    CHECK(access_count_of(view, 4) == 0);   // no such allocation
}

TEST_CASE("accesses from the cache: opening reads the three columns it needs, not the whole entry") {
    // The entry's parts were listed with their data, so SQLite copied every part of the entry
    // (the simulator's columns too) onto the heap to hand back the header of part 0; the freed
    // copies (up to 256 MiB each) raised glibc's mmap threshold and the arrays made afterwards
    // stayed resident (416 MB against 331 MB once open, docs/results.md). Here a 40 MiB column
    // nobody reads shares the entry: SQLite's own memory must not reach its size.
    fixture::TempPath cached("accesses-cache-memory.db");
    write_random_trace(cached.path);
    trace::TraceData full = trace::load_trace(cached.path);
    trace::CacheWriter cw;
    trace::cache_columns(full, cw);
    std::vector<int32_t> unread(10 << 20);
    uint32_t state = 1;
    for (int32_t& value : unread)
        value = static_cast<int32_t>(state = state * 1664525u + 1013904223u);   // no encoding shrinks it
    cw.put("unread.padding", unread);
    REQUIRE(trace::write_cache(cached.path, full.fingerprint, full.change_counter, {{trace::kTraceCacheKey, &cw}}));
    sqlite3_memory_highwater(1);
    ViewTrace view = load_view_trace(cached.path);
    REQUIRE(view.access_index);
    CHECK(view.access_index->from_cache);
    const sqlite3_int64 high = sqlite3_memory_highwater(0);
    INFO("SQLite's memory high-water mark while opening: " << high << " bytes");
    CHECK(high > 0);                   // SQLite counts its memory (SQLITE_DEFAULT_MEMSTATUS)
    CHECK(high < int64_t{16} << 20);   // 40 MiB when the listing copied every part
}
