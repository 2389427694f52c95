// mhc advise TRACE (--capacity SIZE | --gpu NAME): which memory settings a PyTorch user can turn
// on make a captured training step fit, fastest first, with the code to apply them, and (with
// --verify) each answer checked by capturing the step with it applied (docs/advise.md).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "command.hpp"
#include "mhc/advise/answers.hpp"
#include "mhc/advise/calibrate.hpp"
#include "mhc/advise/code.hpp"
#include "mhc/advise/gpus.hpp"
#include "mhc/advise/planner.hpp"
#include "mhc/advise/verify.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/trace/check.hpp"

namespace {

// A note under the table, "(...)", wrapped within 100 columns under its opening bracket (a note of
// 175 columns ran past any terminal's edge).
void print_note(const char* pattern, ...) __attribute__((format(printf, 1, 2)));
void print_note(const char* pattern, ...) {
    va_list args, again;
    va_start(args, pattern);
    va_copy(again, args);
    const int length = std::vsnprintf(nullptr, 0, pattern, args);
    va_end(args);
    std::string text(static_cast<size_t>(std::max(length, 0)) + 1, '\0');
    std::vsnprintf(text.data(), text.size(), pattern, again);
    va_end(again);
    text.resize(static_cast<size_t>(std::max(length, 0)));
    while (!text.empty() && text.back() == '\n') text.pop_back();
    std::printf("%s", mhc::wrap(text, 100, 1, 0).c_str());
}

using namespace mhc::advise;

struct Options {
    std::string trace, capacity, gpu, budget, link = "pcie5", setting, host_bw = "100GB/s", host_tensor = "15us", trace_out;
    std::string comm_link;   // the collectives' link (empty: from the capture, comm.hpp)
    std::string step_time;   // the measured step without any setting (empty: the roofline's times)
    std::string model;       // --model: the model file --verify runs (a recipe naming one needs it)
    int top = 3;
    bool verify = false, json = false, force = false;
    bool top_given = false;   // --top given (its default is 3)
};

// An answer, and what --verify measured of it.
struct Row {
    Answer answer;
    bool verified = false;
    Captured captured;
    std::string verify_error;
};

const char* kTimeNote =
    "times are estimates (the capture's roofline, the link model and, under DDP or FSDP2, the collectives' ring "
    "model) until a GPU measures them";
const char* kCalibratedTimeNote =
    "times are estimates: kernels scaled to the measured --step-time, copies by the link model and, under DDP or "
    "FSDP2, collectives by the ring model";

// The baseline's time as printed: the roofline's estimate, or the measured step it was scaled to.
std::string baseline_time(const Prediction& baseline, const Calibration* cal) {
    if (!cal) return mhc::format_ns(baseline.step_time) + " (estimated)";
    char factor[32];
    std::snprintf(factor, sizeof factor, "%.2f", cal->factor);
    return mhc::format_ns(baseline.step_time) + " (last step " + mhc::format_ns(cal->calibrated_step) +
           ", as --step-time " + mhc::format_ns(cal->measured_step) + "; kernel times x" + factor +
           " the capture's roofline, whose step was " + mhc::format_ns(cal->estimated_step) + ")";
}

// The collectives' model and what they cost the baseline (DDP, FSDP2), or "" without them.
std::string comm_line(const Base& base, const Prediction& baseline) {
    const std::string model = describe(base.comm);
    if (model.empty()) return "";
    return model + "\n           collectives " + mhc::format_ns(baseline.comm) + " on their streams, " +
           mhc::format_ns(baseline.comm_waits) +
           " of it not hidden behind compute (every step of the capture; estimated)";
}

// A share in the size grammar (mhc help sizes), as sweep's --budget.
double budget_of(const std::string& text) {
    if (text.empty()) return -1;
    return mhc::cli::option_value("--budget", [&] { return mhc::parse_share(text, 1000); });
}

int64_t capacity_of(const Options& o, std::string& what) {
    if (o.capacity.empty() == o.gpu.empty()) throw mhc::Error("mhc advise: give the GPU as --capacity SIZE or --gpu NAME (one of them)");
    if (!o.gpu.empty()) {
        const GpuMemory& g = gpu_memory(o.gpu);
        what = o.gpu + ": " + mhc::format_bytes(g.bytes) + " - " + mhc::format_bytes(g.reserve) + " for the CUDA context";
        return g.bytes - g.reserve;
    }
    mhc::sim::Capacity c = mhc::sim::parse_capacity(o.capacity);
    // The settings searched change the peak a share would be of: the GPU is a fixed size here.
    if (c.fraction > 0 || c.unlimited())
        throw mhc::Error("advise --capacity '" + o.capacity +
                         "': give the GPU's memory as a size (80GiB) or --gpu NAME: the settings searched change "
                         "the peak, so a share of it or unlimited names no GPU");
    what = "--capacity " + o.capacity;
    return c.bytes;
}

// The reserved peak a row shows: under the capacity where one was given (the search), else
// without a limit (--setting).
int64_t shown_reserved(const Memory& memory) { return memory.capacity > 0 ? memory.reserved_at : memory.reserved; }

nlohmann::json row_json(const Row& row, const CaptureInfo& info) {
    const Candidate& c = row.answer.candidate;
    const Prediction& predicted = c.prediction;
    nlohmann::json out = {{"setting", row.answer.hf_off ? nlohmann::json{{"hf_checkpointing", false}}
                                                        : nlohmann::json::parse(to_json(c.setting))},
                          {"description", describe(row.answer, info)},
                          {"peak_bytes", predicted.memory.peak},
                          {"reserved_bytes", predicted.memory.reserved},
                          {"host_peak_bytes", predicted.host_peak},
                          {"step_time_ns", predicted.step_time},
                          {"loss", c.loss},
                          {"fits", c.fits},
                          {"code", code_for(row.answer, info)}};
    if (predicted.memory.capacity > 0) {   // the run with the capacity as the GPU's limit
        out["reserved_at_capacity_bytes"] = predicted.memory.reserved_at;
        out["alloc_retries"] = predicted.memory.retries;
        // what running there costs (docs/advise.md "What running at the capacity costs"), in the loss
        out["retry_cost_ns"] = predicted.memory.retry_cost;
        out["alloc_releases"] = predicted.memory.releases;
        out["segments_freed"] = predicted.memory.segments_freed;
        out["segments_remade"] = predicted.memory.segments_remade;
        out["bytes_freed"] = predicted.memory.bytes_freed;
        out["bytes_remade"] = predicted.memory.bytes_remade;
        // a steady step's share, times the capture's steps: what the time and the loss hold
        out["steady_retry_cost_ns"] = predicted.memory.steady_cost;
        out["steady"] = {{"steps", predicted.memory.steady_steps},
                         {"alloc_releases", predicted.memory.steady_releases},
                         {"segments_freed", predicted.memory.steady_segments_freed},
                         {"segments_remade", predicted.memory.steady_segments_remade},
                         {"bytes_freed", predicted.memory.steady_bytes_freed},
                         {"bytes_remade", predicted.memory.steady_bytes_remade}};
    }
    if (row.verified)
        out["verify"] = {{"peak_bytes", row.captured.memory.peak},
                         {"reserved_bytes", row.captured.memory.reserved},
                         {"host_peak_bytes", row.captured.host_peak},
                         {"peak_error", relative_error(predicted.memory.peak, row.captured.memory.peak)},
                         {"reserved_error", relative_error(predicted.memory.reserved, row.captured.memory.reserved)},
                         {"seconds", row.captured.seconds}};
    if (row.verified && row.captured.memory.capacity > 0) {   // the captured stream at the same capacity
        out["verify"]["fits"] = row.captured.memory.fits;
        out["verify"]["reserved_at_capacity_bytes"] = row.captured.memory.reserved_at;
        out["verify"]["alloc_retries"] = row.captured.memory.retries;
        out["verify"]["reserved_at_capacity_error"] = relative_error(predicted.memory.reserved_at,
                                                                     row.captured.memory.reserved_at);
    } else if (!row.verify_error.empty()) out["verify"] = {{"error", row.verify_error}};
    return out;
}

void verify_rows(std::vector<Row>& rows, const Options& opts, const std::map<std::string, std::string>& meta,
                 int64_t capacity) {
    if (!opts.model.empty())   // the code the captures run, said before they run
        std::fprintf(stderr, "--verify runs the model file %s (--model)\n", mhc::printable(opts.model).c_str());
    for (size_t i = 0; i < rows.size(); ++i) {
        const Candidate& c = rows[i].answer.candidate;
        if (rows[i].answer.hf_off) {   // its figures are a capture already
            rows[i].captured.memory = c.prediction.memory;
            rows[i].captured.host_peak = c.prediction.host_peak;
            rows[i].verified = true;
            continue;
        }
        // A private temporary file (mkstemp: a name nobody can guess or plant first), removed on
        // every way out, signals included: it was $TMPDIR/mhc-advise-PID-I.db, left behind when
        // the capture failed.
        mhc::TempFile out("advise-capture");
        out.close();
        if (mhc::cli::show_progress() && !opts.json)
            std::fprintf(stderr, "verifying %zu of %zu: capturing the step with the setting applied...\n", i + 1, rows.size());
        rows[i].captured = capture_with(opts.trace, meta, c.setting, out.path(), capacity);
        rows[i].verified = true;
    }
}

// --setting JSON|FILE: a word that is no JSON object was read as a file only when it is a regular
// file, else parsed as JSON: a mistyped file name, a folder or a pipe was "setting: not JSON: ...
// last read: 's'". Said as what it is, before the trace is read.
void check_setting_word(const std::string& text) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string::npos || text[first] == '{') return;   // JSON: parse_setting says what is wrong
    struct stat st {};
    if (::stat(text.c_str(), &st) != 0)
        throw mhc::Error("--setting " + mhc::no_such_file(text) + ", and not a JSON object ({\"checkpoint\": ...})");
    if (S_ISDIR(st.st_mode)) throw mhc::Error("--setting " + text + ": is a directory, not a setting file");
    if (!S_ISREG(st.st_mode))
        throw mhc::Error("--setting " + text + ": not a regular file (a pipe or a device): save the setting to a file");
}

