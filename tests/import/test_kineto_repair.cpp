// A Kineto member written with no value (kineto_repair.hpp): PyTorch's profiler wrote
// `"Process Group Description": ,` where a collective's process group had an empty description
// (pytorch/kineto ca24bca5 to b10f04a4; pytorch/pytorch#172353 quotes such a line), and every JSON
// reader refuses it. Before 2026-12-07 mhc did too ("invalid JSON at byte N: Invalid value"), so a
// distributed trace of those versions did not import at all. Each such value is read as absent,
// with a warning; any other broken JSON stays refused. So are names the profiler wrote unescaped
// (a quote, a control character, a Windows path's backslash: with_stack's Python frames), each
// character read as part of its string, with a warning.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "et_nodes.hpp"
#include "kineto_parse.hpp"
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
    for (const char* key : {"import.input", "import.warnings", "kineto.empty_values", "kineto.raw_strings"})
        meta.erase(key);
    return meta;
}

// The names of the first `count` events of category `cat` (python_function unless said) of a Kineto
// text, each replaced by one of `names` in turn, written as `write` gives it (escaped, or raw as the
// faulty Kineto wrote it).
template <class Write>
std::string with_names(const std::string& text, const std::vector<std::string>& names, int count, Write write,
                       const std::string& cat = "python_function") {
    const std::string mark = R"("cat": ")" + cat + R"(", "name": ")";
    std::string out;
    size_t from = 0;
    for (int i = 0; i < count; ++i) {
        const size_t at = text.find(mark, from);
        REQUIRE(at != std::string::npos);
        const size_t start = at + mark.size(), end = text.find('"', start);
        out += text.substr(from, start - from) + write(names[static_cast<size_t>(i) % names.size()]);
        from = end;
    }
    return out + text.substr(from);
}

std::string escaped(const std::string& raw) {
    std::string out;
    for (char ch : raw) {
        if (ch == '"' || ch == '\\') out += '\\';
        if (static_cast<unsigned char>(ch) < 0x20) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned>(ch));
            out += hex;
            continue;
        }
        out += ch;
    }
    return out;
}

std::string as_written(const std::string& name) { return name; }

imp::Result import_quietly(const std::string& in, const std::string& out) {
    imp::Options opt;
    opt.warn = false;
    return imp::import_file(in, out, opt);
}

// The execution trace `et` imported into `out` with the Kineto trace `kineto` beside it (--kineto).
imp::Result import_et_with(const std::string& et, const std::string& kineto, const std::string& out) {
    imp::Options opt;
    opt.warn = false;
    opt.kineto_path = kineto;
    return imp::import_file(et, out, opt);
}

// simple_add's execution trace imported into `out` with the Kineto trace `kineto` beside it.
imp::Result import_beside_et(const std::string& kineto, const std::string& out) {
    return import_et_with(test::pub("chakra/simple_add_et.json.gz"), kineto, out);
}

// `whole` (a file as written right) and `altered` (the same as a faulty writer wrote it) imported
// by `import` (import_quietly or import_beside_et) into whole.db and altered.db: the same rows and
// the same meta, but for the notes of what was mended (and the key `unlike`), and one warning
// more. The altered file's result.
template <class Import>
imp::Result imports_as_whole(const test::TempDir& dir, const std::string& whole, const std::string& altered,
                             Import import, const std::string& unlike = "") {
    const imp::Result before = import(whole, dir.file("whole.db"));
    const imp::Result after = import(altered, dir.file("altered.db"));
    CHECK(after.kernels == before.kernels);
    CHECK(after.accesses == before.accesses);
    auto meta = meta_without_notes(dir.file("altered.db"));
    meta.erase(unlike);
    CHECK(meta == meta_without_notes(dir.file("whole.db")));
    REQUIRE(after.warnings.size() == before.warnings.size() + 1);
    return after;
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
    const imp::Result after = imports_as_whole(dir, whole, empty, import_beside_et);
    CHECK(after.meta.at("kineto.empty_values")
              .rfind("1 member of the Kineto trace empty.json written with no value (1 'Process Group Description'",
                     0) == 0);
}

