// The content digest (docs/trace-format.md, "Content digest"): the Writer sums a "v2:" digest as
// the rows go in, so it must be the rows' whatever order they were added in, with the late
// changes the Writer makes (set_free_time, an access's second mode, a saved tensor given twice)
// counted from the value the row held; one changed value of any table, any column, any type
// changes it; `mhc check` recomputes it and reports one the rows do not give.
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "mhc/test/temp.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/store.hpp"
#include "trace_tables.hpp"

namespace mhc::trace {

using mhc::test::TempPath;
using test::sql;

namespace {

// How a trace's rows reach the Writer: in what order, and whether the values come late (an
// allocation added alive and freed by set_free_time, an access given as two modes, a saved tensor
// given twice) or in the row itself.
struct Way {
    unsigned shuffle = 0;   // 0: in id order; else the seed of a shuffle of every table's rows
    bool late = false;
};

// A trace with rows in every content table (NULLs in the nullable columns), more rows than a
// bulk chunk holds (8192) in allocations and accesses.
void write_trace(const std::string& path, Way way, int allocations = 10000) {
    Writer w(path);
    std::vector<int64_t> names;
    for (int i = 0; i < 20; ++i) names.push_back(w.intern("name " + std::to_string(i) + std::string(i, 'x')));
    std::mt19937 rng(way.shuffle);
    auto order = [&](auto& rows) {
        if (way.shuffle) std::shuffle(rows.begin(), rows.end(), rng);
    };
    // Allocations: every third alive at the end (NULL t_free), every fifth with requested bytes.
    std::vector<Allocation> as;
    for (int i = 1; i <= allocations; ++i) {
        Allocation a;
        a.id = i;
        a.device = i % 2;
        a.address = 4096 * i;
        a.bytes = 512 + i;
        a.t_alloc = 10 * i;
        a.t_free = i % 3 == 0 ? kNoTime : 10 * i + 7;
        a.stream = i % 4;
        a.category = static_cast<Category>(i % 7);
        a.label = names[static_cast<size_t>(i % 20)];
        a.requested_bytes = i % 5 == 0 ? 500 + i : kNoBytes;
        as.push_back(a);
    }
    order(as);
    std::vector<std::pair<int64_t, int64_t>> frees;   // set late: (id, t_free)
    for (Allocation& a : as) {
        if (way.late && a.id % 2 == 0) {
            frees.push_back({a.id, a.t_free});
            a.t_free = a.id % 4 == 0 ? kNoTime : 1;   // added alive, or with a wrong time, corrected below
        }
        w.add(a);
    }
    order(frees);
    for (auto [id, t_free] : frees) {
        if (id % 8 == 2) w.set_free_time(id, 99);   // set twice: the last one stands
        w.set_free_time(id, t_free);
    }
    std::vector<Kernel> ks;
    for (int i = 1; i <= 600; ++i) {
        Kernel k{};
        k.id = i;
        k.device = i % 2;
        k.stream = i % 3;
        k.name = names[static_cast<size_t>(i % 20)];
        k.t_start = 20 * i;
        k.t_end = 20 * i + 5;
        k.step = i / 100;
        k.grid[0] = i;
        k.grid[1] = 2;
        k.grid[2] = 3;
        k.block[0] = 128;
        k.block[1] = i % 7;
        k.block[2] = 1;
        k.shared_mem = 48 * i;
        k.registers = 32;
        k.correlation = 1000 + i;
        ks.push_back(k);
    }
    order(ks);
    for (const Kernel& k : ks) w.add(k);
    // Accesses: 30 a kernel; late, the read-writes come as a read and a write, far apart.
    std::vector<Access> xs, writes;
    for (int k = 1; k <= 600; ++k)
        for (int j = 0; j < 30; ++j) {
            const auto mode = static_cast<AccessMode>(1 + (k + j) % 3);
            Access x{k, 1 + (k * 31 + j * 7) % allocations, mode};
            if (way.late && mode == AccessMode::ReadWrite) {
                x.mode = AccessMode::Read;
                writes.push_back({x.kernel, x.allocation, AccessMode::Write});
                if (j % 2) writes.push_back({x.kernel, x.allocation, AccessMode::ReadWrite});
            }
            xs.push_back(x);
        }
    xs.insert(xs.end(), writes.begin(), writes.end());
    order(xs);
    for (const Access& x : xs) w.add(x);
    std::vector<Copy> cs;
    for (int i = 1; i <= 50; ++i) cs.push_back({i, i % 2, 3, static_cast<CopyKind>(i % 6), 64 * i, 30 * i, 30 * i + 4});
    order(cs);
    for (const Copy& c : cs) w.add(c);
    std::vector<Marker> ms;
    for (int i = 1; i <= 40; ++i)
        ms.push_back(
            {i, names[static_cast<size_t>(i % 20)], 100 * i, 100 * i + 50, static_cast<MarkerKind>(i % 3), i % 5 - 1});
    order(ms);
    for (const Marker& m : ms) w.add(m);
    std::vector<Segment> ss;
    for (int i = 1; i <= 30; ++i)
        ss.push_back({i, 0, i % 2, 1 << 20, 1 << 21, i, i % 2 ? kNoTime : 10 * i, i % 3 == 0, i % 4 == 0});
    order(ss);
    for (const Segment& s : ss) w.add(s);
    std::vector<Module> mods;
    for (int i = 1; i <= 12; ++i)
        mods.push_back({i, names[static_cast<size_t>(i)], i / 2, names[static_cast<size_t>(i % 3)]});
    order(mods);
    for (const Module& m : mods) w.add(m);
    std::vector<KernelInfo> infos;
    for (int i = 1; i <= 600; i += 2) infos.push_back({i, i % 12, static_cast<Phase>(i % 5), 1000 * i, 10 * i});
    order(infos);
    for (const KernelInfo& k : infos) w.add(k);
    std::vector<SavedTensor> saved;
    for (int i = 1; i <= 200; ++i) {
        saved.push_back({i, 1 + i % 300, 1 + i % 3});
        if (way.late && i % 4 == 0) saved.push_back({i, 1 + i % 300, 1 + i % 3});   // given twice: one row
    }
    order(saved);
    for (const SavedTensor& s : saved) w.add(s);
    w.finish();
}

std::string scalar(const std::string& path, const std::string& query) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, query.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        out = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}
std::string stored(const std::string& path) {
    return scalar(path, "SELECT value FROM meta WHERE key = 'content_digest'");
}
// What the rows give now, recomputed as `mhc check` does for the stored digest's version.
std::string recomputed(const std::string& path) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    std::string out = content_digest_of(db, path, stored(path));
    sqlite3_close(db);
    return out;
}
bool check_reports_digest(const std::string& path) {
    CheckReport r = check_file(path);
    return std::any_of(r.problems.begin(), r.problems.end(),
                       [](const Problem& p) { return p.rule == "content-digest"; });
}
void drop_triggers(const std::string& path) {
    std::string drops;
    for (const char* t : {"strings", "allocations", "kernels", "accesses", "copies", "markers", "segments", "modules",
                          "kernel_info", "saved_tensors"})
        for (const char* op : {"INSERT", "UPDATE", "DELETE"})
            drops += std::string("DROP TRIGGER content_digest_") + op + "_" + t + ";";
    sql(path, drops);
}

}   // namespace

