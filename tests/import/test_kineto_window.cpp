// The Kineto parser reads JSON through a sliding window and parses each event in situ; it
// falls back to a streamed parse for what the window cannot hold. Both must give the same
// data, whatever the layout of the text (window boundaries, whitespace, escapes, members
// before and after traceEvents, gzip or plain). Expected values come from the generator.
#include <zlib.h>

#include <algorithm>
#include <map>
#include <tuple>

#include <catch2/catch.hpp>

#include "kineto_parse.hpp"
#include "mhc/common/error.hpp"
#include "util.hpp"

namespace {

// `n` groups of four events: cpu_op, runtime launch, kernel, [memory] alloc (and every
// second group a free of the previous block). `pad` bytes of padding go into each kernel's
// args, `ws` is the separator between events.
struct Doc {
    std::string text;
    int64_t events = 0, kernels = 0, memory = 0, ops = 0, launches = 0;
};

Doc make_doc(int n, size_t pad, const std::string& ws) {
    Doc d;
    std::string& s = d.text;
    s = " \n{\"schemaVersion\": 1,\"deviceProperties\":[{\"id\":0,\"name\":\"GPU \\\"zero\\\"\",\"totalGlobalMem\":1024},"
        "{\"id\":1,\"name\":\"GPU one\",\"totalGlobalMem\":2048}],\n\"traceEvents\" :[";
    std::string padding(pad, 'x');
    bool first = true;
    auto add = [&](const std::string& e) {
        if (!first) s += "," + ws;
        first = false;
        s += e;
        ++d.events;
    };
    for (int i = 0; i < n; ++i) {
        std::string ts = std::to_string(1000 + 10 * i) + ".5";
        add("{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"aten::mm\",\"pid\":1,\"tid\":1,\"ts\":" + ts +
            ",\"dur\":4,\"args\":{\"External id\":" + std::to_string(i) + "}}");
        ++d.ops;
        add("{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":" + ts +
            ",\"dur\":1,\"args\":{\"correlation\":" + std::to_string(i) + "}}");
        ++d.launches;
        // "\u0067emm" is "gemm": escapes are decoded in place.
        add("{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"\\u0067emm_" + std::to_string(i % 3) +
            "\",\"pid\":0,\"tid\":7,\"ts\":" + std::to_string(1002 + 10 * i) +
            ",\"dur\":2,\"args\":{\"pad\":\"" + padding + "\",\"device\":0,\"stream\":7,\"correlation\":" +
            std::to_string(i) + ",\"grid\":[4,1,1],\"block\":[128,1,1]}}");
        ++d.kernels;
        add("{\"ph\":\"i\",\"s\":\"t\",\"name\":\"[memory]\",\"pid\":1,\"tid\":1,\"ts\":" + ts +
            ",\"args\":{\"Total Allocated\":512,\"Bytes\":512,\"Device Id\":0,\"Device Type\":1,\"Addr\":" +
            std::to_string(4096 * (i + 1)) + "}}");
        ++d.memory;
    }
    s += "\n] , \"traceName\": \"after the events\", \"more\": {\"a\": [1, 2.5e3, null, true]}}\n\t ";
    return d;
}

void gzip_to(const std::string& path, const std::string& text) {
    gzFile g = gzopen(path.c_str(), "wb1");
    gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
    gzclose(g);
}

void check(const Doc& doc, const std::string& path, bool expect_streamed,
           mhc::trace::import::ParseThreads threads = mhc::trace::import::ParseThreads::Auto) {
    auto data = mhc::trace::import::parse_kineto(path, UINT64_MAX, threads);
    CHECK(data.streamed == expect_streamed);
    CHECK(data.events == doc.events);
    CHECK(static_cast<int64_t>(data.kernels.size()) == doc.kernels);
    CHECK(static_cast<int64_t>(data.memory.size()) == doc.memory);
    CHECK(static_cast<int64_t>(data.ops.size()) == doc.ops);
    CHECK(static_cast<int64_t>(data.launches.size()) == doc.launches);
    CHECK(data.device_count == 2);
    CHECK(data.device_name == "GPU \"zero\"");
    CHECK(data.device_memory == 1024);
    REQUIRE(!data.kernels.empty());
    const auto& last = data.kernels.back();
    CHECK(data.strings.list[last.name] == "gemm_" + std::to_string((doc.kernels - 1) % 3));
    CHECK(last.ts == (1002 + 10 * (doc.kernels - 1)) * 1000);
    CHECK(last.dur == 2000);
    CHECK(last.grid[0] == 4);
    CHECK(last.block[0] == 128);
    CHECK(last.stream == 7);
    CHECK(data.ops.back().ts == (1000 + 10 * (doc.ops - 1)) * 1000 + 500);
    CHECK(data.memory.back().addr == 4096 * doc.memory);
}

}  // namespace