TEST_CASE("a real Kineto trace whose Python frame names were written unescaped imports as the trace itself",
          "[import][kineto][repair]") {
    // TraceLens's MI300X normalization trace (with_stack: 6,004 python_function events; 475 memory
    // events), 15 of its frame names replaced by names the profiler wrote raw: a source line with
    // quotes and a newline (pytorch/pytorch#113001), a torch.compile file name (#146900: the quote
    // before "cpu" is followed by `, "dtype": `, as a member would be), a control character
    // (#130622, #136180) and Windows paths (#98432: `\c`, `\_`, `\u` then no hex digits, `\d`).
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/tracelens-mi300x-normalization-layer-test.json.gz"));
    const std::vector<std::string> names = {
        "_test_lib_impl = torch.library.Library(\"_inductor_test\", \"IMPL\")\n(1): <module>",
        R"({"device": "cpu", "dtype": "float32"}(12): run)", "torch/_inductor/config.py(0): \x01",
        R"(torch\cuda\__init__.py(219): _lazy_init)", R"(torch\utils\data\dataloader.py(12): __iter__)"};
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, names, 15, escaped));
    test::write_file(raw, with_names(text, names, 15, as_written));

    const imp::Result before = import_quietly(whole, dir.file("whole.db"));
    const imp::Result after = import_quietly(raw, dir.file("raw.db"));
    CHECK(before.warnings.empty());
    CHECK(after.kernels == 168);
    CHECK(after.allocations == before.allocations);
    CHECK(after.markers == before.markers);
    // The same rows (their digest) and the same meta, but for the note of what was mended.
    CHECK(meta_without_notes(dir.file("raw.db")) == meta_without_notes(dir.file("whole.db")));
    REQUIRE(after.warnings.size() == 1);
    const std::string& said = after.warnings[0];
    INFO(said);
    CHECK(said.rfind("57 characters of the trace's strings written unescaped (36 quotes, 6 control characters, 15 "
                     "backslashes; the first at byte ",
                     0) == 0);
    CHECK(said.find("in 'name') read as characters of their string") != std::string::npos);
    CHECK(after.meta.at("kineto.raw_strings") == said);
}

TEST_CASE("strings are mended only where the JSON cannot be read otherwise", "[import][kineto][repair]") {
    test::TempDir dir;
    const std::string op = R"({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 10, "dur": 5, )";
    struct Case {
        const char* file;
        std::string json;
        int64_t markers;    // user_annotation ranges imported
        const char* said;   // the start of the warning, or "" for none
    };
    const Case cases[] = {
        // Valid JSON read by the streamed parse (an array of events): a name followed by a member
        // of another name, and every escape, are left as they are.
        {"array.json",
         R"([{"name": "a \"q\", \"r\" \\ \u00e9", "note": 1, "ph": "X", "cat": "user_annotation", "pid": 1, "tid": 1,)"
         R"( "ts": 1, "dur": 2}])",
         1, ""},
        // A name holding `", "key": ` where the key is no event member is one name.
        {"members.json",
         R"({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "f({"x": "y", "z": 1}) }", "pid": 1,)"
         R"( "tid": 1, "ts": 1, "dur": 2}]})",
         1, "6 characters of the trace's strings written unescaped (6 quotes, 0 control characters, 0 backslashes"},
    };
    for (const Case& each : cases) {
        SECTION(each.file) {
            const std::string in = dir.file(each.file);
            test::write_file(in, each.json);
            const imp::Result result = import_quietly(in, dir.file("out.db"));
            CHECK(result.markers == each.markers);
            if (std::string(each.said).empty()) {
                CHECK(result.warnings.empty());
            } else {
                REQUIRE(result.warnings.size() == 1);
                CHECK(result.warnings[0].rfind(each.said, 0) == 0);
            }
        }
    }
    SECTION("JSON broken past mending is refused as the first parse found it") {
        const std::string in = dir.file("broken.json");
        test::write_file(in, R"({"traceEvents": [)" + op + R"("name": "a\"b"}, ]})");
        try {
            import_quietly(in, dir.file("out.db"));
            FAIL("accepted");
        } catch (const mhc::Error& e) {
            INFO(e.what());
            CHECK(std::string(e.what()).find("invalid JSON at byte") != std::string::npos);
            CHECK(e.exit_code() == 2);
        }
    }
}