// Options that the others given leave with nothing to do, or that would lose an input: refused
// before the trace is read.
void check_option_combinations(const Options& o) {
    if (!o.setting.empty()) check_setting_word(o.setting);
    if (!o.trace_out.empty() && o.setting.empty()) throw mhc::Error("--trace-out: give the setting to write with --setting");
    if (o.force && o.trace_out.empty())
        throw mhc::Error("--force: replaces an existing --trace-out file, and no --trace-out is given");
    // --trace-out naming the capture itself (any name: a link, a hard link) with --force replaced the
    // capture with the predicted step: the one file the prediction came from, lost.
    if (!o.trace_out.empty()) mhc::refuse_input_as_output(o.trace, o.trace_out);
    // So did --trace-out naming the --setting file (with --force): the setting, replaced by a trace.
    if (!o.trace_out.empty() && !o.setting.empty() && o.setting.find_first_not_of(" \t\r\n") != std::string::npos &&
        o.setting[o.setting.find_first_not_of(" \t\r\n")] != '{')
        mhc::refuse_input_as_output(o.setting, o.trace_out);
    // The search's options with one given setting: it is predicted as given, nothing is searched
    // or ranked, and no capacity is compared (refused, as --trace-out without --setting is).
    if (!o.setting.empty())
        for (const auto& [name, given] : {std::pair<const char*, bool>{"--capacity", !o.capacity.empty()},
                                          {"--gpu", !o.gpu.empty()},
                                          {"--budget", !o.budget.empty()},
                                          {"--top", o.top_given}})
            if (given)
                throw mhc::Error(std::string(name) + " and --setting: " + name +
                                 " is for the search, and --setting predicts the one setting given; give one");
    if (o.top < 1 || o.top > 100) throw mhc::Error("--top: " + std::to_string(o.top) + " is outside [1, 100]");
}