TEST_CASE("kineto parse: window refills and in-situ parse agree with the document", "[import][kineto]") {
    test::TempDir dir;
    // ~45 MB: more than one 32 MiB window, so refills happen mid-array.
    Doc doc = make_doc(150000, 0, "\n  ");
    REQUIRE(doc.text.size() > (size_t(40) << 20));
    test::write_file(dir.file("a.json"), doc.text);
    gzip_to(dir.file("a.json.gz"), doc.text);
    check(doc, dir.file("a.json"), false);
    check(doc, dir.file("a.json.gz"), false);
}

TEST_CASE("kineto parse: events longer than the window's margin use the streamed parse", "[import][kineto]") {
    test::TempDir dir;
    // 9 MiB of padding per kernel (the window keeps 4 MiB ahead, holds 32): the fourth
    // kernel starts 27 MiB in and cannot be whole in the first window.
    Doc doc = make_doc(6, size_t(9) << 20, " ");
    test::write_file(dir.file("b.json"), doc.text);
    gzip_to(dir.file("b.json.gz"), doc.text);
    check(doc, dir.file("b.json"), true, mhc::trace::import::ParseThreads::One);   // one thread (two may each fit their half)
    check(doc, dir.file("b.json.gz"), true);
    // A small document goes the fast way.
    Doc small = make_doc(5, 100, "");
    test::write_file(dir.file("c.json"), small.text);
    check(small, dir.file("c.json"), false);
}