TEST_CASE("a Windows path's backslash before b, f, n, r or t in a Kineto name is read as a backslash, not a control "
          "character",
          "[import][kineto][repair]") {
    // Kineto wrote names raw until 2023 on Windows (#98432), so `C:\runs\new` became the valid JSON
    // escapes \r and \n. No Kineto wrote a control character so: the file is valid, and before
    // 2026-12-07 mhc read a carriage return and a newline there. HTA's simple_add trace, its 8
    // user_annotation names (ranges: their names are kept) replaced by such paths.
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::vector<std::string> names = {R"(C:\runs\new\bench.py(12): step)", R"(D:\temp\fx\trace)"};
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, names, 8, escaped, "user_annotation"));
    test::write_file(raw, with_names(text, names, 8, as_written, "user_annotation"));
    const imp::Result before = import_quietly(whole, dir.file("whole.db"));
    const imp::Result after = import_quietly(raw, dir.file("raw.db"));
    CHECK(before.warnings.empty());
    CHECK(after.markers == before.markers);
    // The same range names (the content digest) as the file with the backslashes escaped.
    CHECK(meta_without_notes(dir.file("raw.db")) == meta_without_notes(dir.file("whole.db")));
    REQUIRE(after.warnings.size() == 1);
    INFO(after.warnings[0]);
    CHECK(after.warnings[0].rfind("24 characters of the trace's strings written unescaped (0 quotes, 0 control "
                                  "characters, 24 backslashes, 24 of them before b, f, n, r or t in an event's name",
                                  0) == 0);
    CHECK(after.warnings[0].find("valid JSON of names") != std::string::npos);
    // One parse thread or two (the second takes the file's second half): the windowed parse leaves
    // the file to the streamed one, which reads the paths.
    for (const auto threads : {imp::ParseThreads::One, imp::ParseThreads::Two}) {
        const imp::KinetoData data = imp::parse_kineto(raw, UINT64_MAX, threads);
        CHECK(data.streamed);
        CHECK(data.raw_strings.letters == 24);
        REQUIRE(data.ranges.size() == 8);
        for (const imp::KRange& range : data.ranges)
            CHECK(data.strings.list.at(range.name).find_first_of("\r\n") == std::string::npos);
    }
}

TEST_CASE("the Kineto trace beside an execution trace is read with its raw names as the profiler meant them",
          "[import][kineto][repair][et]") {
    // HTA's simple_add pair, the Kineto trace's 8 user_annotation names written raw: quotes, a
    // control character and a Windows path (`\U`, `\m`, then \t, \n and \f: valid escapes).
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::vector<std::string> names = {R"(load "C:\data\new")", "step\x01",
                                            R"(C:\Users\me\torch\nn\functional.py(2450): batch_norm)"};
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, names, 8, escaped, "user_annotation"));
    test::write_file(raw, with_names(text, names, 8, as_written, "user_annotation"));
    const imp::Result after = imports_as_whole(dir, whole, raw, import_beside_et);
    INFO(after.meta.at("kineto.raw_strings"));
    // 3 names of each of the first two and 2 of the third: 6 quotes, 3 controls, 16 backslashes (9 before a letter).
    CHECK(after.meta.at("kineto.raw_strings")
              .rfind("25 characters of the Kineto trace raw.json's strings written unescaped (6 quotes, 3 control "
                     "characters, 16 backslashes, 9 of them before b, f, n, r or t in an event's name",
                     0) == 0);
}

