// CSV export round trips: every table exported, read back with an RFC 4180 reader written here,
// and compared row for row with what the trace library reads from the same file.
#include <sqlite3.h>

#include <charconv>
#include <filesystem>
#include <set>

#include <catch2/catch.hpp>

#include "mhc/common/error.hpp"
#include "mhc/trace/export/export.hpp"
#include "mhc/trace/runs.hpp"
#include "mhc/trace/store.hpp"
#include "util.hpp"

namespace ex = mhc::trace::exporter;
namespace tr = mhc::trace;
using Rows = std::vector<std::vector<std::string>>;

namespace {

// RFC 4180: fields separated by commas, quoted when they hold a comma, quote or line break,
// a quote inside doubled.
Rows read_csv(const std::string& path) {
    const std::string s = test::read_file(path);
    Rows rows(1);
    std::string field;
    bool quoted = false, was_quoted = false;
    for (size_t i = 0; i < s.size(); ++i) {
        char c = s[i];
        if (quoted) {
            if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') { field += '"'; ++i; }
            else if (c == '"') quoted = false;
            else field += c;
        } else if (c == '"') {
            REQUIRE(field.empty());   // a quote opens a field or nothing
            quoted = was_quoted = true;
        } else if (c == ',' || c == '\n') {
            rows.back().push_back(field);
            field.clear();
            was_quoted = false;
            if (c == '\n') rows.emplace_back();
        } else {
            field += c;
        }
    }
    REQUIRE_FALSE(quoted);
    REQUIRE((field.empty() && !was_quoted));   // the file ends with a line break
    REQUIRE(rows.back().empty());
    rows.pop_back();
    return rows;
}

std::string num(int64_t v) { return std::to_string(v); }
std::string shortest(double v) {
    char b[32];
    return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}
std::string time_or_empty(int64_t t) { return t == tr::kNoTime ? std::string() : num(t); }
double as_double(const std::string& s) {
    double v = 0;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    REQUIRE(r.ptr == s.data() + s.size());
    return v;
}

// The table as the trace library reads it: header, then rows in id order.
struct Expected {
    std::map<std::string, Rows> tables;
};

Expected read_back_by_library(const std::string& db) {
    tr::Reader r(db);
    auto str = r.strings();
    Expected e;
    auto& a = e.tables["allocations"];
    a.push_back({"id", "device", "address", "bytes", "t_alloc_ns", "t_free_ns", "stream", "category", "label",
                 "requested_bytes"});
    r.for_each([&](const tr::Allocation& x) {
        a.push_back({num(x.id), num(x.device), num(x.address), num(x.bytes), num(x.t_alloc), time_or_empty(x.t_free),
                     num(x.stream), std::string(tr::to_string(x.category)), str[size_t(x.label)],
                     x.requested_bytes == tr::kNoBytes ? std::string() : num(x.requested_bytes)});
    });
    auto& k = e.tables["kernels"];
    k.push_back({"id", "device", "stream", "name", "t_start_ns", "t_end_ns", "step", "grid_x", "grid_y", "grid_z",
                 "block_x", "block_y", "block_z", "shared_mem", "registers", "correlation"});
    r.for_each([&](const tr::Kernel& x) {
        k.push_back({num(x.id), num(x.device), num(x.stream), str[size_t(x.name)], num(x.t_start), num(x.t_end),
                     num(x.step), num(x.grid[0]), num(x.grid[1]), num(x.grid[2]), num(x.block[0]), num(x.block[1]),
                     num(x.block[2]), num(x.shared_mem), num(x.registers), num(x.correlation)});
    });
    auto& ac = e.tables["accesses"];
    ac.push_back({"kernel", "allocation", "mode"});
    r.for_each([&](const tr::Access& x) {
        ac.push_back({num(x.kernel), num(x.allocation), std::string(tr::to_string(x.mode))});
    });
    auto& c = e.tables["copies"];
    c.push_back({"id", "device", "stream", "kind", "bytes", "t_start_ns", "t_end_ns"});
    r.for_each([&](const tr::Copy& x) {
        c.push_back({num(x.id), num(x.device), num(x.stream), std::string(tr::to_string(x.kind)), num(x.bytes),
                     num(x.t_start), num(x.t_end)});
    });
    auto& m = e.tables["markers"];
    m.push_back({"id", "name", "t_start_ns", "t_end_ns", "kind", "idx"});
    r.for_each([&](const tr::Marker& x) {
        m.push_back({num(x.id), str[size_t(x.name)], num(x.t_start), num(x.t_end), std::string(tr::to_string(x.kind)),
                     num(x.index)});
    });
    auto& s = e.tables["segments"];
    s.push_back({"id", "device", "stream", "address", "bytes", "t_alloc_ns", "t_free_ns", "expandable", "reconstructed"});
    r.for_each([&](const tr::Segment& x) {
        s.push_back({num(x.id), num(x.device), num(x.stream), num(x.address), num(x.bytes), num(x.t_alloc),
                     time_or_empty(x.t_free), num(x.expandable), num(x.reconstructed)});
    });
    auto& meta = e.tables["meta"];
    meta.push_back({"key", "value"});
    for (const auto& [key, value] : r.meta()) meta.push_back({key, value});
    return e;
}

// The run tables as load_run and list_runs read them (all runs, by id).
void add_runs_by_library(const std::string& db, Expected& e, int64_t only = 0) {
    auto& runs = e.tables["runs"];
    runs.push_back({"id", "kind", "name", "status", "created", "base_run", "trace_fingerprint"});
    auto& cfg = e.tables["run_config"];
    cfg.push_back({"run", "key", "value"});
    auto& met = e.tables["run_metrics"];
    met.push_back({"run", "key", "value"});
    auto& ev = e.tables["run_events"];
    ev.push_back({"run", "kind", "t_start_ns", "t_end_ns", "allocation", "kernel", "bytes"});
    auto& ker = e.tables["run_kernels"];
    ker.push_back({"run", "kernel", "t_start_ns", "t_end_ns"});
    auto& mem = e.tables["run_memory"];
    mem.push_back({"run", "t_ns", "device_bytes", "host_bytes"});
    for (const auto& info : tr::list_runs(db)) {
        if (only && info.id != only) continue;
        const std::string id = num(info.id);
        runs.push_back({id, std::string(tr::to_string(info.kind)), info.name, std::string(tr::to_string(info.status)), info.created,
                        num(info.base_run), info.trace_fingerprint});
        tr::Run run = tr::load_run(db, info.id);
        for (const auto& [key, value] : run.config) cfg.push_back({id, key, value});
        for (const auto& [key, value] : run.metrics) met.push_back({id, key, "=" + shortest(value)});
        for (const auto& x : run.events)
            ev.push_back({id, std::string(tr::to_string(x.kind)), num(x.t_start), num(x.t_end), num(x.allocation),
                          num(x.kernel), num(x.bytes)});
        for (const auto& x : run.kernel_times) ker.push_back({id, num(x.kernel), num(x.t_start), num(x.t_end)});
        for (const auto& x : run.memory) mem.push_back({id, num(x.t), num(x.device_bytes), num(x.host_bytes)});
    }
}

// modules, kernel_info and saved_tensors: read with their own SQL (the library has no row type).
void add_capture_tables(const std::string& db, Expected& e) {
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open_v2(db.c_str(), &h, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    auto query = [&](const char* sql, Rows& out) {
        sqlite3_stmt* st = nullptr;
        REQUIRE(sqlite3_prepare_v2(h, sql, -1, &st, nullptr) == SQLITE_OK);
        while (sqlite3_step(st) == SQLITE_ROW) {
            std::vector<std::string> row;
            for (int i = 0; i < sqlite3_column_count(st); ++i)
                row.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st, i)));
            out.push_back(row);
        }
        sqlite3_finalize(st);
    };
    e.tables["modules"] = {{"id", "name", "parent", "type"}};
    query("SELECT m.id, coalesce(n.text, ''), m.parent, coalesce(t.text, '') FROM modules m "
          "LEFT JOIN strings n ON n.id = m.name LEFT JOIN strings t ON t.id = m.type ORDER BY m.id",
          e.tables["modules"]);
    e.tables["kernel_info"] = {{"kernel", "module", "phase", "flops", "bytes"}};
    query("SELECT k.kernel, k.module, p.name, k.flops, k.bytes FROM kernel_info k JOIN phases p ON p.id = k.phase "
          "ORDER BY k.kernel",
          e.tables["kernel_info"]);
    e.tables["saved_tensors"] = {{"allocation", "kernel", "packs"}};
    query("SELECT allocation, kernel, coalesce(packs, '') FROM saved_tensors ORDER BY allocation, kernel", e.tables["saved_tensors"]);
    sqlite3_close(h);
}