TEST_CASE("content digest: the same rows give the same v2 digest whatever order and however late they came",
          "[digest]") {
    TempPath a("digest-a.db"), b("digest-b.db"), c("digest-c.db"), d("digest-d.db");
    write_trace(a.path, {0, false});
    write_trace(b.path, {7, false});
    write_trace(c.path, {0, true});
    write_trace(d.path, {12345, true});
    const std::string digest = stored(a.path);
    REQUIRE(digest.rfind("v2:", 0) == 0);
    REQUIRE(digest.size() == 35);
    // The same rows: the late values took the place of the first ones.
    const std::string rows =
        "SELECT count(*), total(t_free), sum(t_free IS NULL), (SELECT total(mode) FROM accesses), "
        "(SELECT count(*) FROM accesses), (SELECT count(*) FROM saved_tensors) FROM allocations";
    REQUIRE(scalar(c.path, rows) == scalar(a.path, rows));
    REQUIRE(scalar(d.path, rows) == scalar(a.path, rows));
    CHECK(stored(b.path) == digest);
    CHECK(stored(c.path) == digest);
    CHECK(stored(d.path) == digest);
    // And it is the rows' digest: what one scan gives, and what check finds.
    for (const TempPath* t : {&a, &b, &c, &d}) {
        CHECK(recomputed(t->path) == digest);
        CHECK_FALSE(check_reports_digest(t->path));
    }
}