namespace {

using mhc::trace::import::KinetoData;
using mhc::trace::import::parse_kineto;
using mhc::trace::import::ParseThreads;

// Everything the importers read of a parse, names by their text.
void check_same(const KinetoData& one, const KinetoData& two) {
    CHECK(one.events == two.events);
    CHECK(one.flows == two.flows);
    CHECK(one.host_memory_events == two.host_memory_events);
    CHECK(one.negative_durations == two.negative_durations);
    CHECK(one.first_negative == two.first_negative);
    CHECK(one.first_negative_dur == two.first_negative_dur);
    CHECK(one.first_negative_name == two.first_negative_name);
    CHECK(one.t_min == two.t_min);
    CHECK(one.device_name == two.device_name);
    CHECK(one.device_memory == two.device_memory);
    CHECK(one.device_count == two.device_count);
    CHECK(one.rank == two.rank);
    CHECK(one.world_size == two.world_size);
    CHECK(one.base_time_ns == two.base_time_ns);
    CHECK(one.has_rf_id == two.has_rf_id);
    CHECK(one.unread_categories == two.unread_categories);
    CHECK(one.counter_categories == two.counter_categories);
    CHECK(one.odd_memory_devices == two.odd_memory_devices);
    CHECK(one.copies_on_in_device == two.copies_on_in_device);
    CHECK(one.activities_without_device == two.activities_without_device);
    CHECK(one.first_without_device == two.first_without_device);
    CHECK(one.streams_from_tid == two.streams_from_tid);
    CHECK(one.activities_without_stream == two.activities_without_stream);
    CHECK(one.profiler_events == two.profiler_events);
    CHECK(one.foreign_events == two.foreign_events);
    CHECK(one.foreign_categories == two.foreign_categories);
    CHECK(one.xprof_process == two.xprof_process);
    CHECK(one.autograd_legacy == two.autograd_legacy);
    CHECK(one.ascend_npu == two.ascend_npu);
    REQUIRE(one.kernels.size() == two.kernels.size());
    for (size_t i = 0; i < one.kernels.size(); ++i) {
        const auto &mine = one.kernels[i], &theirs = two.kernels[i];
        INFO("kernel " << i);
        CHECK(one.strings.list[mine.name] == two.strings.list[theirs.name]);
        CHECK(std::tie(mine.ts, mine.dur, mine.stream, mine.correlation, mine.external, mine.tid, mine.device, mine.registers, mine.shared_mem,
                       mine.is_copy, mine.is_memset, mine.bytes, mine.copy_kind) ==
              std::tie(theirs.ts, theirs.dur, theirs.stream, theirs.correlation, theirs.external, theirs.tid, theirs.device, theirs.registers, theirs.shared_mem,
                       theirs.is_copy, theirs.is_memset, theirs.bytes, theirs.copy_kind));
        CHECK(std::equal(mine.grid, mine.grid + 3, theirs.grid));
        CHECK(std::equal(mine.block, mine.block + 3, theirs.block));
    }
    REQUIRE(one.memory.size() == two.memory.size());
    for (size_t i = 0; i < one.memory.size(); ++i) {
        const auto &mine = one.memory[i], &theirs = two.memory[i];
        CHECK(std::tie(mine.ts, mine.addr, mine.bytes, mine.total, mine.reserved, mine.index, mine.device, mine.has_addr) ==
              std::tie(theirs.ts, theirs.addr, theirs.bytes, theirs.total, theirs.reserved, theirs.index, theirs.device, theirs.has_addr));
    }
    REQUIRE(one.ops.size() == two.ops.size());
    for (size_t i = 0; i < one.ops.size(); ++i) {
        const auto &mine = one.ops[i], &theirs = two.ops[i];
        CHECK(one.strings.list[mine.name] == two.strings.list[theirs.name]);
        CHECK(std::tie(mine.ts, mine.dur, mine.tid, mine.external, mine.rf_id, mine.ev_idx) ==
              std::tie(theirs.ts, theirs.dur, theirs.tid, theirs.external, theirs.rf_id, theirs.ev_idx));
    }
    REQUIRE(one.ranges.size() == two.ranges.size());
    for (size_t i = 0; i < one.ranges.size(); ++i) {
        const auto &mine = one.ranges[i], &theirs = two.ranges[i];
        CHECK(one.strings.list[mine.name] == two.strings.list[theirs.name]);
        CHECK(std::tie(mine.ts, mine.dur, mine.step, mine.gpu) == std::tie(theirs.ts, theirs.dur, theirs.step, theirs.gpu));
    }
    auto same_map = [](const auto& left, const auto& right) {
        REQUIRE(left.size() == right.size());
        for (const auto& [key, value] : left) {
            auto it = right.find(key);
            REQUIRE(it != right.end());
            CHECK(std::tie(value.ts, value.tid) == std::tie(it->second.ts, it->second.tid));
        }
    };
    same_map(one.launches, two.launches);
    same_map(one.flow_starts, two.flow_starts);
}

// Events of every kind the mapping keeps, with repeated correlation and flow ids (a later one
// replaces an earlier one), negative durations and steps in both halves.
std::string mixed_events(int n, const std::string& string_arg) {
    std::string text;
    for (int i = 0; i < n; ++i) {
        const std::string ts = std::to_string(5000 + 7 * i) + ".25", id = std::to_string(i % 997);
        if (i) text += ",\n";
        text += "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"ProfilerStep#" + std::to_string(i / 1000) + "\",\"pid\":1,\"tid\":" +
             std::to_string(1 + i % 3) + ",\"ts\":" + ts + ",\"dur\":" + (i % 2500 == 17 ? "-3" : "6") +
             ",\"args\":{\"Record function id\":" + std::to_string(i) + ",\"note\":\"" + string_arg + "\"}},\n";
        text += "{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":1,\"tid\":1,\"ts\":" + ts +
             ",\"dur\":1,\"args\":{\"correlation\":" + id + "}},\n";
        // Every 600th flow start is a counter event instead (counted by category, in both halves).
        text += i % 600 == 7
                    ? "{\"ph\":\"C\",\"cat\":\"hardware_counters\",\"name\":\"c\",\"pid\":\"GPU 0 Counters\",\"tid\":0,"
                      "\"ts\":" +
                          ts + ",\"args\":{\"\":3}},\n"
                    : "{\"ph\":\"s\",\"cat\":\"ac2g\",\"id\":" + id + ",\"pid\":1,\"tid\":1,\"ts\":" + ts + "},\n";
        // Every 700th device event is of a category the mapping does not read (counted, in both halves).
        const char* category = i % 700 == 5 ? (i % 1400 == 5 ? "mtia_ccp_events" : "cuda_profiler_range") : i % 4 ? "kernel" : "gpu_memcpy";
        text += "{\"ph\":\"X\",\"cat\":\"" + std::string(category) + "\",\"name\":\"k" + std::to_string(i % 11) +
                (i % 4 ? "" : " Memcpy HtoD") + "\",\"pid\":0,\"tid\":7,\"ts\":" + ts +
                // Two memcpys peer copies (inDevice, no device), every 900th kernel without a device.
                ",\"dur\":2,\"args\":{" +
                (i % 3200 == 4  ? "\"inDevice\":1,"
                 : i % 900 == 1 ? ""
                                : "\"device\":0,") +
                "\"stream\":7,\"bytes\":64,\"correlation\":" + id + ",\"grid\":[2,1,1]}},\n";
        text += "{\"ph\":\"i\",\"name\":\"[memory]\",\"ts\":" + ts +
                ",\"args\":{\"Bytes\":" + (i % 2 ? "-512" : "512") + ",\"Device Type\":" +
                (i % 500 == 2 ? "2"
                 : i % 3      ? "1"
                              : "0") +
                ",\"Addr\":" + std::to_string(4096 * (i / 2 + 1)) + "}}";
    }
    return text;
}

// The document with the events between `head` and `tail`.
std::string trace_doc(const std::string& head, const std::string& events, const std::string& tail) {
    return "{" + head + "\"traceEvents\": [\n" + events + "\n]" + tail + "}\n";
}

}  // namespace