// Compares every exported file with the expectation; metrics ("=" + value) as doubles.
void compare(const std::string& dir, const Expected& e) {
    std::set<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(dir)) files.insert(f.path().filename().string());
    std::set<std::string> want;
    for (const auto& [t, _] : e.tables) want.insert(t + ".csv");
    CHECK(files == want);
    for (const auto& [table, rows] : e.tables) {
        INFO(table);
        Rows got = read_csv(dir + "/" + table + ".csv");
        REQUIRE(got.size() == rows.size());
        for (size_t i = 0; i < rows.size(); ++i) {
            INFO("row " << i);
            REQUIRE(got[i].size() == rows[i].size());
            for (size_t j = 0; j < rows[i].size(); ++j) {
                if (rows[i][j].rfind("=", 0) == 0 && i > 0)
                    CHECK(as_double(got[i][j]) == as_double(rows[i][j].substr(1)));
                else
                    CHECK(got[i][j] == rows[i][j]);
            }
        }
    }
}

// A trace with a row in every table, names that need quoting, an allocation alive at the end,
// and two runs.
std::string every_table_trace(const test::TempDir& dir) {
    std::string db = dir.file("every.db");
    int64_t module_name = 0, module_type = 0;
    {
        tr::Writer w(db);
        w.set_meta("source", "test, \"quoted\"");
        int64_t gemm = w.intern("gemm<float, 4>(\"a\", b)");
        int64_t label = w.intern("L0.attn\nresidual");
        int64_t step = w.intern("step");
        module_name = w.intern("model.layers.0");
        module_type = w.intern("torch.nn.Linear");
        w.add(tr::Allocation{1, 0, 4096, 1 << 20, 0, 500, 7, tr::Category::Activation, label});
        w.add(tr::Allocation{2, 0, 8192, 512, 10, tr::kNoTime, 7, tr::Category::Param, 0});
        tr::Kernel k;
        k.id = 1; k.stream = 7; k.name = gemm; k.t_start = 100; k.t_end = 200; k.step = 0;
        k.grid[0] = 128; k.block[0] = 256; k.shared_mem = 1024; k.registers = 64; k.correlation = 42;
        w.add(k);
        w.add(tr::Access{1, 1, tr::AccessMode::ReadWrite});
        w.add(tr::Access{1, 2, tr::AccessMode::Read});
        w.add(tr::Copy{1, 0, 3, tr::CopyKind::D2H, 4096, 300, 350});
        w.add(tr::Marker{1, step, 0, 600, tr::MarkerKind::Step, 0});
        w.add(tr::Segment{1, 0, 7, 4096, 2 << 20, 0, tr::kNoTime, false, true});
        w.finish();
    }
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    const std::string sql = "INSERT INTO modules VALUES (1, " + num(module_name) + ", 0, " + num(module_type) + ");"
                            "INSERT INTO kernel_info VALUES (1, 1, 1, 123456789, 4096);"
                            "INSERT INTO saved_tensors VALUES (1, 1, 2);";
    REQUIRE(sqlite3_exec(h, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
    tr::Run run;
    run.name = "lru+none@50%/pcie4, \"custom\"";
    run.config["capacity"] = "50%";
    run.metrics["throughput_loss"] = 0.1;   // not a short decimal in binary
    run.metrics["peak_reduction"] = 1.0 / 3.0;
    run.events.push_back({tr::EventKind::SwapOut, 120, 180, 1, 0, 1 << 20});
    run.kernel_times.push_back({1, 100, 260});
    run.memory.push_back({0, 1 << 20, 0});
    tr::add_run(db, run);
    run.name = "second";
    run.status = tr::RunStatus::Oom;
    tr::add_run(db, run);
    return db;
}

Expected expected_of(const std::string& db, int64_t only_run = 0) {
    Expected e = read_back_by_library(db);
    add_runs_by_library(db, e, only_run);
    add_capture_tables(db, e);
    return e;
}

}  // namespace

TEST_CASE("csv export: every table, read back row for row", "[export][csv]") {
    test::TempDir dir;
    std::string db = every_table_trace(dir);
    std::string out = dir.file("csv");
    auto tables = ex::export_csv(db, out);
    Expected e = expected_of(db);
    compare(out, e);
    REQUIRE(tables.size() == e.tables.size());
    for (const auto& t : tables) CHECK(t.rows + 1 == int64_t(e.tables.at(t.file.substr(0, t.file.size() - 4)).size()));
    // Spot checks by hand: the quoted name, the NULL free time, the resolved codes.
    Rows a = read_csv(out + "/allocations.csv");
    CHECK(a[1] == std::vector<std::string>{"1", "0", "4096", "1048576", "0", "500", "7", "activation", "L0.attn\nresidual", ""});
    CHECK(a[2][5].empty());
    CHECK(read_csv(out + "/kernels.csv")[1][3] == "gemm<float, 4>(\"a\", b)");
    CHECK(read_csv(out + "/kernel_info.csv")[1] == std::vector<std::string>{"1", "1", "backward", "123456789", "4096"});
    CHECK(read_csv(out + "/modules.csv")[1] == std::vector<std::string>{"1", "model.layers.0", "0", "torch.nn.Linear"});
}

TEST_CASE("csv export: --run keeps one run in the run tables, an unknown run is refused", "[export][csv]") {
    test::TempDir dir;
    std::string db = every_table_trace(dir);
    std::string out = dir.file("one");
    ex::export_csv(db, out, {2, mhc::IfExists::Refuse, {}});
    compare(out, expected_of(db, 2));
    CHECK(read_csv(out + "/runs.csv").size() == 2);
    std::string bad = dir.file("bad");
    // Said as every command and the viewer say it: how many runs there are and where they are listed.
    const size_t runs = mhc::trace::list_runs(db).size();
    const std::string said = db + ": run 9 does not exist (" + std::to_string(runs) + (runs == 1 ? " run" : " runs") +
                             " in the file: mhc info " + db + " lists them)";
    CHECK_THROWS_WITH(ex::export_csv(db, bad, {9, mhc::IfExists::Replace, {}}), said);
    CHECK_FALSE(std::filesystem::exists(bad + "/allocations.csv"));
    std::string err;
    CHECK(test::run_mhc("export " + db + " --format csv --run 9 -o " + bad, &err) == 2);
    CHECK(err == "mhc: " + said + "\n");
}

TEST_CASE("csv export: a generated trace with simulated runs and a real nsys trace round-trip", "[export][csv]") {
    test::TempDir dir;
    std::string gen = dir.file("gen.db");
    REQUIRE(test::run_mhc("generate --preset gpt2-small --layers 2 --steps 2 -o " + gen) == 0);
    REQUIRE(test::run_mhc("simulate " + gen + " --capacity 60% --policy lru") == 0);
    REQUIRE(test::run_mhc("simulate " + gen + " --capacity 50% --policy belady --prefetch lookahead:8") == 0);
    std::string nsys = dir.file("nsys.db");
    mhc::trace::import::Options opt;
    opt.warn = false;
    mhc::trace::import::import_file(test::pub("nsys/con_kernel.sqlite"), nsys, opt);
    for (const std::string& db : {gen, nsys}) {
        INFO(db);
        std::string out = db + ".csv";
        REQUIRE(test::run_mhc("export " + db + " --format csv -o " + out) == 0);
        Expected e = expected_of(db);
        CHECK(e.tables.at("kernels").size() > 1);
        compare(out, e);
    }
    CHECK(read_csv(gen + ".csv/run_events.csv").size() > 1);
}

TEST_CASE("csv export: a code that names nothing is refused with its row", "[export][csv]") {
    test::TempDir dir;
    std::string db = every_table_trace(dir);
    sqlite3* h = nullptr;
    REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
    REQUIRE(sqlite3_exec(h, "UPDATE copies SET kind = 17 WHERE id = 1", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(h);
    std::string out = dir.file("csv");
    CHECK_THROWS_WITH(ex::export_csv(db, out), Catch::Contains("copies row 1") && Catch::Contains("kind 17"));
    CHECK_FALSE(std::filesystem::exists(out + "/allocations.csv"));
}
