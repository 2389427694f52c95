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

struct Row {
    Candidate c;
    bool verified = false;
    Captured captured;
    std::string verify_error;
    bool hf_off = false;   // the model's own gradient checkpointing turned off: figures a capture measured
};

// The Hugging Face model's own gradient checkpointing turned off, as an answer: the step the
// capture took again without it (meta capture.without_hf_checkpointing), its time relative to
// the captured step's last (both the capture's estimates) applied to the baseline's. None when
// the capture has no such figures or no reserved bytes for them.
std::optional<Row> hf_off_row(const Base& base, const Prediction& baseline) {
    const CaptureInfo::HfOff& figures = base.info.hf_off;
    if (figures.peak < 0 || figures.reserved < 0 || figures.step_ns <= 0 || baseline.step_time <= 0)
        return std::nullopt;
    int64_t with = figures.with_step_ns;
    if (with <= 0) {   // the last step's span in the trace
        const auto& kernel_rows = base.trace->kernels;
        int64_t last = INT64_MIN, begin = INT64_MAX, end = INT64_MIN;
        for (size_t i = 0; i < kernel_rows.size(); ++i) last = std::max<int64_t>(last, kernel_rows.step[i]);
        for (size_t i = 0; i < kernel_rows.size(); ++i)
            if (kernel_rows.step[i] == last)
                begin = std::min(begin, kernel_rows.t_start[i]), end = std::max(end, kernel_rows.t_end[i]);
        with = end > begin ? end - begin : 0;
    }
    if (with <= 0) return std::nullopt;
    Row row;
    row.hf_off = true;
    row.c.prediction = baseline;
    row.c.prediction.memory.peak = figures.peak;
    row.c.prediction.memory.reserved = figures.reserved;
    row.c.prediction.host_peak = figures.host_peak;
    row.c.loss = static_cast<double>(figures.step_ns) / static_cast<double>(with) - 1;
    row.c.prediction.step_time = std::llround(static_cast<double>(baseline.step_time) * (1 + row.c.loss));
    return row;
}

std::string row_description(const Row& row, const CaptureInfo& info) {
    return row.hf_off ? "the model's own gradient checkpointing off (captured)" : describe(row.c.setting, info);
}

std::string row_code(const Row& row, const CaptureInfo& info) {
    if (!row.hf_off) return code_for(row.c.setting, info);
    std::string off = info.hf_checkpoint_call.empty() ? "gradient_checkpointing_enable" : info.hf_checkpoint_call;
    const std::string enable = off;
    off.replace(off.rfind("_enable"), 7, "_disable");
    return "model." + off + "()   # or leave out the model." + enable +
           "(...) call; the figures are the step captured without it";
}

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

std::string pct(double x) {
    char b[32];
    std::snprintf(b, sizeof b, "%+.1f%%", 100 * x);
    return b;
}

// The reserved peak a row shows: under the capacity where one was given (the search), else
// without a limit (--setting).
int64_t shown_reserved(const Memory& memory) { return memory.capacity > 0 ? memory.reserved_at : memory.reserved; }