TEST_CASE("every backslash of a Kineto string written raw is its own, also before u and four hex digits or "
          "another backslash",
          "[import][kineto][repair]") {
    // Kineto wrote names raw until 2023 (#98432), so a name that holds a backslash beginning no JSON
    // escape (`\U` of `C:\Users`) was not escaped by its writer: its `\u0123` is a user folder
    // `u0123456`, not U+0123, and its `\\` a UNC path's two backslashes. Before 2026-12-07 mhc read them
    // as JSON does. A string with only valid escapes keeps them (`caf\u00e9 \\ step`: a rewritten
    // file's escaped name). HTA's simple_add trace, its 8 user_annotation names replaced.
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::vector<std::string> written = {R"(C:\Users\u0123456\runs\train.py(12): step)",
                                              R"(\\fileserver\share\bench.py(3): load)", R"(caf\u00e9 \\ step)",
                                              R"(D:\temp\fx\u1234)"};
    std::vector<std::string> meant = written;
    meant[2] = "caf\xc3\xa9 \\ step";
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, meant, 8, escaped, "user_annotation"));
    test::write_file(raw, with_names(text, written, 8, as_written, "user_annotation"));
    const imp::Result after = imports_as_whole(dir, whole, raw, import_quietly);
    INFO(after.warnings[0]);
    // Each name twice: 4 + 4 + 0 + 3 backslashes, 2 + 2 + 0 + 2 before a letter, 1 + 1 + 0 + 1 beginning another escape.
    CHECK(after.warnings[0].rfind("22 characters of the trace's strings written unescaped (0 quotes, 0 control "
                                  "characters, 22 backslashes, 12 of them before b, f, n, r or t in an event's name, "
                                  "read as a Windows path's backslash and letter, not as a control character, 6 more "
                                  "beginning \\\\, \\/, \\\" or \\u in a string written raw",
                                  0) == 0);
    const imp::KinetoData data = imp::parse_kineto(raw, UINT64_MAX, imp::ParseThreads::One);
    CHECK(data.raw_strings.in_raw == 6);
    REQUIRE(data.ranges.size() == 8);
    CHECK(data.strings.list.at(data.ranges[0].name) == written[0]);
    CHECK(data.strings.list.at(data.ranges[2].name) == meant[2]);
}

TEST_CASE("a Kineto name written raw that ends in a backslash ends at its quote", "[import][kineto][repair]") {
    // `record_function(f"save {folder}")` with a Windows folder `C:\runs\out\`: written raw, its last
    // backslash and the closing quote read as JSON's escaped quote. Before 2026-12-07 mhc read the name
    // on into the event's next members and refused the file ("'cat' appears twice in the event").
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::vector<std::string> names = {R"(save C:\runs\out\)", R"(load D:\data\)"};
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, names, 8, escaped, "user_annotation"));
    test::write_file(raw, with_names(text, names, 8, as_written, "user_annotation"));
    const imp::Result after = imports_as_whole(dir, whole, raw, import_quietly);
    INFO(after.meta.at("kineto.raw_strings"));
    // Each name 4 times: 3 + 2 backslashes, 1 + 0 before a letter, 1 + 1 before the closing quote.
    CHECK(after.meta.at("kineto.raw_strings").rfind("20 characters", 0) == 0);
    CHECK(after.meta.at("kineto.raw_strings").find(", 8 more beginning") != std::string::npos);
}

