// The Kineto parser reads JSON through a sliding window and parses each event in situ; it
// falls back to a streamed parse for what the window cannot hold. Both must give the same
// data, whatever the layout of the text (window boundaries, whitespace, escapes, members
// before and after traceEvents, gzip or plain). Expected values come from the generator.
#include <zlib.h>

#include <catch2/catch.hpp>

#include "kineto_parse.hpp"
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

void check(const Doc& doc, const std::string& path, bool expect_streamed) {
    auto d = mhc::trace::import::parse_kineto(path);
    CHECK(d.streamed == expect_streamed);
    CHECK(d.events == doc.events);
    CHECK(static_cast<int64_t>(d.kernels.size()) == doc.kernels);
    CHECK(static_cast<int64_t>(d.memory.size()) == doc.memory);
    CHECK(static_cast<int64_t>(d.ops.size()) == doc.ops);
    CHECK(static_cast<int64_t>(d.launches.size()) == doc.launches);
    CHECK(d.device_count == 2);
    CHECK(d.device_name == "GPU \"zero\"");
    CHECK(d.device_memory == 1024);
    REQUIRE(!d.kernels.empty());
    const auto& k = d.kernels.back();
    CHECK(d.strings.list[k.name] == "gemm_" + std::to_string((doc.kernels - 1) % 3));
    CHECK(k.ts == (1002 + 10 * (doc.kernels - 1)) * 1000);
    CHECK(k.dur == 2000);
    CHECK(k.grid[0] == 4);
    CHECK(k.block[0] == 128);
    CHECK(k.stream == 7);
    CHECK(d.ops.back().ts == (1000 + 10 * (doc.ops - 1)) * 1000 + 500);
    CHECK(d.memory.back().addr == 4096 * doc.memory);
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
    check(doc, dir.file("b.json"), true);
    check(doc, dir.file("b.json.gz"), true);
    // A small document goes the fast way.
    Doc small = make_doc(5, 100, "");
    test::write_file(dir.file("c.json"), small.text);
    check(small, dir.file("c.json"), false);
}
