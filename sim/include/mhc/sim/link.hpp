#pragma once
// Interconnect models between GPU memory and the memory evicted into (host over PCIe or
// NVLink-C2C, or a neighbouring GPU over NVLink). docs/simulator.md states how a transfer's
// time is computed from these figures.
#include <cstdint>
#include <string>
#include <vector>

namespace mhc::sim {

// Bounds of a link profile (docs/simulator.md). A transfer that still would not fit the
// simulator's time range (2^62 ns) is refused by the simulation as it happens.
inline constexpr double kMinBandwidthBps = 1e3, kMaxBandwidthBps = 1e15;
inline constexpr double kMaxLatencyS = 10;
inline constexpr int kMaxCopyEngines = 64;

struct Direction {
    double bandwidth_Bps = 0;   // one direction alone, pinned memory
    double latency_s = 0;       // fixed cost per transfer
};

struct LinkModel {
    std::string name;
    Direction h2d, d2h;
    int copy_engines = 2;        // 1: H2D and D2H share one queue; >= 2: one queue each way
    double duplex_factor = 1.0;  // bandwidth multiplier of a transfer started while the other
                                 // direction is busy (pcie4: 12.5/25 = 0.5)
    double nccl_share = 0.5;     // bandwidth share lost while a recorded NCCL kernel runs
    double memcpy_share = 0.5;   // share lost while a recorded memcpy of that direction runs
    std::string source;          // where the figures come from
    struct Chunk {
        int64_t bytes = 0;
        double h2d_Bps = 0, d2h_Bps = 0;
        double both_h2d_Bps = 0, both_d2h_Bps = 0;   // each direction while the other runs (0: not measured)
    };
    std::vector<Chunk> by_chunk; // optional calibration detail (`mhc calibrate`); the simulator
                                 // uses the flat figures, replay's validate its chunk's row
    std::vector<std::string> notes;   // what the writer or the calibration adjusted, in words
    double measured_load_average = -1;   // 1-minute load average when measured (-1: unknown)
};

// Preset names: pcie3, pcie4, pcie5, nvlink-c2c, nvlink4-peer.
const std::vector<LinkModel>& link_presets();
// A preset by name, or a link profile JSON file when `spec` names an existing file
// (format in docs/simulator.md, written by `mhc calibrate`). Throws mhc::Error (exit 2)
// naming the preset list, or the file and the field.
LinkModel link_from_spec(const std::string& spec);
LinkModel load_link_profile(const std::string& path);
// Throws mhc::Error naming `what` when a figure is not positive / in range.
void validate(const LinkModel& link, const std::string& what);

// Brings every figure of a measured link into the bounds validate() checks, so that a
// profile written from a measurement always loads: a duplex factor measured above 1 (both
// directions no slower than one: noise on a host, whose memcpy threads share no link) becomes
// 1, one below 0.05 becomes 0.05, bandwidths and latencies are clamped into their ranges,
// copy engines into 1..64. Returns one note per figure changed (also appended to link.notes).
std::vector<std::string> clamp_measured_link(LinkModel& link);
// Writes `link` as a link profile (docs/simulator.md), atomically: clamped first
// (clamp_measured_link), read back with load_link_profile before it takes its name (the
// reader is the judge). Returns the clamp notes. Throws mhc::Error naming the file.
std::vector<std::string> write_link_profile(const std::string& path, LinkModel link);

}  // namespace mhc::sim