TEST_CASE("a Kineto name written raw that holds a member the event has had, or a number its quote follows, is one "
          "name",
          "[import][kineto][repair]") {
    // Kineto writes an event's "ph" and "cat" before its name, each once, so a raw name holding
    // `", "ph": "i` (valid JSON whose event then holds "ph" twice), `", "cat": "cpu_op`, a Python
    // source line `d = {"name": "x", "ph": "X", "ts": 0}` or `f(", "pid": 7)` (a number the name's
    // quote follows: no member's value) is one name. Before 2026-12-08 the first two were refused
    // (`'ph' appears twice in the event`), the others as invalid JSON: the name ended at the first
    // quote before any event member. HTA's simple_add trace, its 8 user_annotation names replaced.
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::vector<std::string> names = {R"(x", "ph": "i)", R"(c", "cat": "cpu_op)",
                                            R"(d = {"name": "x", "ph": "X", "ts": 0})", R"(f(", "pid": 7))"};
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, names, 8, escaped, "user_annotation"));
    test::write_file(raw, with_names(text, names, 8, as_written, "user_annotation"));
    const imp::Result after = imports_as_whole(dir, whole, raw, import_quietly);
    INFO(after.meta.at("kineto.raw_strings"));
    // Each name twice: 4 + 4 + 10 + 3 quotes.
    CHECK(after.meta.at("kineto.raw_strings").rfind("42 characters of the trace's strings written unescaped (42 quotes", 0) ==
          0);
    for (const auto threads : {imp::ParseThreads::One, imp::ParseThreads::Two}) {
        const imp::KinetoData data = imp::parse_kineto(raw, UINT64_MAX, threads);
        REQUIRE(data.ranges.size() == 8);
        for (size_t i = 0; i < data.ranges.size(); ++i)
            CHECK(data.strings.list.at(data.ranges[i].name) == names[i % names.size()]);
    }
}

TEST_CASE("a Kineto name written raw that holds `\", \"key\": \"` is one name, also where it reads as valid JSON",
          "[import][kineto][repair]") {
    // `record_function('x", "key": "y')` written raw is valid JSON: the name `x` and a member "key".
    // Kineto writes no member but "pid" after the name of an event whose "ph" came first, so a member
    // there that no trace event holds has the file read once more with names ending only before an
    // event's member. Before 2026-12-08 mhc read the names short, without a word (another content
    // digest). HTA's simple_add trace, its 8 user_annotation names replaced.
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("kineto/simple_add_trace.json.gz"));
    const std::vector<std::string> names = {R"(x", "key": "y)", R"(run(", "mode": "fast)"};
    const std::string whole = dir.file("whole.json"), raw = dir.file("raw.json");
    test::write_file(whole, with_names(text, names, 8, escaped, "user_annotation"));
    test::write_file(raw, with_names(text, names, 8, as_written, "user_annotation"));
    const imp::Result after = imports_as_whole(dir, whole, raw, import_quietly);
    INFO(after.meta.at("kineto.raw_strings"));
    CHECK(after.meta.at("kineto.raw_strings").rfind("32 characters of the trace's strings written unescaped (32 quotes", 0) ==
          0);
    CHECK(after.meta.at("kineto.raw_strings").find("valid JSON of names") != std::string::npos);
    CHECK(after.meta.count("kineto.members_after_name") == 0);

    SECTION("a member after a name that no reading takes into the name is kept as written and said") {
        std::string noted = text;
        REQUIRE(replace_all(noted, R"("name": "[param|cuda]", )", R"("name": "[param|cuda]", "note": 1, )") == 1);
        test::write_file(dir.file("noted.json"), noted);
        const imp::Result result = import_quietly(dir.file("noted.json"), dir.file("noted.db"));
        test::write_file(dir.file("plain.json"), text);
        const imp::Result plain = import_quietly(dir.file("plain.json"), dir.file("plain.db"));
        CHECK(result.markers == plain.markers);
        CHECK(result.kernels == plain.kernels);
        INFO(result.meta.at("kineto.members_after_name"));
        CHECK(result.meta.at("kineto.members_after_name")
                  .rfind("1 event of the trace holds a member after its name that is none of a trace event's (the "
                         "first: 'note' in traceEvents[",
                         0) == 0);
        CHECK(result.meta.count("kineto.raw_strings") == 0);
    }
}

