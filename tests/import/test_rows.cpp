// import_file checks the rows it wrote from memory (Rows) instead of reading the file back:
// the columns Rows gives must be exactly what load_trace reads from the finished file, for
// every importer, on the public traces and our fixtures.
#include <catch2/catch.hpp>

#include "mhc/trace/import/rows.hpp"
#include "mhc/trace/store.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;
using mhc::trace::TraceData;

namespace {

void same(const TraceData& a, const TraceData& b) {
    CHECK(a.meta == b.meta);
    CHECK(a.strings == b.strings);
    const auto &x = a.allocations, &y = b.allocations;
    CHECK(x.id == y.id);
    CHECK(x.device == y.device);
    CHECK(x.address == y.address);
    CHECK(x.bytes == y.bytes);
    CHECK(x.t_alloc == y.t_alloc);
    CHECK(x.t_free == y.t_free);
    CHECK(x.stream == y.stream);
    CHECK(x.category == y.category);
    CHECK(x.label == y.label);
    const auto &k = a.kernels, &l = b.kernels;
    CHECK(k.id == l.id);
    CHECK(k.device == l.device);
    CHECK(k.stream == l.stream);
    CHECK(k.name == l.name);
    CHECK(k.t_start == l.t_start);
    CHECK(k.t_end == l.t_end);
    CHECK(k.step == l.step);
    CHECK(k.correlation == l.correlation);
    CHECK(k.access_begin == l.access_begin);
    CHECK(a.accesses.allocation == b.accesses.allocation);
    CHECK(a.accesses.mode == b.accesses.mode);
    CHECK(a.dangling_accesses.size() == b.dangling_accesses.size());
    CHECK(a.copies.id == b.copies.id);
    CHECK(a.copies.kind == b.copies.kind);
    CHECK(a.copies.bytes == b.copies.bytes);
    CHECK(a.copies.t_start == b.copies.t_start);
    CHECK(a.copies.t_end == b.copies.t_end);
    CHECK(a.markers.id == b.markers.id);
    CHECK(a.markers.name == b.markers.name);
    CHECK(a.markers.t_start == b.markers.t_start);
    CHECK(a.markers.t_end == b.markers.t_end);
    CHECK(a.markers.kind == b.markers.kind);
    CHECK(a.markers.index == b.markers.index);
    CHECK(x.requested_bytes == y.requested_bytes);
    REQUIRE(a.segments.size() == b.segments.size());
    for (size_t i = 0; i < a.segments.size(); ++i) {
        const auto &s = a.segments[i], &g = b.segments[i];
        CHECK((s.id == g.id && s.device == g.device && s.stream == g.stream && s.address == g.address &&
               s.bytes == g.bytes && s.t_alloc == g.t_alloc && s.t_free == g.t_free && s.expandable == g.expandable &&
               s.reconstructed == g.reconstructed));
    }
}

template <class F>
void compare(const std::string& name, F run) {
    INFO(name);
    test::TempDir dir;
    std::string out = dir.file("t.db");
    TraceData mem;
    bool taken = false;
    {
        mhc::trace::Writer w(out);
        imp::Rows rows(w);
        imp::Result r;
        run(rows, r);
        for (auto& [k, v] : r.meta) rows.set_meta(k, v);
        w.finish();
        taken = rows.take(mem);
    }
    REQUIRE(taken);
    same(mem, mhc::trace::load_trace(out));
}

}  // namespace

TEST_CASE("rows kept in memory are the rows load_trace reads back", "[import]") {
    compare("snapshot", [](imp::Rows& w, imp::Result& r) {
        imp::import_snapshot(test::pub("torch-snapshot/stanford-cs336-training-step.pickle"), w, r);
    });
    compare("kineto", [](imp::Rows& w, imp::Result& r) {
        imp::import_kineto(test::pub("kineto/nccl_data.json.gz"), w, r);
    });
    compare("kineto cpu", [](imp::Rows& w, imp::Result& r) {
        imp::import_kineto(test::fixture("cpu_mlp_kineto.json.gz"), w, r);
    });
    compare("et", [](imp::Rows& w, imp::Result& r) {
        imp::import_et(test::pub("chakra/chakra-1.0.2-et.json.gz"), "", w, r);
    });
    compare("et + kineto", [](imp::Rows& w, imp::Result& r) {
        imp::import_et(test::pub("chakra/simple_add_et.json.gz"), test::pub("kineto/simple_add_trace.json.gz"), w, r);
    });
    compare("nsys", [](imp::Rows& w, imp::Result& r) {
        imp::import_nsys(test::pub("nsys/con_kernel.sqlite"), w, r);
    });
}

TEST_CASE("rows out of id order are left to the file", "[import]") {
    test::TempDir dir;
    mhc::trace::Writer w(dir.file("t.db"));
    imp::Rows rows(w);
    mhc::trace::Allocation a;
    a.id = 2;
    a.bytes = 1;
    rows.add(a);
    a.id = 1;
    rows.add(a);
    w.finish();
    TraceData t;
    CHECK_FALSE(rows.take(t));
}

TEST_CASE("repeated accesses keep the union of their modes, as the file does", "[import]") {
    compare("accesses", [](imp::Rows& w, imp::Result&) {
        mhc::trace::Allocation a;
        a.bytes = 8;
        for (int i = 1; i <= 3; ++i) { a.id = i; w.add(a); }
        mhc::trace::Kernel k;
        k.t_end = 1;
        for (int i = 1; i <= 2; ++i) { k.id = i; w.add(k); }
        using M = mhc::trace::AccessMode;
        w.add(mhc::trace::Access{2, 3, M::Read});
        w.add(mhc::trace::Access{1, 2, M::Write});
        w.add(mhc::trace::Access{2, 3, M::Write});
        w.add(mhc::trace::Access{2, 1, M::Read});
        w.add(mhc::trace::Access{1, 9, M::Read});   // dangling
    });
}
