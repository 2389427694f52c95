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

using namespace mhc::viewer;
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
    trace::Writer w(path);
    w.set_meta("source", "viewer-accesses-test");
    const int64_t name = w.intern("k");
    std::vector<int64_t> allocs;
    for (int64_t i = 0; i < 40; ++i) {
        trace::Allocation a;
        a.id = 3 + i * 2 + (i > 20 ? 100 : 0);
        a.bytes = 4096 * (i + 1);
        a.t_alloc = 0;
        a.category = trace::Category::Activation;
        w.add(a);
        allocs.push_back(a.id);
    }
    for (int64_t i = 0; i < 300; ++i) {
        trace::Kernel k;
        k.id = 10 + i * 3 + (i > 150 ? 1000 : 0);
        k.device = static_cast<int32_t>(i % 2);
        k.stream = 7 + i % 3;
        k.name = name;
        k.t_start = 1000 * static_cast<int64_t>(rng() % 60);
        k.t_end = k.t_start + 500;
        w.add(k);
        const auto n = static_cast<int>(rng() % 6);
        for (int j = 0; j < n; ++j)
            w.add(trace::Access{k.id, allocs[1 + rng() % (allocs.size() - 1)],
                                static_cast<trace::AccessMode>(1 + rng() % 3)});
    }
    w.finish();
}

void same_accesses(const ViewTrace& a, const ViewTrace& b) {
    std::vector<int64_t> ids = a.allocations.id;
    ids.push_back(999999);   // no such allocation
    int64_t total = 0;
    for (int64_t id : ids) {
        INFO("allocation " << id);
        std::vector<AccessHit> x = accesses_of(a, id), y = accesses_of(b, id);
        REQUIRE(x.size() == y.size());
        for (size_t i = 0; i < x.size(); ++i) {
            CHECK(x[i].kernel == y[i].kernel);
            CHECK(x[i].stream == y[i].stream);
            CHECK(x[i].device == y[i].device);
            CHECK(x[i].t_start == y[i].t_start);
            CHECK(x[i].t_end == y[i].t_end);
            CHECK(x[i].mode == y[i].mode);
            if (i > 0) CHECK(x[i - 1].t_start <= x[i].t_start);
        }
        CHECK(access_count_of(a, id) == static_cast<int64_t>(x.size()));
        CHECK(access_count_of(b, id) == static_cast<int64_t>(x.size()));
        total += static_cast<int64_t>(x.size());
    }
    CHECK(total == a.access_count);
    CHECK(accesses_of(a, a.allocations.id[0]).empty());   // touched by no kernel
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
    fixture::TempPath p("known-accesses.db");
    fixture::write_known_trace(p.path);
    ViewTrace t = load_view_trace(p.path);
    REQUIRE(t.access_index);   // a new file has no index of accesses by allocation
    // weights (#1) is read by alpha (#1, stream 7, [100, 300) us) and beta (#2, [500, 700) us);
    // act_big (#2) is written by beta, the workspace (#3) by alpha (fixtures.hpp's rows).
    std::vector<AccessHit> hits = accesses_of(t, 1);
    REQUIRE(hits.size() == 2);
    CHECK(hits[0].kernel == 1);
    CHECK(hits[0].stream == 7);
    CHECK(hits[0].t_start == 100 * fixture::us);
    CHECK(hits[0].t_end == 300 * fixture::us);
    CHECK(hits[0].mode == trace::AccessMode::Read);
    CHECK(hits[1].kernel == 2);
    CHECK(hits[1].t_start == 500 * fixture::us);
    REQUIRE(accesses_of(t, 2).size() == 1);
    CHECK(accesses_of(t, 2)[0].mode == trace::AccessMode::Write);
    CHECK(access_count_of(t, 3) == 1);
    CHECK(access_count_of(t, 4) == 0);   // no such allocation
}