// --host-bandwidth and --host-tensor-cost: what a host optimizer step costs.
HostModel host_model_of(const Options& o) {
    HostModel host;
    host.bandwidth_Bps = mhc::cli::option_value("--host-bandwidth", [&] {
        // The link's bounds (docs/simulator.md): 0.001B/s made the plan's host step last 10^18 ns,
        // refused as "T.db: allocations row 65: t_free ... [range]", blaming the capture.
        const double bps = mhc::parse_bandwidth(o.host_bw);
        if (bps < mhc::sim::kMinBandwidthBps || bps > mhc::sim::kMaxBandwidthBps)
            throw mhc::Error("'" + o.host_bw + "' is outside [1kB/s, 1000TB/s]");
        return bps;
    });
    host.per_tensor_s = mhc::cli::option_value("--host-tensor-cost", [&] {
        const double seconds = mhc::parse_seconds(o.host_tensor);
        if (seconds > 1) throw mhc::Error("'" + o.host_tensor + "' is more than 1 s");
        return seconds;
    });
    return host;
}

// --step-time in ns (0: not given), refused before the trace is read when it is not a time.
int64_t measured_step_of(const Options& o) {
    if (o.step_time.empty()) return 0;
    const double seconds = mhc::cli::option_value("--step-time", [&] { return mhc::parse_seconds(o.step_time); });
    if (!(seconds > 0) || seconds > 3600)
        throw mhc::Error("--step-time: '" + o.step_time + "' is not a step time in (0, 1 h]");
    const int64_t measured_step = std::llround(seconds * 1e9);
    // Below half a nanosecond it rounded to 0, which means "not given": the option was dropped.
    if (measured_step < 1)
        throw mhc::Error("--step-time: '" + o.step_time + "' is less than 1 ns (a step time in (0, 1 h])");
    return measured_step;
}

