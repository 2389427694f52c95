// The safe pickle reader on hand-checked pickles (bytes from CPython's pickle module) and
// on the public snapshots.
#include <algorithm>

#include <catch2/catch.hpp>

#include "mhc/common/error.hpp"
#include "mhc/trace/import/pickle.hpp"
#include "util.hpp"

using mhc::trace::import::PickleDoc;

namespace {

std::string unhex(const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    return out;
}

// python3 -c "import pickle; print(pickle.dumps({'a':[1,-2,300,70000,2**40,-2**63,1.5,True,None,
//   'h\u00e9llo',b'xy',(1,2),2**70], 'b':{}, 'n': 2**64-1}, protocol=P).hex())"   (P = 4, 5)
const char* kProto4 =
    "8004956d000000000000007d94288c0161945d94284b014afeffffff4d2c014a701101008a060000000000018a08000000000000"
    "0080473ff8000000000000884e8c0668c3a96c6c6f9443027879944b014b0286948a09000000000000000040658c0162947d948c"
    "016e948a09ffffffffffffffff00752e";
const char* kProto5 =
    "8005956d000000000000007d94288c0161945d94284b014afeffffff4d2c014a701101008a060000000000018a08000000000000"
    "0080473ff8000000000000884e8c0668c3a96c6c6f9443027879944b014b0286948a09000000000000000040658c0162947d948c"
    "016e948a09ffffffffffffffff00752e";
// pickle.dumps([s, s], protocol=2) with s = [1, 2]: the second item is a memo reference.
const char* kMemo = "80025d7100285d7101284b014b02656801652e";
// pickle.dumps(collections.OrderedDict(a=1), protocol=2): GLOBAL at byte 2.
const char* kGlobal = "800263636f6c6c656374696f6e730a4f726465726564446963740a71002952710158010000006171024b01732e";

}  // namespace

TEST_CASE("pickle: plain data of protocols 4 and 5", "[pickle]") {
    for (const char* hex : {kProto4, kProto5}) {
        std::string bytes = unhex(hex);
        PickleDoc d(bytes, "mem");
        auto root = d.root();
        REQUIRE(d.kind(root) == PickleDoc::Kind::Dict);
        REQUIRE(d.size(root) == 3);
        auto a = d.get(root, "a");
        REQUIRE(a);
        const auto& it = d.items(*a);
        REQUIRE(it.size() == 13);
        CHECK(d.as_int(it[0]) == 1);
        CHECK(d.as_int(it[1]) == -2);
        CHECK(d.as_int(it[2]) == 300);
        CHECK(d.as_int(it[3]) == 70000);
        CHECK(d.as_int(it[4]) == (int64_t(1) << 40));
        CHECK(d.as_int(it[5]) == INT64_MIN);
        CHECK(d.kind(it[6]) == PickleDoc::Kind::Float);
        CHECK(d.as_float(it[6]) == 1.5);
        CHECK(d.kind(it[7]) == PickleDoc::Kind::Bool);
        CHECK(d.as_int(it[7]) == 1);
        CHECK(d.kind(it[8]) == PickleDoc::Kind::None);
        CHECK(d.as_str(it[9]) == "h\xc3\xa9llo");
        CHECK(d.kind(it[10]) == PickleDoc::Kind::Bytes);
        CHECK(d.as_str(it[10]) == "xy");
        CHECK(d.kind(it[11]) == PickleDoc::Kind::Tuple);
        CHECK(d.size(it[11]) == 2);
        CHECK(d.kind(it[12]) == PickleDoc::Kind::BigInt);   // 2**70 does not fit
        CHECK(d.size(*d.get(root, "b")) == 0);
        CHECK(d.kind(*d.get(root, "n")) == PickleDoc::Kind::BigInt);   // 2**64-1 neither
        CHECK_FALSE(d.get(root, "missing"));
    }
}

TEST_CASE("pickle: memo references share one object", "[pickle]") {
    std::string bytes = unhex(kMemo);
    PickleDoc d(bytes, "mem");
    const auto& outer = d.items(d.root());
    REQUIRE(outer.size() == 2);
    CHECK(outer[0] == outer[1]);
    CHECK(d.size(outer[0]) == 2);
}