TEST_CASE("kineto parse: two threads, each from one half of a plain file, give the one-thread parse", "[import][kineto]") {
    test::TempDir dir;
    const std::string props = "\"deviceProperties\": [{\"id\": 0, \"name\": \"GPU zero\", \"totalGlobalMem\": 1024}]";
    const std::string old_props = "\"computeProperties\": [{\"id\": 0, \"name\": \"GPU zero\", \"totalGlobalMem\": 1024}]";
    // torch 2.4 writes baseTimeNanoseconds after traceEvents, 2.15 before it (writers/ fixtures).
    const std::string dist =
        "\"distributedInfo\": {\"rank\": 3, \"world_size\": 8}, \"baseTimeNanoseconds\": 1790857026000000000";
    const std::string events = mixed_events(6000, "x");
    // The text that looks like an element start ("}, {") inside a string: wherever the middle
    // falls, the guess is only taken where the first half really has an element there.
    const std::string tricky = mixed_events(3000, "a}, {\\\"ph\\\":\\\"X\\\"} , {b");
    const std::vector<std::pair<std::string, std::string>> docs = {
        {"members before", trace_doc(props + ", " + dist + ", ", events, "")},
        {"members after", trace_doc("\"schemaVersion\": 1, ", events, ", " + props + ", " + dist)},
        {"members on both sides", trace_doc(props + ", ", events, ", " + dist + ", \"traceName\": \"t\"")},
        // Two GPU lists (deviceProperties and its older name; one key twice is refused since 2026-12-05).
        {"device properties on both sides", trace_doc(props + ", ", events, ", " + old_props)},
        {"element starts inside strings", trace_doc("", tricky, "")},
    };
    for (const auto& [name, text] : docs) {
        DYNAMIC_SECTION(name) {
            const std::string path = dir.file("t.json");
            test::write_file(path, text);
            const KinetoData one = parse_kineto(path, UINT64_MAX, ParseThreads::One);
            const KinetoData two = parse_kineto(path, UINT64_MAX, ParseThreads::Two);
            CHECK(!one.streamed);
            CHECK(!two.streamed);
            CHECK(one.events == 5 * (name == "element starts inside strings" ? 3000 : 6000));
            CHECK(one.negative_durations > 1);
            if (name != "element starts inside strings")   // i = 5, 705, ..., 5605: every other one MTIA's
                CHECK(one.unread_categories == std::map<std::string, int64_t, std::less<>>{{"cuda_profiler_range", 4}, {"mtia_ccp_events", 5}});
            if (name != "element starts inside strings") {   // i = 7, 607, ..., 5407; 4, 3204; 1, 901, ..., 5401; 2,
                                                             // 502, ..., 5502
                CHECK(one.counter_categories == std::map<std::string, int64_t, std::less<>>{{"hardware_counters", 10}});
                CHECK(one.copies_on_in_device == 2);
                CHECK(one.activities_without_device == 7);
                CHECK(one.odd_memory_devices ==
                      std::map<std::string, int64_t, std::less<>>{{"Device Type 2 Id 0", 12}});
            }
            CHECK(one.second_part_from == -1);
            if (name.rfind("members", 0) == 0) CHECK(one.base_time_ns == INT64_C(1790857026000000000));
            // Device properties in both parts cannot be merged as one parse would keep them: one
            // thread then parses on. Elsewhere the second thread took the second half.
            if (name == "device properties on both sides") CHECK(two.second_part_from == -1);
            else if (name != "element starts inside strings") CHECK(two.second_part_from > one.events / 3);
            check_same(one, two);
        }
    }
}

