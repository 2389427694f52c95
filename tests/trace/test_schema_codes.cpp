// The C++ enumerations name their codes as the schema's lookup tables do (trace/schema.sql, which
// the Python package reads too): a code added on one side only fails here.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "mhc/trace/model.hpp"
#include "mhc/trace/store.hpp"
#include "mhc/test/temp.hpp"

using mhc::trace::AccessMode;
using mhc::trace::Category;
using mhc::trace::CopyKind;
using mhc::trace::kCategoryCount;
using mhc::trace::kCopyKindCount;
using mhc::trace::MarkerKind;
using mhc::trace::Phase;
using mhc::trace::Writer;

namespace {

std::map<int, std::string> rows(const std::string& path, const std::string& table) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, ("SELECT id, name FROM " + table).c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::map<int, std::string> out;
    while (sqlite3_step(st) == SQLITE_ROW)
        out[sqlite3_column_int(st, 0)] = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

template <class Enum>
std::map<int, std::string> names(std::initializer_list<Enum> values) {
    std::map<int, std::string> out;
    for (Enum value : values) out[static_cast<int>(value)] = std::string(mhc::trace::to_string(value));
    return out;
}

}  // namespace

TEST_CASE("every enumeration's codes and names are the schema's lookup rows", "[store][schema]") {
    mhc::test::TempPath path("codes.db");
    Writer writer(path.path);
    writer.set_meta("source", "test");
    writer.finish();
    using C = Category;
    CHECK(rows(path.path, "categories") ==
          names({C::Param, C::Grad, C::Optimizer, C::Activation, C::Workspace, C::Comm, C::Other}));
    CHECK(rows(path.path, "categories").size() == kCategoryCount);
    CHECK(rows(path.path, "access_modes") == names({AccessMode::Read, AccessMode::Write, AccessMode::ReadWrite}));
    using K = CopyKind;
    CHECK(rows(path.path, "copy_kinds") == names({K::H2D, K::D2H, K::D2D, K::P2P, K::Memset, K::H2H}));
    CHECK(rows(path.path, "copy_kinds").size() == kCopyKindCount);
    CHECK(rows(path.path, "marker_kinds") == names({MarkerKind::Step, MarkerKind::Layer, MarkerKind::Range}));
    using P = Phase;
    CHECK(rows(path.path, "phases") == names({P::Forward, P::Backward, P::Optimizer, P::Recompute, P::Other}));
}