// Slots are numbered in order by MEMOIZE (protocol 4) and by CPython's BINPUT: the next slot is
// never refused, however few objects hold nodes of their own (small ints hold none); a slot far
// beyond what was read still is.
TEST_CASE("pickle: the next memo slot is always taken, a far one is refused", "[pickle]") {
    std::string bytes("\x80\x04]\x94(", 5);   // a memoized list, then MARK
    for (int k = 0; k < 3000; ++k) bytes += std::string("K\x07\x94", 3);   // BININT1 7, MEMOIZE
    bytes += std::string("e", 1);                                           // APPENDS
    bytes += std::string("h\x02h\x00\x86.", 6);   // BINGET 2 (the 7 in slot 2), BINGET 0 (the list), TUPLE2
    PickleDoc doc(bytes, "memo");
    const auto& pair = doc.items(doc.root());
    REQUIRE(pair.size() == 2);
    CHECK(doc.as_int(pair[0]) == 7);
    CHECK(doc.size(pair[1]) == 3000);
    // LONG_BINPUT 5000 after one object: refused before anything is allocated for it.
    CHECK_THROWS_WITH(PickleDoc(std::string("\x80\x04K\x07r\x88\x13\x00\x00.", 9), "m"),
                      Catch::Contains("memo index 5000 is implausibly large"));
}

TEST_CASE("pickle: a memoized -1 is an object like any other, not an empty memo slot", "[pickle]") {
    // BININT -1, MEMOIZE, BINGET 0, TUPLE2: Python loads (-1, -1). The inline -1 is the id
    // 0xFFFFFFFF, which must not be taken for the mark of an empty slot.
    PickleDoc doc(std::string("\x80\x04J\xff\xff\xff\xff\x94h\x00\x86.", 12), "minus-one");
    const auto& pair = doc.items(doc.root());
    REQUIRE(pair.size() == 2);
    CHECK(doc.as_int(pair[0]) == -1);
    CHECK(doc.as_int(pair[1]) == -1);
    // A slot skipped by LONG_BINPUT stays empty: reading it is refused.
    CHECK_THROWS_WITH(PickleDoc(std::string("\x80\x04K\x07r\x02\x00\x00\x00h\x01\x86.", 13), "m"),
                      Catch::Contains("memo entry 1 does not exist"));
}

TEST_CASE("pickle: code-calling opcodes are refused with opcode and offset", "[pickle]") {
    std::string bytes = unhex(kGlobal);
    try {
        PickleDoc d(bytes, "evil.pickle");
        FAIL("GLOBAL was accepted");
    } catch (const mhc::Error& e) {
        std::string m = e.what();
        CHECK(m.find("evil.pickle") == 0);
        CHECK(m.find("refused opcode GLOBAL collections.OrderedDict: ") != std::string::npos);
        CHECK(m.find("byte 2") != std::string::npos);
    }
    // torch.save's pickle of a tensor (protocol 2): its rebuild function, named as a torch object.
    CHECK_THROWS_WITH(PickleDoc(std::string("\x80\x02" "ctorch._utils\n_rebuild_tensor_v2\nq\x00.", 38), "t.pkl"),
                      Catch::Contains("GLOBAL torch._utils._rebuild_tensor_v2: it would import or call code; only "
                                      "plain data is read (a tensor or other torch object: torch.save of one; a "
                                      "memory snapshot holds none)"));
    // REDUCE, BUILD, STACK_GLOBAL, NEWOBJ alone after PROTO: each named.
    for (auto [op, name] : {std::pair{'R', "REDUCE"}, {'b', "BUILD"}, {'\x93', "STACK_GLOBAL"}, {'\x81', "NEWOBJ"}, {'i', "INST"}}) {
        std::string p = std::string("\x80\x04", 2) + op + ".";
        try {
            PickleDoc d(p, "x");
            FAIL(name);
        } catch (const mhc::Error& e) {
            CHECK(std::string(e.what()).find(name) != std::string::npos);
            CHECK(std::string(e.what()).find("byte 2") != std::string::npos);
        }
    }
}

TEST_CASE("pickle: truncated and malformed input is an error, never a crash", "[pickle]") {
    std::string bytes = unhex(kProto4);
    for (size_t cut = 0; cut < bytes.size(); ++cut) {
        std::string part = bytes.substr(0, cut);
        CHECK_THROWS_AS(PickleDoc(part, "cut"), mhc::Error);
    }
    CHECK_THROWS_WITH(PickleDoc(std::string("\x80\x02h\x05.", 4), "m"), Catch::Contains("memo entry 5"));
    CHECK_THROWS_WITH(PickleDoc(std::string("\x80\x02" "a.", 4), "m"), Catch::Contains("stack underflow"));
    CHECK_THROWS_WITH(PickleDoc(std::string("\x80\x02\xff.", 4), "m"), Catch::Contains("unknown"));
}