TEST_CASE("kineto parse: a document that is one array (JSON Array Format, PyTorch 1.8) is its traceEvents",
          "[import][kineto]") {
    // PyTorch 1.8's profiler wrote [{"ph": ...}, ...] with no top-level object; it was refused
    // ("no top-level 'traceEvents' array"). The same events as an object's traceEvents give the same data.
    test::TempDir dir;
    const std::string events = mixed_events(6000, "x");
    test::write_file(dir.file("object.json"), trace_doc("", events, ""));
    test::write_file(dir.file("array.json"), "\n[\n" + events + "\n]\n");
    gzip_to(dir.file("array.json.gz"), "[" + events + "]");
    const KinetoData object = parse_kineto(dir.file("object.json"), UINT64_MAX, ParseThreads::One);
    for (const char* name : {"array.json", "array.json.gz"}) {
        for (ParseThreads threads : {ParseThreads::One, ParseThreads::Two}) {
            INFO(name);
            const KinetoData array = parse_kineto(dir.file(name), UINT64_MAX, threads);
            CHECK(array.events == 5 * 6000);
            check_same(object, array);
        }
    }
    CHECK(mhc::trace::import::detect_format(dir.file("array.json.gz")) == mhc::trace::import::Format::Kineto);
    // An array that holds no events is not taken for a trace.
    test::write_file(dir.file("numbers.json"), "[1, 2, 3]");
    CHECK_THROWS_WITH(mhc::trace::import::detect_format(dir.file("numbers.json")), Catch::Contains("unknown format"));
}