TEST_CASE("content digest: one value changed in any table, any column, to any type, changes it", "[digest]") {
    TempPath base("digest-base.db"), edited("digest-edited.db");
    write_trace(base.path, {3, true}, 300);
    drop_triggers(base.path);
    const std::string digest = stored(base.path);
    REQUIRE(recomputed(base.path) == digest);
    struct Table {
        const char* name;
        const char* key;
        std::vector<const char*> columns;
    };
    const Table tables[] = {
        {"strings", "id", {"id", "text"}},
        {"allocations",
         "id",
         {"id", "device", "address", "bytes", "t_alloc", "t_free", "stream", "category", "label", "requested_bytes"}},
        {"kernels",
         "id",
         {"id", "device", "stream", "name", "t_start", "t_end", "step", "grid_x", "grid_y", "grid_z", "block_x",
          "block_y", "block_z", "shared_mem", "registers", "correlation"}},
        {"accesses", "kernel, allocation", {"kernel", "allocation", "mode"}},
        {"copies", "id", {"id", "device", "stream", "kind", "bytes", "t_start", "t_end"}},
        {"markers", "id", {"id", "name", "t_start", "t_end", "kind", "idx"}},
        {"segments",
         "id",
         {"id", "device", "stream", "address", "bytes", "t_alloc", "t_free", "expandable", "reconstructed"}},
        {"modules", "id", {"id", "name", "parent", "type"}},
        {"kernel_info", "kernel", {"kernel", "module", "phase", "flops", "bytes"}},
        {"saved_tensors", "allocation, kernel", {"allocation", "kernel", "packs"}},
    };
    // Each value: another of its type (a key to one no row has), and then values of every other
    // type the column can hold (REAL, TEXT, BLOB, NULL where it is nullable).
    const char* changes[] = {"CASE typeof(C) WHEN 'integer' THEN C + 1000003 WHEN 'text' THEN C || 'y' ELSE 7 END",
                             "C + 0.5",
                             "'seven'",
                             "x'0001'",
                             "NULL",
                             "-C",
                             "1 - 1.0 / 3"};
    int tried = 0;
    for (const Table& t : tables) {
        for (const char* column : t.columns) {
            for (const char* change : changes) {
                std::string value = change;
                for (size_t at; (at = value.find('C')) != std::string::npos;) value.replace(at, 1, column);
                std::filesystem::copy_file(base.path, edited.path, std::filesystem::copy_options::overwrite_existing);
                // One row: the first and the last in key order, the one in between for an even count.
                const std::string row = std::string("(") + t.key + ") IN (SELECT " + t.key + " FROM " + t.name +
                                        " ORDER BY " + t.key + " LIMIT 1 OFFSET (SELECT count(*) / 2 FROM " + t.name +
                                        "))";
                const std::string before = scalar(
                    edited.path, std::string("SELECT quote(") + column + ") FROM " + t.name + " WHERE " + row);
                test::sql_unchecked(
                    edited.path, std::string("UPDATE ") + t.name + " SET " + column + " = " + value + " WHERE " + row);
                const std::string after = scalar(
                    edited.path, std::string("SELECT quote(") + column + ") FROM " + t.name + " WHERE " + row);
                const bool changed = before != after || scalar(edited.path, std::string("SELECT count(*) FROM ") +
                                                                                t.name + " WHERE " + row) == "0";
                if (!changed) continue;   // a NOT NULL column refused NULL, or the value read the same
                ++tried;
                INFO(t.name << "." << column << ": " << before << " -> " << after);
                CHECK(recomputed(edited.path) != digest);
            }
        }
    }
    CHECK(tried > 200);
    // A row deleted, a row added, two values swapped between rows: each changes it too.
    for (const char* edit :
         {"DELETE FROM accesses WHERE kernel = 5", "INSERT INTO strings VALUES (1000, '')",
          "UPDATE kernels SET t_start = CASE id WHEN 3 THEN (SELECT t_start FROM kernels WHERE id = 4) ELSE (SELECT "
          "t_start FROM kernels WHERE id = 3) END WHERE id IN (3, 4)",
          "INSERT INTO kernel_info VALUES (2, 0, 4, 0, 0)", "DELETE FROM saved_tensors WHERE allocation = 8"}) {
        std::filesystem::copy_file(base.path, edited.path, std::filesystem::copy_options::overwrite_existing);
        sql(edited.path, edit);
        INFO(edit);
        CHECK(recomputed(edited.path) != digest);
    }
    // The whole command: check reports a value changed with the triggers dropped.
    std::filesystem::copy_file(base.path, edited.path, std::filesystem::copy_options::overwrite_existing);
    CHECK_FALSE(check_reports_digest(edited.path));
    sql(edited.path, "UPDATE allocations SET t_free = t_free + 1 WHERE id = 7");
    CHECK(check_reports_digest(edited.path));
}

