// A Kineto member written with no value (kineto_repair.hpp): PyTorch's profiler wrote
// `"Process Group Description": ,` where a collective's process group had an empty description
// (pytorch/kineto ca24bca5 to b10f04a4; pytorch/pytorch#172353 quotes such a line), and every JSON
// reader refuses it. Before 2026-12-07 mhc did too ("invalid JSON at byte N: Invalid value"), so a
// distributed trace of those versions did not import at all. Each such value is read as absent,
// with a warning; any other broken JSON stays refused.
#include <map>
#include <string>

#include <catch2/catch.hpp>

#include "mhc/common/error.hpp"
#include "util.hpp"

namespace imp = mhc::trace::import;

namespace {

// Replaces every `from` in `text` by `to`; how many it replaced.
int replace_all(std::string& text, const std::string& from, const std::string& to) {
    int count = 0;
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()), ++count)
        text.replace(at, from.size(), to);
    return count;
}

// The trace's meta, less the keys that name the input or say what the import repaired.
std::map<std::string, std::string> meta_without_notes(const std::string& db) {
    auto meta = mhc::trace::load_trace(db).meta;
    for (const char* key : {"import.input", "import.warnings", "kineto.empty_values"}) meta.erase(key);
    return meta;
}

imp::Result import_quietly(const std::string& in, const std::string& out) {
    imp::Options opt;
    opt.warn = false;
    return imp::import_file(in, out, opt);
}

}   // namespace

TEST_CASE("a real Kineto trace whose process group descriptions were written empty imports as the trace itself",
          "[import][kineto][repair]") {
    // nccl_data.json.gz (HTA's two-rank run) names its process group on its 42 record_param_comms
    // ops, "Process Group Description": "default_pg", each before another member. Written as the
    // faulty Kineto wrote an empty one, the value is missing before the ',' (before a '}' below).
    test::TempDir dir;
    std::string text = test::gunzip(test::pub("kineto/nccl_data.json.gz"));
    const std::string whole = dir.file("whole.json"), empty = dir.file("empty.json");
    test::write_file(whole, text);
    REQUIRE(replace_all(text, R"("Process Group Description": "default_pg", )", R"("Process Group Description": , )") ==
            42);
    test::write_file(empty, text);

    const imp::Result before = import_quietly(whole, dir.file("whole.db"));
    const imp::Result after = import_quietly(empty, dir.file("empty.db"));
    CHECK(before.warnings.empty());
    // The same rows (their digest) and the same meta, but for the note of what was repaired.
    CHECK(after.kernels == 2700);
    CHECK(after.copies == before.copies);
    CHECK(after.markers == before.markers);
    CHECK(meta_without_notes(dir.file("empty.db")) == meta_without_notes(dir.file("whole.db")));
    REQUIRE(after.warnings.size() == 1);
    const std::string& said = after.warnings[0];
    INFO(said);
    CHECK(said.rfind("42 members of the trace written with no value (42 'Process Group Description'; the first at "
                     "byte ",
                     0) == 0);
    CHECK(said.find("read as absent") != std::string::npos);
    CHECK(after.meta.at("kineto.empty_values") == said);

    // The command line names the file in the warning and exits 0.
    std::string err;
    CHECK(test::run_mhc("import " + empty + " -o " + dir.file("cli.db"), &err) == 0);
    CHECK(err.find("mhc: warning: " + empty + ": 42 members of the trace written with no value") != std::string::npos);
}

TEST_CASE("only a member's missing value is supplied: other broken Kineto JSON stays refused",
          "[import][kineto][repair]") {
    test::TempDir dir;
    const std::string head = R"({"traceEvents": [)";
    const std::string kernel = R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5,)"
                               R"( "args": {"device": 0, "stream": 7, "correlation": 1)";
    struct Case {
        const char* name;
        std::string json;
        const char* expect;   // part of the refusal
    };
    const Case refused[] = {
        // A value missing in an array, a trailing comma, a bare word: no writer fault known to mean one thing.
        {"array.json", head + kernel + R"(, "grid": [1, , 1]}}]})", "invalid JSON at byte"},
        {"trailing.json", head + kernel + R"(, }}]})", "invalid JSON at byte"},
        {"bare.json", head + kernel + R"(, "Process Group Description": default_pg}}]})", "invalid JSON at byte"},
        // A member mhc reads, written with no value, is absent where required: the bad-field rule.
        {"ts.json", head + R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": , "dur": 5}]})",
         "traceEvents[0]: 'ts' is null, not a number"},
    };
    for (const Case& bad : refused) {
        SECTION(bad.name) {
            const std::string in = dir.file(bad.name);
            test::write_file(in, bad.json);
            try {
                import_quietly(in, dir.file("out.db"));
                FAIL("accepted: " << bad.json);
            } catch (const mhc::Error& e) {
                INFO(e.what());
                CHECK(std::string(e.what()).find(bad.expect) != std::string::npos);
                CHECK(e.exit_code() == 2);
            }
        }
    }
    SECTION("a colon and comma inside a string are text, not a member") {
        const std::string in = dir.file("text.json");
        test::write_file(in, head + kernel + R"(, "note": "a \": , b", "Process Group Description": }}]})");
        const imp::Result result = import_quietly(in, dir.file("text.db"));
        CHECK(result.kernels == 1);
        REQUIRE(result.warnings.size() == 1);
        CHECK(result.warnings[0].rfind("1 member of the trace written with no value (1 'Process Group Description'",
                                       0) == 0);
    }
}

TEST_CASE("the Kineto trace beside an execution trace is read with its empty members as absent, named in the warning",
          "[import][kineto][repair]") {
    // HTA's simple_add pair (execution trace and Kineto trace of one run), the Kineto trace's
    // first args given an empty process group description as the faulty Kineto wrote one.
    test::TempDir dir;
    std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::string whole = dir.file("whole.json"), empty = dir.file("empty.json");
    test::write_file(whole, text);
    const size_t args = text.find(R"("args": {)");
    REQUIRE(args != std::string::npos);
    text.insert(args + 9, R"("Process Group Description": , )");
    test::write_file(empty, text);
    const std::string et = test::pub("chakra/simple_add_et.json.gz");
    imp::Options opt;
    opt.warn = false;
    opt.kineto_path = whole;
    const imp::Result before = imp::import_file(et, dir.file("whole.db"), opt);
    opt.kineto_path = empty;
    const imp::Result after = imp::import_file(et, dir.file("empty.db"), opt);
    CHECK(after.kernels == before.kernels);
    CHECK(after.accesses == before.accesses);
    CHECK(meta_without_notes(dir.file("empty.db")) == meta_without_notes(dir.file("whole.db")));
    REQUIRE(after.warnings.size() == before.warnings.size() + 1);
    CHECK(after.meta.at("kineto.empty_values")
              .rfind("1 member of the Kineto trace empty.json written with no value (1 'Process Group Description'",
                     0) == 0);
}