TEST_CASE("kineto parse: an error in the second half is reported as by one thread, with no output",
          "[import][kineto]") {
    test::TempDir dir;
    const int groups = 28000;
    std::string events = mixed_events(groups, "padding to pass the size from which two threads parse");
    REQUIRE(events.size() > mhc::trace::import::kSplitFrom);
    const size_t late = events.rfind("\"ts\":");   // in the last event
    const std::string last = "traceEvents[" + std::to_string(5 * groups - 1) + "]: ";
    const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
        {"bad field", events.substr(0, late) + "\"ts\":\"soon\"" + events.substr(events.find(',', late)),
         last + "'ts' is a string, not a number"},
        // (Its 'ts' had no value here until 2026-12-07; such a member now reads as null: kineto_repair.hpp.)
        {"syntax error", events.substr(0, late) + "\"ts\" 5," + events.substr(events.find(',', late) + 1),
         "invalid JSON"},
    };
    for (const auto& [name, text, expect] : cases) {
        DYNAMIC_SECTION(name) {
            const std::string in = dir.file("bad.json"), out = dir.file("out.db");
            test::write_file(in, trace_doc("", text, ""));
            // The second thread fails where the error lies; the first then parses on to it.
            auto message = [&](ParseThreads threads) {
                try {
                    parse_kineto(in, UINT64_MAX, threads);
                } catch (const mhc::Error& e) {
                    return std::string(e.what());
                }
                return std::string("accepted");
            };
            const std::string one = message(ParseThreads::One);
            CHECK(one.rfind(in + ": ", 0) == 0);
            CHECK(one.find(expect) != std::string::npos);
            CHECK(message(ParseThreads::Two) == one);
            mhc::trace::import::Options opt;
            opt.warn = false;
            try {
                mhc::trace::import::import_file(in, out, opt);
                FAIL("accepted");
            } catch (const mhc::Error& e) {
                const std::string message = e.what();
                INFO(message);
                CHECK(message.rfind(in + ": ", 0) == 0);
                CHECK(message.find(expect) != std::string::npos);
            }
            std::string err;
            CHECK(test::run_mhc("import " + in + " -o " + out, &err) == 2);
            CHECK(err.find(in + ": ") != std::string::npos);
            CHECK(err.find(expect) != std::string::npos);
            CHECK(std::count(err.begin(), err.end(), '\n') == 1);
            CHECK(dir.entries() == 1);   // the input alone: no output, no temporary
        }
    }
}

TEST_CASE("kineto parse: gzip inflated on a second thread, corrupt data late in the file is an error", "[import][kineto]") {
    test::TempDir dir;
    Doc doc = make_doc(150000, 0, "\n  ");
    test::TempDir src;
    gzip_to(src.file("a.json.gz"), doc.text);
    const std::string gz = test::read_file(src.file("a.json.gz"));
    const std::string in = dir.file("late.json.gz"), out = dir.file("out.db");
    // Cut at 90%: the reading thread has handed over many blocks before it meets the end.
    test::write_file(in, gz.substr(0, gz.size() * 9 / 10));
    for (ParseThreads threads : {ParseThreads::One, ParseThreads::Two}) {
        try {
            parse_kineto(in, UINT64_MAX, threads);
            FAIL("accepted");
        } catch (const mhc::Error& e) {
            CHECK(std::string(e.what()) == in + ": the gzip data is truncated");
        }
    }
    // Whole, the same events either way.
    const std::string whole = src.file("whole.json.gz");
    test::write_file(whole, gz);
    check_same(parse_kineto(whole, UINT64_MAX, ParseThreads::One), parse_kineto(whole, UINT64_MAX, ParseThreads::Two));
    std::string err;
    CHECK(test::run_mhc("import " + in + " -o " + out, &err) == 2);
    CHECK(err.find(in + ": the gzip data is truncated") != std::string::npos);
    CHECK(dir.entries() == 1);
}