nlohmann::json row_json(const Row& row, const CaptureInfo& info) {
    const Prediction& predicted = row.c.prediction;
    nlohmann::json out = {{"setting", row.hf_off ? nlohmann::json{{"hf_checkpointing", false}}
                                                 : nlohmann::json::parse(to_json(row.c.setting))},
                          {"description", row_description(row, info)},
                          {"peak_bytes", predicted.memory.peak},
                          {"reserved_bytes", predicted.memory.reserved},
                          {"host_peak_bytes", predicted.host_peak},
                          {"step_time_ns", predicted.step_time},
                          {"loss", row.c.loss},
                          {"fits", row.c.fits},
                          {"code", row_code(row, info)}};
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
                         {"host_peak_error", relative_error(predicted.host_peak, row.captured.host_peak)},
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
        if (rows[i].hf_off) {   // its figures are a capture already
            rows[i].captured.memory = rows[i].c.prediction.memory;
            rows[i].captured.host_peak = rows[i].c.prediction.host_peak;
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
        rows[i].captured = capture_with(opts.trace, meta, rows[i].c.setting, out.path(), capacity);
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

int run(const Options& o) {
    const double budget = budget_of(o.budget);
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
    std::string cap_what;
    const int64_t capacity = o.setting.empty() ? capacity_of(o, cap_what) : 0;
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
    if (!o.comm_link.empty()) check_comm_link(o.comm_link);
    // The measured step, refused before the trace is read when it is not a time.
    int64_t measured_step = 0;
    if (!o.step_time.empty()) {
        const double seconds = mhc::cli::option_value("--step-time", [&] { return mhc::parse_seconds(o.step_time); });
        if (!(seconds > 0) || seconds > 3600)
            throw mhc::Error("--step-time: '" + o.step_time + "' is not a step time in (0, 1 h]");
        measured_step = std::llround(seconds * 1e9);
        // Below half a nanosecond it rounded to 0, which means "not given": the option was dropped.
        if (measured_step < 1)
            throw mhc::Error("--step-time: '" + o.step_time + "' is less than 1 ns (a step time in (0, 1 h])");
    }
    if (!o.model.empty() && !o.verify) throw mhc::Error("--model: the model file --verify runs, and no --verify is given");
    auto data = mhc::trace::load_checked_trace(o.trace);
    // --verify's recipe, before any work: a model file the trace names runs only as --model.
    if (o.verify) data.meta["capture.recipe"] = recipe_to_run(o.trace, data.meta, o.model);
    // What a capture keeps beyond any trace (`mhc check` says it too), before the plan is made of it.
    mhc::trace::require_ok(mhc::trace::check_capture(data), o.trace);
    Base base = make_base(data);
    // The input decides whether --comm-link does anything: said, not refused (a script may pass it to every capture).
    if (!o.comm_link.empty() && base.info.data_parallel.empty())
        std::fprintf(
            stderr,
            "mhc: warning: --comm-link %s has no effect: %s has no DDP or FSDP2 collectives (a step on one GPU)\n",
            mhc::printable(o.comm_link).c_str(), mhc::printable(o.trace).c_str());
    if (!o.comm_link.empty()) apply_comm_model(base, comm_model(data, base.info, o.comm_link));
    const mhc::sim::LinkModel link = mhc::sim::link_from_spec(o.link);
    std::optional<Calibration> calibration;
    if (measured_step > 0) calibration = calibrate_compute(base, link, measured_step);
    const Calibration* cal = calibration ? &*calibration : nullptr;
    Evaluator ev(base, link, host);
    std::vector<Row> rows;
    Advice a;
    if (!o.setting.empty()) {   // one given setting: predict (and verify) it
        Setting s = parse_setting(o.setting);
        check_selective(base, s);
        if (!o.trace_out.empty()) write_trace(ev.trace(s), o.trace_out, o.force);
        a.baseline = ev.predict(Setting{});
        Row r;
        r.c.setting = s;
        r.c.prediction = ev.predict(s);
        r.c.loss = static_cast<double>(r.c.prediction.step_time) / static_cast<double>(a.baseline.step_time) - 1;
        rows.push_back(r);
    } else {
        PlannerOptions po;
        po.capacity = capacity;
        po.budget = budget;
        po.top = o.top;
        if (mhc::cli::show_progress() && !o.json) po.progress = [](const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); };
        a = advise(ev, po);
        for (const Candidate& candidate : a.ranked) rows.push_back(Row{candidate, false, {}, "", false});
        // turning the model's own checkpointing off, ranked with the others where it fits
        if (std::optional<Row> off = hf_off_row(base, a.baseline);
            off && off->c.prediction.memory.reserved <= capacity && (budget < 0 || off->c.loss <= budget)) {
            off->c.fits = off->c.within_budget = true;   // a capture's figures: no stream to run at the capacity
            off->c.prediction.memory.capacity = capacity;
            off->c.prediction.memory.reserved_at = off->c.prediction.memory.reserved;
            auto at = std::find_if(rows.begin(), rows.end(), [&](const Row& row) {
                return time_at_capacity(row.c.prediction) > off->c.prediction.step_time;
            });
            rows.insert(at, *off);
            if (rows.size() > static_cast<size_t>(o.top)) rows.resize(static_cast<size_t>(o.top));
        }
        if (rows.empty()) {
            // nothing fits (or nothing within the budget): name the closest, one line, exit 2
            const Candidate* close = nullptr;
            for (const Candidate& c : a.all)
                if (c.fits && (!close || c.loss < close->loss)) close = &c;
            std::string why;
            if (close) {
                why = "nothing fits " + mhc::format_bytes(capacity) + " within a loss of " + pct(budget).substr(1) + ": the closest is " +
                      describe(close->setting, base.info) + " at " + pct(close->loss) + " (estimated)";
            } else {
                for (const Candidate& c : a.all)
                    if (!close || c.prediction.memory.reserved < close->prediction.memory.reserved) close = &c;
                why = "nothing fits " + mhc::format_bytes(capacity) + ": the closest is " +
                      (close ? describe(close->setting, base.info) + ", reserved " + mhc::format_bytes(close->prediction.memory.reserved)
                             : std::string("the baseline, reserved ") + mhc::format_bytes(a.baseline.memory.reserved));
            }
            throw mhc::Error(o.trace + ": " + why);
        }
    }
    if (o.verify) verify_rows(rows, o, data.meta, o.setting.empty() ? capacity : 0);
    if (o.json) {
        nlohmann::json doc = {
            {"trace", o.trace},
            {"capacity_bytes", capacity},
            {"link", ev.link().name},
            {"comm", describe(base.comm)},
            {"budget", budget},
            {"baseline",
             {{"peak_bytes", a.baseline.memory.peak},
              {"reserved_bytes", a.baseline.memory.reserved},
              {"fits", o.setting.empty() ? nlohmann::json(fits(a.baseline.memory, capacity)) : nlohmann::json(nullptr)},
              {"step_time_ns", a.baseline.step_time},
              {"comm_ns", a.baseline.comm},
              {"comm_exposed_ns", a.baseline.comm_waits}}},
            {"times", cal ? kCalibratedTimeNote : kTimeNote},
            {"passes_per_step", base.passes},
            {"calibration", cal ? nlohmann::json{{"factor", cal->factor},
                                                 {"estimated_step_ns", cal->estimated_step},
                                                 {"measured_step_ns", cal->measured_step},
                                                 {"calibrated_step_ns", cal->calibrated_step}}
                                : nlohmann::json(nullptr)},
            {"data_parallel", data_parallel_note(base.info)},
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
        for (const Row& row : rows) doc["rows"].push_back(row_json(row, base.info));
        std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return mhc::cli::kExitOk;
    }
    const std::string blocks = base.info.block_name.empty()
                                   ? std::string("no blocks")
                                   : std::to_string(base.info.block_name.size()) + " blocks (" + base.info.block_prefix + ")";
    std::printf("trace      %s: %s, %zu step%s\n", o.trace.c_str(), blocks.c_str(), base.steps.size(),
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
    if (!cap_what.empty()) std::printf("capacity   %s (%s)\n", mhc::format_bytes(capacity).c_str(), cap_what.c_str());
    std::printf("link       %s; host optimizer steps at %s + %s per parameter tensor\n", ev.link().name.c_str(),
                mhc::format_rate(host.bandwidth_Bps).c_str(), mhc::format_ns(std::llround(host.per_tensor_s * 1e9)).c_str());
    if (const std::string comm = comm_line(base, a.baseline); !comm.empty())
        std::printf("comm       %s\n", comm.c_str());
    // A time is the whole captured trace's: with several steps, say so rather than call it a step.
    const size_t steps = base.steps.size();
    const std::string time_of = steps > 1 ? std::to_string(steps) + " steps" : "step";
    std::printf("baseline   peak %s, reserved %s, %s %s%s\n", mhc::format_bytes(a.baseline.memory.peak).c_str(),
                mhc::format_bytes(a.baseline.memory.reserved).c_str(), time_of.c_str(),
                baseline_time(a.baseline, cal).c_str(),
                o.setting.empty() && capacity > 0 && !fits(a.baseline.memory, capacity) ? ": does not fit" : "");
    // Under a capacity (the search): the reserved peak with it as the GPU's limit, and without one.
    const bool limited = o.setting.empty() && capacity > 0;
    std::printf("\n%-4s %10s %10s", "rank", "peak", "reserved");
    if (limited) std::printf(" %10s", "no limit");
    std::printf(" %10s %11s %7s", "host peak", steps > 1 ? "time (est.)" : "step (est.)", "loss");
    std::printf("  setting\n");
    for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        const Prediction& p = r.c.prediction;
        std::printf("%-4zu %10s %10s", i + 1, mhc::format_bytes(p.memory.peak).c_str(),
                    mhc::format_bytes(shown_reserved(p.memory)).c_str());
        if (limited) std::printf(" %10s", mhc::format_bytes(p.memory.reserved).c_str());
        std::printf(" %10s %11s %7s", mhc::format_bytes(p.host_peak).c_str(),
                    mhc::format_ns(time_at_capacity(p)).c_str(), pct(r.c.loss).c_str());
        std::printf("  %s\n", row_description(r, base.info).c_str());
    }
    if (o.verify) {
        // A table of its own (beside the predictions it ran to 150 columns): like with like, the
        // captured stream through the same model, at the same capacity.
        // The host's peak too where an answer moves memory there (an offload, the optimizer).
        const bool host = std::any_of(rows.begin(), rows.end(), [](const Row& row) {
            return row.c.prediction.host_peak > 0 || row.captured.host_peak > 0;
        });
        std::printf("verified: each setting applied and the step captured again\n%-4s %14s %18s %9s %12s",
                    "rank", "captured peak", "captured reserved", "peak err", "reserved err");
        if (host) std::printf(" %14s %9s", "captured host", "host err");
        if (limited) std::printf(" %5s", "runs");
        std::printf("\n");
        for (size_t i = 0; i < rows.size(); ++i) {
            const Row& r = rows[i];
            const Prediction& p = r.c.prediction;
            std::printf("%-4zu %14s %18s %8.2f%% %11.2f%%", i + 1, mhc::format_bytes(r.captured.memory.peak).c_str(),
                        mhc::format_bytes(shown_reserved(r.captured.memory)).c_str(),
                        100 * relative_error(p.memory.peak, r.captured.memory.peak),
                        100 * relative_error(shown_reserved(p.memory), shown_reserved(r.captured.memory)));
            if (host)
                std::printf(" %14s %8.2f%%", mhc::format_bytes(r.captured.host_peak).c_str(),
                            100 * relative_error(p.host_peak, r.captured.host_peak));
            if (limited) std::printf(" %5s", r.captured.memory.fits ? "yes" : "NO");
            std::printf("\n");
        }
    }
    if (limited) {
        print_note(
            "(reserved: the caching allocator's peak with %s as the GPU's limit, where a failed cudaMalloc "
            "gives cached memory back and retries, as PyTorch does; no limit: its peak on a larger GPU)\n",
            mhc::format_bytes(capacity).c_str());
        for (size_t i = 0; i < rows.size(); ++i) {
            const Memory& mem = rows[i].c.prediction.memory;
            // where a steady step pays otherwise than the capture's steps: what a steady step does,
            // which the time holds (docs/advise.md "What running at the capacity costs")
            std::string steady = "in its time";
            if (mem.steady_cost != mem.retry_cost)
                steady = "in the capture; a steady step: " + std::to_string(mem.steady_releases) + " full release" +
                         (mem.steady_releases == 1 ? "" : "s") + ", " + std::to_string(mem.steady_segments_freed) +
                         " given back (" + mhc::format_bytes(mem.steady_bytes_freed) + ") and " +
                         std::to_string(mem.steady_segments_remade) + " made again (" +
                         mhc::format_bytes(mem.steady_bytes_remade) + ")" +
                         (mem.steady_steps > 1 ? " over " + std::to_string(mem.steady_steps) + " steps" : "") + ", " +
                         mhc::format_ns(mem.steady_cost / std::max<int64_t>(1, mem.steps)) + " a step, " +
                         mhc::format_ns(mem.steady_cost) + " in its time";
            if (mem.retries > 0)
                print_note(
                    "(%zu. runs only by giving cached memory back: %lld cudaMalloc retr%s, %lld full release%s (a "
                    "synchronisation each), %lld segment%s given back (%s) and %lld made again (%s): %s %s)\n",
                    i + 1, static_cast<long long>(mem.retries), mem.retries == 1 ? "y" : "ies",
                    static_cast<long long>(mem.releases), mem.releases == 1 ? "" : "s",
                    static_cast<long long>(mem.segments_freed), mem.segments_freed == 1 ? "" : "s",
                    mhc::format_bytes(mem.bytes_freed).c_str(), static_cast<long long>(mem.segments_remade),
                    mhc::format_bytes(mem.bytes_remade).c_str(), mhc::format_ns(mem.retry_cost).c_str(),
                    steady.c_str());
            else if (mem.retry_cost > 0 || mem.steady_cost > 0)   // garbage collection's frees alone
                print_note(
                    "(%zu. gives cached memory back by garbage collection: %lld segment%s (%s), %lld made again "
                    "(%s): %s %s)\n",
                    i + 1, static_cast<long long>(mem.segments_freed), mem.segments_freed == 1 ? "" : "s",
                    mhc::format_bytes(mem.bytes_freed).c_str(), static_cast<long long>(mem.segments_remade),
                    mhc::format_bytes(mem.bytes_remade).c_str(), mhc::format_ns(mem.retry_cost).c_str(),
                    steady.c_str());
        }
    }
    print_note("(%s%s)\n", steps > 1 ? ("time: the " + time_of + " of the capture together; ").c_str() : "",
               cal ? kCalibratedTimeNote : kTimeNote);
    for (size_t i = 0; i < rows.size(); ++i)
        std::printf("\n# %zu. %s\n%s\n", i + 1, row_description(rows[i], base.info).c_str(),
                    row_code(rows[i], base.info).c_str());
    if (o.setting.empty())
        std::printf("\nsearch: %lld DP runs over %zu blocks (at most %lld states), %lld evaluations, %.1f s\n",
                    static_cast<long long>(a.dp_runs), base.info.block_name.size(), static_cast<long long>(a.max_states),
                    static_cast<long long>(a.evaluations), a.seconds);
    if (o.setting.empty() && !a.split_conf.empty()) {
        std::string confs;
        for (const std::string& conf : a.allocator_confs)
            confs += (confs.empty() ? "" : ", ") + (conf.empty() ? "as captured" : conf);
        std::printf(
            "        allocator settings searched: %s (the last: of %lld values of max_split_size_mb and %lld of "
            "roundup_power2_divisions tried on the captured step, the one that does best at the capacity)\n",
            confs.c_str(), static_cast<long long>(a.split_values), static_cast<long long>(a.roundup_values));
    }
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
