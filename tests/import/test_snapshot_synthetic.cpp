// A hand-made snapshot with two devices, no time_us (order only), segment events, an OOM,
// a free of a block allocated before recording and an end-state block no event explains.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "mhc/trace/check.hpp"
#include "pickle_writer.hpp"
#include "util.hpp"

namespace {

// python3 -c "import pickle; fr=[{'name':'f','filename':'/x/site-packages/torch/a.py','line':1},
//   {'name':'train','filename':'/home/me/train.py','line':42}];
//   snap={'device_traces':[[{'action':'segment_alloc','addr':0x1000,'size':2097152,'stream':0},
//     {'action':'alloc','addr':0x1000,'size':512,'stream':0,'frames':fr},
//     {'action':'free_requested','addr':0x1000,'size':512,'stream':0},
//     {'action':'free_completed','addr':0x1000,'size':512,'stream':0},
//     {'action':'oom','addr':0,'size':1<<30,'stream':0}],
//    [{'action':'alloc','addr':0x2000,'size':1024,'stream':7},
//     {'action':'free_completed','addr':0x3000,'size':4096,'stream':7}]],
//   'segments':[{'device':1,'address':0x2000,'total_size':2097152,'stream':7,'blocks':[
//     {'address':0x2000,'size':1024,'state':'active_allocated'},
//     {'address':0x4000,'size':2048,'state':'active_allocated'},
//     {'address':0x5000,'size':999,'state':'inactive'}]}]};
//   print(pickle.dumps(snap,protocol=4).hex())"
const char* kSnap =
    "80049525020000000000007d94288c0d6465766963655f747261636573945d94285d94287d94288c06616374696f6e948c0d7365676d"
    "656e745f616c6c6f63948c0461646472944d00108c0473697a65944a000020008c0673747265616d944b00757d942868058c05616c6c"
    "6f639468074d001068084d000268094b008c066672616d6573945d94287d94288c046e616d65948c0166948c0866696c656e616d6594"
    "8c1b2f782f736974652d7061636b616765732f746f7263682f612e7079948c046c696e65944b01757d9428680f8c05747261696e9468"
    "118c112f686f6d652f6d652f747261696e2e70799468134b2a7565757d942868058c0e667265655f7265717565737465649468074d00"
    "1068084d000268094b00757d942868058c0e667265655f636f6d706c657465649468074d001068084d000268094b00757d942868058c"
    "036f6f6d9468074b0068084a0000004068094b0075655d94287d94286805680b68074d002068084d000468094b07757d94286805681a"
    "68074d003068084d001068094b077565658c087365676d656e7473945d947d94288c06646576696365944b018c076164647265737394"
    "4d00208c0a746f74616c5f73697a65944a0000200068094b078c06626c6f636b73945d94287d942868244d002068084d00048c057374"
    "617465948c106163746976655f616c6c6f636174656494757d942868244d004068084d00086829682a757d942868244d005068084de7"
    "0368298c08696e6163746976659475657561752e";

std::string unhex(const std::string& h) {
    std::string out;
    for (size_t i = 0; i + 1 < h.size(); i += 2) out += static_cast<char>(std::stoi(h.substr(i, 2), nullptr, 16));
    return out;
}

}  // namespace

TEST_CASE("snapshot: two devices, order-only timing, reconstruction, oom, segments", "[import][snapshot]") {
    test::TempDir dir;
    std::string in = dir.file("two.pickle"), out = dir.file("two.db");
    test::write_file(in, unhex(kSnap));
    mhc::trace::import::Options opt;
    auto r = mhc::trace::import::import_file(in, out, opt);
    auto t = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(t).ok());
    CHECK(r.events == 7);
    CHECK(t.meta.at("timing") == "order-only");
    CHECK(t.meta.at("snapshot.devices") == "2");
    CHECK(t.meta.at("reconstructed_blocks") == "2");   // the free of 0x3000 and the block at 0x4000
    CHECK(t.meta.at("snapshot.segment_events") == "1");
    CHECK(t.meta.at("snapshot.reserved_peak_from_segment_events") == "2097152");
    CHECK(t.meta.at("snapshot.oom_events") == "1");
    REQUIRE(t.allocations.size() == 4);
    // Device 0: 512 bytes from event 2 to event 4 (free_completed, not free_requested), labelled
    // by the user frame below the torch frame.
    CHECK(t.allocations.device[0] == 0);
    CHECK(t.allocations.t_alloc[0] == 2);
    CHECK(t.allocations.t_free[0] == 4);
    CHECK(t.str(t.allocations.label[0]) == "train (train.py:42)");
    // Device 1: 4096 bytes alive before recording until event 2, 2048 alive throughout, 1024 from
    // event 1 to the end: the peak is all three at once.
    CHECK(mhc::trace::live_peak(t, 1).bytes == 4096 + 2048 + 1024);
    CHECK(mhc::trace::live_peak(t, 0).bytes == 512);
    REQUIRE(t.markers.size() == 1);
    CHECK(t.str(t.markers.name[0]) == "oom: 1073741824 bytes requested");
    CHECK(t.markers.t_start[0] == 5);
}

TEST_CASE("snapshot: blocks allocated and freed within one microsecond keep the file's order",
          "[import][snapshot][event-order]") {
    // 1 MiB allocated at 10 us and alive to the end; then, five times, a 512 MiB block whose
    // alloc, free_requested and free_completed share one time_us (and at 14 us a 2 MiB block
    // made in the same microsecond, after the 512 MiB one is freed).
    using test::event;
    const int64_t MiB = 1 << 20, A = 0x7f0000000000, B = 0x7f1000000000, C = 0x7f2000000000;
    std::vector<test::Py> evs{event("alloc", A, MiB, 0, 10)};
    for (int i = 0; i < 5; ++i) {
        evs.push_back(event("alloc", B, 512 * MiB, 0, 11 + i));
        evs.push_back(event("free_requested", B, 512 * MiB, 0, 11 + i));
        evs.push_back(event("free_completed", B, 512 * MiB, 0, 11 + i));
    }
    evs.push_back(event("alloc", C, 2 * MiB, 0, 15));
    test::Py snap = test::Py::dict({{"device_traces", test::Py::list({test::Py::list(evs)})}});
    test::TempDir dir;
    std::string in = dir.file("z.pickle"), out = dir.file("z.db");
    test::write_file(in, snap.pickle());
    mhc::trace::import::import_file(in, out);
    auto t = mhc::trace::load_trace(out);
    REQUIRE(mhc::trace::check_trace(t).ok());
    REQUIRE(t.allocations.size() == 7);
    // Times: 1000 x (time_us - 10) + 1 + the event's rank in its microsecond.
    CHECK(t.allocations.t_alloc[0] == 1);
    CHECK(t.allocations.t_alloc[1] == 1001);
    CHECK(t.allocations.t_free[1] == 1003);   // free_completed, the third event of 11 us
    CHECK(t.allocations.t_alloc[6] == 5004);  // after the last 512 MiB block's three events
    // The briefly live blocks count once each, with the 1 MiB one: the peak the allocator saw.
    CHECK(mhc::trace::live_peak(t, 0).bytes == 513 * MiB);
    // Unlimited capacity gives back the recorded peak and frees every block.
    int rc = -1;
    auto j = nlohmann::json::parse(
        test::mhc_stdout("simulate " + out + " --capacity unlimited --allocator ideal --no-store --json", &rc));
    CHECK(rc == 0);
    CHECK(j["metrics"]["baseline_peak_bytes"].get<double>() == 513.0 * MiB);
    CHECK(j["metrics"]["simulated_peak_bytes"].get<double>() == 513.0 * MiB);
}