// The capture, checked as `mhc check` checks one, with --verify's recipe settled before any work.
mhc::trace::TraceData load_capture(const Options& o) {
    auto data = mhc::trace::load_checked_trace(o.trace);
    // --verify's recipe, before any work: a model file the trace names runs only as --model.
    if (o.verify) data.meta["capture.recipe"] = recipe_to_run(o.trace, data.meta, o.model);
    // What a capture keeps beyond any trace (`mhc check` says it too), before the plan is made of it.
    mhc::trace::require_ok(mhc::trace::check_capture(data), o.trace);
    return data;
}

// --comm-link: the collectives' link, where the capture has collectives.
void apply_comm_link(const Options& o, const mhc::trace::TraceData& data, Base& base) {
    if (o.comm_link.empty()) return;
    // The input decides whether --comm-link does anything: said, not refused (a script may pass it to every capture).
    if (base.info.data_parallel.empty())
        std::fprintf(
            stderr,
            "mhc: warning: --comm-link %s has no effect: %s has no DDP or FSDP2 collectives (a step on one GPU)\n",
            mhc::printable(o.comm_link).c_str(), mhc::printable(o.trace).c_str());
    apply_comm_model(base, comm_model(data, base.info, o.comm_link));
}

// --setting: the one given setting, predicted (and with --trace-out, written as the step it makes).
std::vector<Row> predict_given(const Options& o, const Base& base, const Evaluator& ev, Advice& advice) {
    Setting setting = parse_setting(o.setting);
    check_selective(base, setting);
    if (!o.trace_out.empty()) write_trace(ev.trace(setting), o.trace_out, o.force);
    advice.baseline = ev.predict(Setting{});
    return {Row{predicted_answer(ev, setting, advice.baseline), false, {}, ""}};
}

// The search: the settings that fit, fastest first; none is bad input, said in one line.
std::vector<Row> search(const Options& o, const Base& base, const Evaluator& ev, int64_t capacity, double budget,
                        Advice& advice) {
    PlannerOptions po;
    po.capacity = capacity;
    po.budget = budget;
    po.top = o.top;
    if (mhc::cli::show_progress() && !o.json)
        po.progress = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
    advice = advise(ev, po);
    std::vector<Row> rows;
    for (Answer& answer : ranked_answers(advice, base, capacity, budget, o.top))
        rows.push_back(Row{std::move(answer), false, {}, ""});
    if (rows.empty()) throw mhc::Error(o.trace + ": " + nothing_fits(advice, base.info, capacity, budget));
    return rows;
}