TEST_CASE("a caller's file that torch 2.15 writes unescaped in args CallFrom is read whole",
          "[import][kineto][repair]") {
    // torch 2.15 writes a built-in method's caller (`"CallFrom": "FILE:LINE"`, with_stack=True) as
    // the path is, where it writes a name's quotes as `'` (recorded here: a module named
    // `{"device": "cpu", "dtype": "float32"}.py`, as torch.compile named files in #146900). Its
    // quote before `, "dtype": ` ended the string and `}.py:3"` broke the file: before 2026-12-08
    // refused, `invalid JSON at byte N`. The writer matrix's torch 2.15 trace, its 48 callers
    // `torch/_ops.py:1226` so renamed.
    test::TempDir dir;
    std::string whole = test::gunzip(test::fixture("writers/torch-2.15.0-kineto.json.gz")), raw = whole;
    const std::string from = R"("CallFrom": "torch/_ops.py:1226")";
    const std::string path = R"(mod/{"device": "cpu", "dtype": "float32"}.py:3)";
    CHECK(replace_all(whole, from, "\"CallFrom\": \"" + escaped(path) + "\"") == 48);
    CHECK(replace_all(raw, from, "\"CallFrom\": \"" + path + "\"") == 48);
    test::write_file(dir.file("whole.json"), whole);
    test::write_file(dir.file("raw.json"), raw);
    const imp::Result after = imports_as_whole(dir, dir.file("whole.json"), dir.file("raw.json"), import_quietly);
    INFO(after.meta.at("kineto.raw_strings"));
    CHECK(after.meta.at("kineto.raw_strings").rfind("384 characters of the trace's strings written unescaped (384 quotes", 0) ==
          0);
    CHECK(after.meta.at("kineto.raw_strings").find("in 'CallFrom'") != std::string::npos);

    SECTION("the trace torch 2.15 wrote (fixtures/make_callfrom.py)") {
        const std::string recorded = test::fixture("callfrom_quotes_kineto.json.gz");
        std::string meant = test::gunzip(recorded);
        const std::string file = R"({"device": "cpu", "dtype": "float32"})";
        CHECK(replace_all(meant, file, escaped(file)) == 2);
        test::write_file(dir.file("meant.json"), meant);
        const imp::Result read = imports_as_whole(dir, dir.file("meant.json"), recorded, import_quietly);
        CHECK(read.allocations == 8);
        CHECK(read.meta.at("kineto.raw_strings").rfind("16 characters", 0) == 0);
    }
}

TEST_CASE("an execution trace whose record_function names were written unescaped imports as the trace itself",
          "[import][et][repair]") {
    // PyTorch's ExecutionTraceObserver writes a node's name as it is (torch 2.15: a record_function
    // named `load "C:\runs\new\u0123"` and a tab came out raw; its op schemas and string inputs it
    // escapes), so the file is invalid JSON. Before 2026-12-07 mhc refused it ("invalid JSON at byte
    // N"). HTA's simple_add execution trace, its two `[param|clear_cache]` ranges and `[param|cuda]`
    // renamed so, against the same file with the names escaped.
    test::TempDir dir;
    const std::string text = test::gunzip(test::pub("chakra/simple_add_et.json.gz"));
    const std::string loading = "load \"C:\\runs\\new\\u0123\"\tx", path = R"(C:\runs\new)";
    std::string whole = text, raw = text;
    CHECK(replace_all(whole, R"("[param|clear_cache]")", "\"" + escaped(loading) + "\"") == 2);
    CHECK(replace_all(raw, R"("[param|clear_cache]")", "\"" + loading + "\"") == 2);
    CHECK(replace_all(whole, R"("[param|cuda]")", "\"" + escaped(path) + "\"") == 1);
    CHECK(replace_all(raw, R"("[param|cuda]")", "\"" + path + "\"") == 1);
    test::write_file(dir.file("whole.json"), whole);
    test::write_file(dir.file("raw.json"), raw);
    const imp::Result after =
        imports_as_whole(dir, dir.file("whole.json"), dir.file("raw.json"), import_quietly, "et.raw_strings");
    INFO(after.meta.at("et.raw_strings"));
    // Two of the first name (2 quotes, 1 tab, 3 backslashes) and one path (2 backslashes before a letter).
    CHECK(after.meta.at("et.raw_strings")
              .rfind("14 characters of the execution trace's strings written unescaped (4 quotes, 2 control "
                     "characters, 8 backslashes",
                     0) == 0);
    // The path alone is valid JSON (\r, \n): read as the path too, not as a carriage return and a newline.
    std::string path_only = text;
    replace_all(path_only, R"("[param|cuda]")", "\"" + path + "\"");
    test::write_file(dir.file("path.json"), path_only);
    const imp::Result path_read = import_quietly(dir.file("path.json"), dir.file("path.db"));
    CHECK(path_read.meta.at("et.raw_strings").rfind("2 characters", 0) == 0);
}