TEST_CASE(
    "content digest: check reports a v2 digest the rows do not give, and an edit the triggers marked is no problem",
    "[digest]") {
    TempPath t("digest-wrong.db");
    write_trace(t.path, {0, true}, 300);
    CHECK_FALSE(check_reports_digest(t.path));
    const std::string digest = stored(t.path);
    std::string wrong = digest;
    wrong.back() = wrong.back() == '0' ? '1' : '0';
    sql(t.path, "UPDATE meta SET value = '" + wrong + "' WHERE key = 'content_digest'");
    CheckReport r = check_file(t.path);
    auto it = std::find_if(r.problems.begin(), r.problems.end(),
                           [](const Problem& p) { return p.rule == "content-digest"; });
    REQUIRE(it != r.problems.end());
    CHECK(it->message.find("the rows give " + digest) != std::string::npos);
    // The triggers in place: an edit marks the digest edited, which check leaves to the identity.
    sql(t.path, "UPDATE meta SET value = '" + digest + "' WHERE key = 'content_digest'");
    sql(t.path, "UPDATE kernels SET t_end = t_end + 1 WHERE id = 9");
    CHECK(stored(t.path).rfind("edited:", 0) == 0);
    CHECK_FALSE(check_reports_digest(t.path));
}

TEST_CASE("content digest: a v1 digest (traces written before v2) is still recomputed as v1", "[digest]") {
    TempPath t("digest-v1.db");
    write_trace(t.path, {0, false}, 300);
    drop_triggers(t.path);
    // What the writer of 2026-12-05 stored: the v1 digest of these rows, in key order.
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(t.path.c_str(), &db) == SQLITE_OK);
    const std::string v1 = content_digest_of(db, t.path, "v1:");
    sqlite3_close(db);
    REQUIRE(v1.rfind("v1:", 0) == 0);
    REQUIRE(v1.size() == 35);
    sql(t.path, "UPDATE meta SET value = '" + v1 + "' WHERE key = 'content_digest'");
    CHECK(recomputed(t.path) == v1);
    CHECK_FALSE(check_reports_digest(t.path));
    sql(t.path, "UPDATE markers SET t_end = t_end + 1 WHERE id = 3");
    CHECK(check_reports_digest(t.path));
}

}   // namespace mhc::trace