TEST_CASE("pickle: the public snapshots parse to the event counts SOURCES.md gives", "[pickle]") {
    // SOURCES.md: 5,163 trace events and 1,040 alloc/free_completed events.
    for (auto [file, events] : {std::pair{"torch-snapshot/stanford-cs336-training-step.pickle", 5163},
                                {"torch-snapshot/mosaic-synthetic.pickle", 1040}}) {
        std::string bytes = test::read_file(test::pub(file));
        PickleDoc d(bytes, file);
        auto traces = d.get(d.root(), "device_traces");
        REQUIRE(traces);
        size_t n = 0;
        for (auto dev : d.items(*traces)) n += d.size(dev);
        CHECK(n == static_cast<size_t>(events));
    }
}

// pickle.dumps([2**30-1, 2**30, -2**30, -2**30-1, 2**31-1, -2**31, 255, 65535], protocol=4):
// ints on both sides of the reader's inline range [-2^30, 2^30).
TEST_CASE("pickle: ints around the inline range keep their values", "[pickle]") {
    // The first is CPython's output (BININT/BININT1/BININT2); the second was written by hand:
    // the same list with 2^30 and -2^30-1 as LONG1 (4 and 5 bytes), its FRAME length 43 (CPython
    // refuses a FRAME longer than the data: "pickle data was truncated").
    for (const char* hex :
         {"80049528000000000000005d94284affffff3f4a000000404a000000c04affffffbf4affffff7f4a000000804bff4dffff652e",
          "8004952b000000000000005d94284affffff3f8a04000000404a000000c08a05ffffffbfff4affffff7f4a000000804bff4dffff652e"}) {
    std::string bytes = unhex(hex);
    PickleDoc d(bytes, "mem");
    auto it = d.items(d.root());
    REQUIRE(it.size() == 8);
    const int64_t want[] = {(1 << 30) - 1, 1 << 30, -(1 << 30), -(1 << 30) - 1, INT32_MAX, INT32_MIN, 255, 65535};
    for (size_t i = 0; i < 8; ++i) {
        CHECK(d.kind(it[i]) == PickleDoc::Kind::Int);
        CHECK(d.as_int(it[i]) == want[i]);
        CHECK(d.as_float(it[i]) == static_cast<double>(want[i]));
        CHECK(d.as_str(it[i]).empty());
        CHECK(d.items(it[i]).empty());
    }
    }
}

// A list filled by APPENDS in batches of 1000 with other containers built in between (as
// CPython writes long lists of lists): items are moved and grown, never lost or reordered.
TEST_CASE("pickle: a list appended in batches between other containers", "[pickle]") {
    std::string b = "\x80\x04]\x94(";
    const int n = 2500;
    for (int i = 0; i < n; ++i) {
        b += "]\x94K";
        b += static_cast<char>(i % 256);
        b += 'a';
        if ((i + 1) % 1000 == 0) b += "e(";
    }
    b += "e.";
    PickleDoc d(b, "mem");
    auto it = d.items(d.root());
    REQUIRE(it.size() == n);
    for (int i = 0; i < n; ++i) {
        auto inner = d.items(it[i]);
        REQUIRE(inner.size() == 1);
        CHECK(d.as_int(inner[0]) == i % 256);
    }
}

TEST_CASE("pickle: protocols 0 and 1 are named and refused in one line, with how to write them again", "[pickle]") {
    // Python's pickle.dumps({'segments': [], 'device_traces': []}, protocol=0 and 1), byte for
    // byte. They begin "(dp0\n" (MARK, DICT,
    // PUT 0 as text) and "}q\0" (EMPTY_DICT, BINPUT 0); no PROTO opcode, so before 2026-12-06 they
    // were "unknown format: not a pickle ...". PyTorch writes snapshots in protocol 2 and later.
    test::TempDir dir;
    for (const auto& [bytes, protocol] :
         {std::pair{std::string("(dp0\nVsegments\np1\n(lp2\nsVdevice_traces\np3\n(lp4\ns.", 49), "0"},
          {std::string("}q\0(X\x08\0\0\0segmentsq\x01]q\x02X\r\0\0\0device_tracesq\x03]q\x04u.", 47), "1"}}) {
        const std::string in = dir.file("p" + std::string(protocol) + ".pickle");
        test::write_file(in, bytes);
        std::string err;
        CHECK(test::run_mhc("import " + in + " -o " + dir.file("t.db") + " --force", &err) == 2);
        CHECK(err.find(in + ": a pickle of protocol " + protocol + ", which mhc does not read") != std::string::npos);
        CHECK(err.find("pickle.dump(pickle.load(open(sys.argv[1], 'rb'))") != std::string::npos);
        CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    }
}