TEST_CASE("ranges whose names the two writers write differently join their Kineto ops by Record function id",
          "[import][et][join][repair]") {
    // Recorded here with torch 2.15 (fixtures/make_raw_names.py): five ranges named `q"x`, `b\y`,
    // `n<newline>z`, `café` and `t<tab>w`, two steps. The execution trace keeps the names as they
    // are (written raw); the Kineto trace writes `q'x`, `b/y`, `nz`, `unknown` and `unknown`. Before
    // 2026-12-07 mhc refused the execution trace, and with its names read it left those 10 ranges
    // unjoined (70 of 80 ops): each name was compared as it is.
    test::TempDir dir;
    const imp::Result result = import_et_with(test::fixture("raw_names_et.json.gz"),
                                              test::fixture("raw_names_kineto.json.gz"), dir.file("out.db"));
    INFO(result.meta.at("et.join"));
    CHECK(result.meta.at("et.join").rfind("80 of 80 ops joined (1 of 1 threads) by Record function id", 0) == 0);
    CHECK(result.meta.at("et.raw_strings").rfind("8 characters", 0) == 0);
}

namespace {

// The names of an execution trace's nodes as parse_nodes reads them, in id order.
std::vector<std::string> node_names(const std::string& path, imp::LinkedNodes& linked, imp::StrayMember& stray) {
    int64_t pid = -1;
    imp::DeviceTypes devices;
    imp::RawStrings raw;
    std::vector<std::string> names;
    for (const imp::Node& node : imp::parse_nodes(path, UINT64_MAX, pid, devices, linked, raw, stray))
        names.push_back(node.name);
    return names;
}

// A kept execution trace whose nodes are renamed, each name written raw as the observer writes it.
struct RenamedNodes {
    const char* file;
    std::vector<std::pair<std::string, std::string>> renamed;   // (name in the file, name written raw)
};

// Each file of `cases` with its names written raw imports as the file with them escaped: the same
// node names, rows and meta, and the quotes said.
void renamed_nodes_read_whole(const std::vector<RenamedNodes>& cases) {
    test::TempDir dir;
    for (const RenamedNodes& one : cases) {
        INFO(one.file);
        std::string whole = test::gunzip(test::pub(one.file)), raw = whole;
        for (const auto& [from, to] : one.renamed) {
            CHECK(replace_all(whole, "\"" + from + "\"", "\"" + escaped(to) + "\"") >= 1);
            CHECK(replace_all(raw, "\"" + from + "\"", "\"" + to + "\"") >= 1);
        }
        test::write_file(dir.file("whole.json"), whole);
        test::write_file(dir.file("raw.json"), raw);
        imp::LinkedNodes linked;
        imp::StrayMember stray;
        const std::vector<std::string> meant = node_names(dir.file("whole.json"), linked, stray);
        CHECK(node_names(dir.file("raw.json"), linked, stray) == meant);
        CHECK(linked.count == 0);
        CHECK(stray.count == 0);
        const imp::Result after = imports_as_whole(dir, dir.file("whole.json"), dir.file("raw.json"), import_quietly,
                                                   "et.raw_strings");
        CHECK(after.meta.at("et.raw_strings").find("quotes") != std::string::npos);
    }
}

}   // namespace