// What the report shows: the inputs, the search and its answers.
struct Report {
    const Options& o;
    const Base& base;
    const Evaluator& ev;
    const HostModel& host;
    const Calibration* cal;   // --step-time's, or none
    int64_t capacity;         // 0 with --setting
    std::string capacity_what;
    double budget;
    Advice advice;
    std::vector<Row> rows;
    // Under a capacity (the search): the reserved peak with it as the GPU's limit, and without one.
    bool limited() const { return o.setting.empty() && capacity > 0; }
    // A time is the whole captured trace's: with several steps, say so rather than call it a step.
    std::string time_of() const {
        return base.steps.size() > 1 ? std::to_string(base.steps.size()) + " steps" : "step";
    }
};

void print_json(const Report& r) {
    const Advice& a = r.advice;
    nlohmann::json doc = {
        {"trace", r.o.trace},
        {"capacity_bytes", r.capacity},
        {"link", r.ev.link().name},
        {"comm", describe(r.base.comm)},
        {"budget", r.budget},
        {"baseline",
         {{"peak_bytes", a.baseline.memory.peak},
          {"reserved_bytes", a.baseline.memory.reserved},
          {"fits", r.o.setting.empty() ? nlohmann::json(fits(a.baseline.memory, r.capacity)) : nlohmann::json(nullptr)},
          {"step_time_ns", a.baseline.step_time},
          {"comm_ns", a.baseline.comm},
          {"comm_exposed_ns", a.baseline.comm_waits}}},
        {"times", r.cal ? kCalibratedTimeNote : kTimeNote},
        {"passes_per_step", r.base.passes},
        {"calibration", r.cal ? nlohmann::json{{"factor", r.cal->factor},
                                               {"estimated_step_ns", r.cal->estimated_step},
                                               {"measured_step_ns", r.cal->measured_step},
                                               {"calibrated_step_ns", r.cal->calibrated_step}}
                              : nlohmann::json(nullptr)},
        {"data_parallel", data_parallel_note(r.base.info)},
        {"rows", nlohmann::json::array()},
        {"search",
         {{"dp_runs", a.dp_runs},
          {"evaluations", a.evaluations},
          {"max_states", a.max_states},
          {"allocator_confs", a.allocator_confs},
          {"split_conf", a.split_conf},
          {"split_values", a.split_values},
          {"roundup_values", a.roundup_values},
          {"allocator_trials", a.allocator_trials},
          {"seconds", a.seconds}}}};
    for (const Row& row : r.rows) doc["rows"].push_back(row_json(row, r.base.info));
    std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// The lines above the table: the trace, its notes, the GPU, the links and the baseline.
void print_header(const Report& r) {
    const Base& base = r.base;
    const std::string blocks = base.info.block_name.empty()
                                   ? std::string("no blocks")
                                   : std::to_string(base.info.block_name.size()) + " blocks (" + base.info.block_prefix + ")";
    std::printf("trace      %s: %s, %zu step%s\n", r.o.trace.c_str(), blocks.c_str(), base.steps.size(),
                base.steps.size() == 1 ? "" : "s");
    if (const std::string note = mhc::advise::blocks_note(base.info); !note.empty()) std::printf("note       %s\n", note.c_str());
    if (const std::string own = mhc::advise::own_checkpoint_note(base.info); !own.empty())
        std::printf("note       %s\n", own.c_str());
    // Gradient accumulation where the capture says so (capture.micro_batches); a step of the
    // user's own with several backward passes and an optimizer step after each group (a GAN's
    // discriminator and generator) is not.
    if (base.passes > 1 && base.info.micro_batches == base.passes)
        std::printf(
            "note       %d forward and backward passes per step (gradient accumulation): settings act in each\n",
            base.passes);
    else if (base.passes > 1)
        std::printf("note       %d backward passes per step (the step function's, not gradient accumulation): "
                    "settings act in each\n", base.passes);
    if (const std::string dp = data_parallel_note(base.info); !dp.empty()) std::printf("note       %s\n", dp.c_str());
    if (!r.capacity_what.empty())
        std::printf("capacity   %s (%s)\n", mhc::format_bytes(r.capacity).c_str(), r.capacity_what.c_str());
    std::printf("link       %s; host optimizer steps at %s + %s per parameter tensor\n", r.ev.link().name.c_str(),
                mhc::format_rate(r.host.bandwidth_Bps).c_str(),
                mhc::format_ns(std::llround(r.host.per_tensor_s * 1e9)).c_str());
    const Prediction& baseline = r.advice.baseline;
    if (const std::string comm = comm_line(base, baseline); !comm.empty()) std::printf("comm       %s\n", comm.c_str());
    std::printf("baseline   peak %s, reserved %s, %s %s%s\n", mhc::format_bytes(baseline.memory.peak).c_str(),
                mhc::format_bytes(baseline.memory.reserved).c_str(), r.time_of().c_str(),
                baseline_time(baseline, r.cal).c_str(),
                r.o.setting.empty() && r.capacity > 0 && !fits(baseline.memory, r.capacity) ? ": does not fit" : "");
}

// The answers' table: peaks, time and loss.
void print_answers(const Report& r) {
    std::printf("\n%-4s %10s %10s", "rank", "peak", "reserved");
    if (r.limited()) std::printf(" %10s", "no limit");
    std::printf(" %10s %11s %7s", "host peak", r.base.steps.size() > 1 ? "time (est.)" : "step (est.)", "loss");
    std::printf("  setting\n");
    for (size_t i = 0; i < r.rows.size(); ++i) {
        const Candidate& c = r.rows[i].answer.candidate;
        const Prediction& p = c.prediction;
        std::printf("%-4zu %10s %10s", i + 1, mhc::format_bytes(p.memory.peak).c_str(),
                    mhc::format_bytes(shown_reserved(p.memory)).c_str());
        if (r.limited()) std::printf(" %10s", mhc::format_bytes(p.memory.reserved).c_str());
        std::printf(" %10s %11s %7s", mhc::format_bytes(p.host_peak).c_str(),
                    mhc::format_ns(time_at_capacity(p)).c_str(), format_loss(c.loss).c_str());
        std::printf("  %s\n", describe(r.rows[i].answer, r.base.info).c_str());
    }
}

// --verify's table, of its own (beside the predictions it ran to 150 columns): like with like,
// the captured stream through the same model, at the same capacity.
void print_verified(const Report& r) {
    std::printf("verified: each setting applied and the step captured again\n%-4s %14s %17s %9s %12s", "rank",
                "captured peak", "captured reserved", "peak err", "reserved err");
    if (r.limited()) std::printf(" %5s", "runs");
    std::printf("\n");
    for (size_t i = 0; i < r.rows.size(); ++i) {
        const Row& row = r.rows[i];
        const Prediction& p = row.answer.candidate.prediction;
        std::printf("%-4zu %14s %17s %8.2f%% %11.2f%%", i + 1, mhc::format_bytes(row.captured.memory.peak).c_str(),
                    mhc::format_bytes(shown_reserved(row.captured.memory)).c_str(),
                    100 * relative_error(p.memory.peak, row.captured.memory.peak),
                    100 * relative_error(shown_reserved(p.memory), shown_reserved(row.captured.memory)));
        if (r.limited()) std::printf(" %5s", row.captured.memory.fits ? "yes" : "NO");
        std::printf("\n");
    }
}

// Where a steady step pays otherwise than the capture's steps: what a steady step does, which the
// time holds (docs/advise.md "What running at the capacity costs").
std::string steady_cost_words(const Memory& mem) {
    if (mem.steady_cost == mem.retry_cost) return "in its time";
    return "in the capture; a steady step: " + std::to_string(mem.steady_releases) + " full release" +
           (mem.steady_releases == 1 ? "" : "s") + ", " + std::to_string(mem.steady_segments_freed) + " given back (" +
           mhc::format_bytes(mem.steady_bytes_freed) + ") and " + std::to_string(mem.steady_segments_remade) +
           " made again (" + mhc::format_bytes(mem.steady_bytes_remade) + ")" +
           (mem.steady_steps > 1 ? " over " + std::to_string(mem.steady_steps) + " steps" : "") + ", " +
           mhc::format_ns(mem.steady_cost / std::max<int64_t>(1, mem.steps)) + " a step, " +
           mhc::format_ns(mem.steady_cost) + " in its time";
}

// Under a capacity: what the reserved column means, and what each answer pays to run there.
void print_capacity_notes(const Report& r) {
    print_note(
        "(reserved: the caching allocator's peak with %s as the GPU's limit, where a failed cudaMalloc "
        "gives cached memory back and retries, as PyTorch does; no limit: its peak on a larger GPU)\n",
        mhc::format_bytes(r.capacity).c_str());
    for (size_t i = 0; i < r.rows.size(); ++i) {
        const Memory& mem = r.rows[i].answer.candidate.prediction.memory;
        const std::string steady = steady_cost_words(mem);
        if (mem.retries > 0)
            print_note(
                "(%zu. runs only by giving cached memory back: %lld cudaMalloc retr%s, %lld full release%s (a "
                "synchronisation each), %lld segment%s given back (%s) and %lld made again (%s): %s %s)\n",
                i + 1, static_cast<long long>(mem.retries), mem.retries == 1 ? "y" : "ies",
                static_cast<long long>(mem.releases), mem.releases == 1 ? "" : "s",
                static_cast<long long>(mem.segments_freed), mem.segments_freed == 1 ? "" : "s",
                mhc::format_bytes(mem.bytes_freed).c_str(), static_cast<long long>(mem.segments_remade),
                mhc::format_bytes(mem.bytes_remade).c_str(), mhc::format_ns(mem.retry_cost).c_str(), steady.c_str());
        else if (mem.retry_cost > 0 || mem.steady_cost > 0)   // garbage collection's frees alone
            print_note(
                "(%zu. gives cached memory back by garbage collection: %lld segment%s (%s), %lld made again "
                "(%s): %s %s)\n",
                i + 1, static_cast<long long>(mem.segments_freed), mem.segments_freed == 1 ? "" : "s",
                mhc::format_bytes(mem.bytes_freed).c_str(), static_cast<long long>(mem.segments_remade),
                mhc::format_bytes(mem.bytes_remade).c_str(), mhc::format_ns(mem.retry_cost).c_str(), steady.c_str());
    }
}

// What the search did: its DP runs and evaluations, and the allocator settings it tried.
void print_search(const Report& r) {
    const Advice& a = r.advice;
    std::printf("\nsearch: %lld DP runs over %zu blocks (at most %lld states), %lld evaluations, %.1f s\n",
                static_cast<long long>(a.dp_runs), r.base.info.block_name.size(), static_cast<long long>(a.max_states),
                static_cast<long long>(a.evaluations), a.seconds);
    if (a.split_conf.empty()) return;
    std::string confs;
    for (const std::string& conf : a.allocator_confs)
        confs += (confs.empty() ? "" : ", ") + (conf.empty() ? "as captured" : conf);
    std::printf(
        "        allocator settings searched: %s (the last: of %lld values of max_split_size_mb and %lld of "
        "roundup_power2_divisions tried on the captured step, the one that does best at the capacity)\n",
        confs.c_str(), static_cast<long long>(a.split_values), static_cast<long long>(a.roundup_values));
}

void print_text(const Report& r) {
    print_header(r);
    print_answers(r);
    if (r.o.verify) print_verified(r);
    if (r.limited()) print_capacity_notes(r);
    print_note("(%s%s)\n",
               r.base.steps.size() > 1 ? ("time: the " + r.time_of() + " of the capture together; ").c_str() : "",
               r.cal ? kCalibratedTimeNote : kTimeNote);
    for (size_t i = 0; i < r.rows.size(); ++i)
        std::printf("\n# %zu. %s\n%s\n", i + 1, describe(r.rows[i].answer, r.base.info).c_str(),
                    code_for(r.rows[i].answer, r.base.info).c_str());
    if (r.o.setting.empty()) print_search(r);
}

int run(const Options& o) {
    const double budget = budget_of(o.budget);
    check_option_combinations(o);
    std::string capacity_what;
    const int64_t capacity = o.setting.empty() ? capacity_of(o, capacity_what) : 0;
    const HostModel host = host_model_of(o);
    if (!o.comm_link.empty()) check_comm_link(o.comm_link);
    const int64_t measured_step = measured_step_of(o);
    if (!o.model.empty() && !o.verify)
        throw mhc::Error("--model: the model file --verify runs, and no --verify is given");
    const mhc::trace::TraceData data = load_capture(o);
    Base base = make_base(data);
    apply_comm_link(o, data, base);
    const mhc::sim::LinkModel link = mhc::sim::link_from_spec(o.link);
    std::optional<Calibration> calibration;
    if (measured_step > 0) calibration = calibrate_compute(base, link, measured_step);
    const Evaluator ev(base, link, host);
    Report report{o, base, ev, host, calibration ? &*calibration : nullptr, capacity, capacity_what, budget, {}, {}};
    report.rows = o.setting.empty() ? search(o, base, ev, capacity, budget, report.advice)
                                    : predict_given(o, base, ev, report.advice);
    if (o.verify) verify_rows(report.rows, o, data.meta, o.setting.empty() ? capacity : 0);
    if (o.json) print_json(report);
    else print_text(report);
    return mhc::cli::kExitOk;
}

mhc::cli::Registration reg{mhc::cli::Command{
    "advise",
    "Rank the memory settings a PyTorch user can turn on (checkpointing, offloading, optimizer implementation "
    "and placement, allocator) for a captured training step, print the code to apply them, and verify them",
    [](CLI::App& app) -> std::function<int()> {
        auto o = std::make_shared<Options>();
        app.add_option("trace", o->trace, "A captured training step (mhc-torch capture)")->required()->check(CLI::ExistingFile);
        app.add_option("--capacity", o->capacity, "GPU memory the reserved peak must fit, e.g. 80GiB")->type_name("SIZE");
        app.add_option("--gpu", o->gpu, "The GPU: " + gpu_names() + " (its memory less 1 GiB for the CUDA context)")
            ->type_name("NAME");
        app.add_option("--budget", o->budget, "Largest loss of step time against the baseline, e.g. 3% (none without it)")
            ->type_name("SHARE");
        app.add_option("--link", o->link, "Link to the host: a preset (pcie3, pcie4, pcie5, nvlink-c2c) or a link profile")
            ->type_name("LINK")
            ->default_str(o->link);
        app.add_option("--comm-link", o->comm_link,
                       "The collectives' link (DDP, FSDP2): nvlink (the capture's GPU), ib-ndr, ib-hdr, or a bus "
                       "bandwidth such as 200GB/s (default: nvlink up to 8 ranks, else ib-ndr)")
            ->type_name("LINK");
        app.add_option("--step-time", o->step_time,
                       "The step's measured time without any setting, e.g. 60ms (the median of a run's steady steps): "
                       "kernel times are scaled to it (the roofline's without it)")
            ->type_name("TIME");
        app.add_option("--host-bandwidth", o->host_bw, "Memory bandwidth a host optimizer step streams at (an assumption)")
            ->type_name("RATE")
            ->default_str(o->host_bw);
        app.add_option("--host-tensor-cost", o->host_tensor,
                       "Fixed cost of a host optimizer step per parameter tensor (an assumption)")
            ->type_name("TIME")
            ->default_str(o->host_tensor);
        auto* top = app.add_option("--top", o->top, "How many settings to print")->default_str(std::to_string(o->top));
        app.add_option("--setting", o->setting, "Predict one given setting (JSON or a file) instead of searching")
            ->type_name("JSON|FILE");
        app.add_option("--trace-out", o->trace_out, "With --setting: write the step as the setting changes it (a trace)")
            ->type_name("FILE");
        app.add_flag("--force", o->force, "Replace an existing --trace-out file");
        app.add_flag("--verify", o->verify, "Capture the step with each printed setting applied (mhc-torch) and compare");
        app.add_option("--model", o->model,
                       "With --verify, for a capture of a model file: the file to run (the trace's recipe names it; "
                       "--verify runs no file a trace names)")
            ->type_name("FILE.py");
        app.add_flag("--json", o->json, "Machine-readable output");
        return [o, top] {
            o->top_given = top->count() > 0;
            return run(*o);
        };
    }}};

}  // namespace