TEST_CASE("an execution trace's raw record_function name holding `\", \"key\": ` is read whole",
          "[import][et][repair]") {
    // torch 2.15's observer writes `record_function('x", "key": "y')` as `"name": "x", "key": "y",
    // "ctrl_deps": 2` (recorded here): valid JSON whose node name reads "x" and a member "key", and
    // with an odd number of quotes (`w", "id": 1`) invalid JSON. A name so written that holds
    // `", "cat": ` made the node read as one chakra_trace_link added, and left out. Before
    // 2026-12-07 mhc read the first two as "x" and the node, the third as no node, without a word,
    // and refused the fourth ("invalid JSON at byte N"). A node's name now ends only at a quote
    // before the member the observer writes next with an integer ("id" in schema 1.0.x, whose
    // nodes begin with their name; "ctrl_deps" from 1.0.2, whose "id" comes first), where the plain
    // reading fails or leaves another member after a name. HTA's simple_add (1.0.1) and param's
    // torch.compile trace (1.1.1).
    const std::string first = "x\", \"key\": \"y", second = "c\", \"cat\": \"d", third = "w\", \"id\": 1";
    renamed_nodes_read_whole({{"chakra/simple_add_et.json.gz", {{"[param|cuda]", first}, {"[param|clear_cache]", second}}},
                              {"chakra/param-pt2-et-1.1.1.json.gz", {{"## LOOP 5 ##", third}, {"## LOOP 6 ##", second}}}});
}

TEST_CASE("an execution trace's raw record_function name holding the observer's next member and an integer is read "
          "whole",
          "[import][et][repair]") {
    // A name that holds exactly what the observer writes after a name, `", "ctrl_deps": 1` (schema
    // 1.0.2 on) or `", "id": 3` (1.0.x), is read to its real end: the integer there is followed by the
    // name's own quote, so it is no member's value. Before 2026-12-08 the name ended at its first such
    // quote and the file was refused (`invalid JSON at byte N`).
    renamed_nodes_read_whole({{"chakra/simple_add_et.json.gz", {{"[param|cuda]", "w\", \"id\": 3"}}},
                              {"chakra/param-pt2-et-1.1.1.json.gz",
                               {{"## LOOP 5 ##", "w\", \"ctrl_deps\": 1"}, {"## LOOP 6 ##", "v\", \"ctrl_deps\": -2 }"}}}});
}

TEST_CASE("an execution trace node's member after its name that no reading takes into the name is said",
          "[import][et][repair]") {
    // Valid JSON whose node holds a member after its name that no writer of execution traces writes and
    // no quote of the name written raw explains (`"name": "## LOOP 6 ##", "note": 1, "ctrl_deps"`):
    // read as written, one warning naming the member and the node.
    test::TempDir dir;
    std::string text = test::gunzip(test::pub("chakra/param-pt2-et-1.1.1.json.gz"));
    REQUIRE(replace_all(text, R"("## LOOP 6 ##", )", R"("## LOOP 6 ##", "note": 1, )") == 1);
    test::write_file(dir.file("note.json"), text);
    const imp::Result result = import_quietly(dir.file("note.json"), dir.file("note.db"));
    INFO(result.meta.at("et.members_after_name"));
    CHECK(result.meta.at("et.members_after_name").rfind("1 node holds a member after its name", 0) == 0);
    CHECK(result.meta.at("et.members_after_name").find("'note' in nodes[") != std::string::npos);
    CHECK(result.meta.count("et.raw_strings") == 0);
}
