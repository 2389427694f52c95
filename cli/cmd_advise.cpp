// mhc advise TRACE (--capacity SIZE | --gpu NAME): which memory settings a PyTorch user can turn
// on make a captured training step fit, fastest first, with the code to apply them, and (with
// --verify) each answer checked by capturing the step with it applied (docs/advise.md).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

#include "command.hpp"
#include "sim_options.hpp"
#include "mhc/advise/answers.hpp"
#include "mhc/advise/calibrate.hpp"
#include "mhc/advise/code.hpp"
#include "mhc/advise/gpus.hpp"
#include "mhc/advise/planner.hpp"
#include "mhc/advise/verify.hpp"
#include "mhc/common/bandwidth.hpp"
#include "mhc/common/error.hpp"
#include "mhc/common/message_line.hpp"
#include "mhc/common/refusal.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/common/units.hpp"
#include "mhc/common/text_table.hpp"
#include "mhc/common/wrap.hpp"
#include "mhc/sim/allocator.hpp"
#include "mhc/sim/config.hpp"
#include "mhc/sim/link.hpp"
#include "mhc/trace/check.hpp"

namespace {

// A note under the table, "(...)", wrapped within 100 columns under its opening bracket (a note of
// 175 columns ran past any terminal's edge), or within a narrower terminal's width.
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
    const int terminal = mhc::table_width();
    std::printf("%s", mhc::wrap(text, terminal > 0 && terminal < 100 ? terminal : 100, 1, 0).c_str());
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

// --capacity: a size. The settings searched change the peak a share would be of: the GPU is a
// fixed size here.
int64_t gpu_capacity(const std::string& text) {
    const mhc::sim::Capacity parsed = mhc::sim::parse_capacity(text);
    if (parsed.fraction > 0 || parsed.unlimited())
        throw mhc::Error("'" + text +
                         "': give the GPU's memory as a size (80GiB) or --gpu NAME: the settings searched change "
                         "the peak, so a share of it or unlimited names no GPU");
    return parsed.bytes;
}

// A share in the size grammar (mhc help sizes), as sweep's --budget.
double budget_of(const std::string& text) {
    if (text.empty()) return -1;
    return mhc::cli::option_value("--budget", [&] { return mhc::parse_share(text, 1000); });
}

int64_t capacity_of(const Options& options, std::string& what) {
    if (options.capacity.empty() == options.gpu.empty())
        throw mhc::Error("mhc advise: give the GPU as --capacity SIZE or --gpu NAME (one of them)");
    if (!options.gpu.empty()) {
        const GpuMemory& gpu_spec = gpu_memory(options.gpu);
        what = options.gpu + ": " + mhc::format_bytes(gpu_spec.bytes) + " - " + mhc::format_bytes(gpu_spec.reserve) +
               " for the CUDA context";
        return gpu_spec.bytes - gpu_spec.reserve;
    }
    what = "--capacity " + options.capacity;
    return mhc::cli::option_value("--capacity", [&] { return gpu_capacity(options.capacity); });
}

// The reserved peak a row shows: under the capacity where one was given (the search), else
// without a limit (--setting).
int64_t shown_reserved(const Memory& memory) { return memory.capacity > 0 ? memory.reserved_at : memory.reserved; }

nlohmann::json row_json(const Row& row, const CaptureInfo& info) {
    const Candidate& candidate = row.answer.candidate;
    const Prediction& predicted = candidate.prediction;
    nlohmann::json out = {{"setting", row.answer.hf_off ? nlohmann::json{{"hf_checkpointing", false}}
                                                        : nlohmann::json::parse(to_json(candidate.setting))},
                          {"description", describe(row.answer, info)},
                          {"peak_bytes", predicted.memory.peak},
                          {"reserved_bytes", predicted.memory.reserved},
                          {"host_peak_bytes", predicted.host_peak},
                          {"step_time_ns", predicted.step_time},
                          {"loss", candidate.loss},
                          {"fits", candidate.fits},
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
        mhc::say("--verify runs the model file %s (--model)\n", mhc::printable(opts.model).c_str());
    for (size_t i = 0; i < rows.size(); ++i) {
        const Candidate& candidate = rows[i].answer.candidate;
        if (rows[i].answer.hf_off) {   // its figures are a capture already
            rows[i].captured.memory = candidate.prediction.memory;
            rows[i].captured.host_peak = candidate.prediction.host_peak;
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
        rows[i].captured = capture_with(opts.trace, meta, candidate.setting, out.path(), capacity);
        rows[i].verified = true;
    }
}

// --setting JSON|FILE: a word that is no JSON object was read as a file only when it is a regular
// file, else parsed as JSON: a mistyped file name, a folder or a pipe was "setting: not JSON: ...
// last read: 's'". Said as what it is, before the trace is read.
// Said in the one form of a refused value (docs/cli.md): "--setting: 'x.json': no such file, ...".
bool setting_is_json(const std::string& text) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    return first == std::string::npos || text[first] == '{';
}

void check_setting_word(const std::string& text) {
    if (setting_is_json(text)) return;   // JSON: parse_setting says what is wrong
    struct stat st {};
    if (::stat(text.c_str(), &st) != 0)
        throw mhc::Error(mhc::refused_value("--setting", text,
                                            mhc::no_such_file(text).substr(text.size() + 2) +
                                                ", and not a JSON object ({\"checkpoint\": ...})"));
    if (S_ISDIR(st.st_mode))
        throw mhc::Error(mhc::refused_value("--setting", text, "a directory, not a setting file (JSON)"));
    if (!S_ISREG(st.st_mode))
        throw mhc::Error(mhc::refused_value("--setting", text,
                                            "not a regular file (a pipe or a device): save the setting to a file"));
}

// What the setting given holds, refused (the planner says "setting: [FILE: ]field 'x': why"), said
// in the one form: of the option for JSON on the command line ("--setting: '{...}': field 'x':
// why"), naming the file and the field for a file ("s.json: field 'x': why"), as a link profile's
// field is said. The same words for the JSON's allocator text as for --allocator-conf's.
mhc::Error setting_refusal(const std::string& given, const mhc::Error& refusal) {
    const std::string said = refusal.what();
    const std::string prefix = "setting: ";
    if (said.rfind(prefix, 0) != 0) return refusal;
    const std::string why = said.substr(prefix.size());
    if (setting_is_json(given)) return mhc::Error(mhc::refused_value("--setting", given, why), refusal.kind());
    return mhc::Error(why.rfind(given + ": ", 0) == 0 ? why : given + ": " + why, refusal.kind());
}

// Options that the others given leave with nothing to do, or that would lose an input: refused
// before the trace is read.
void check_option_combinations(const Options& options) {
    if (!options.setting.empty()) check_setting_word(options.setting);
    if (!options.trace_out.empty() && options.setting.empty())
        throw mhc::Error("--trace-out: give the setting to write with --setting");
    if (options.force && options.trace_out.empty())
        throw mhc::Error("--force: replaces an existing --trace-out file, and no --trace-out is given");
    // --trace-out naming the capture itself (any name: a link, a hard link) with --force replaced the
    // capture with the predicted step: the one file the prediction came from, lost.
    if (!options.trace_out.empty()) mhc::refuse_input_as_output(options.trace, options.trace_out);
    // So did --trace-out naming the --setting file (with --force): the setting, replaced by a trace.
    if (!options.trace_out.empty() && !options.setting.empty() &&
        options.setting.find_first_not_of(" \t\r\n") != std::string::npos &&
        options.setting[options.setting.find_first_not_of(" \t\r\n")] != '{')
        mhc::refuse_input_as_output(options.setting, options.trace_out);
    // The search's options with one given setting: it is predicted as given, nothing is searched
    // or ranked, and no capacity is compared (refused, as --trace-out without --setting is).
    if (!options.setting.empty())
        for (const auto& [name, given] : {std::pair<const char*, bool>{"--capacity", !options.capacity.empty()},
                                          {"--gpu", !options.gpu.empty()},
                                          {"--budget", !options.budget.empty()},
                                          {"--top", options.top_given}})
            if (given)
                throw mhc::Error(std::string(name) + " and --setting: " + name +
                                 " is for the search, and --setting predicts the one setting given; give one");
    if (options.top < 1 || options.top > 100)
        throw mhc::Error(mhc::refused_value("--top", std::to_string(options.top), "not in 1..100"));
}

// --host-bandwidth and --host-tensor-cost: what a host optimizer step costs.
HostModel host_model_of(const Options& options) {
    HostModel host;
    host.bandwidth_Bps = mhc::cli::option_value("--host-bandwidth", [&] {
        // The link's bounds (docs/simulator.md): 0.001B/s made the plan's host step last 10^18 ns,
        // refused as "T.db: allocations row 65: t_free ... [range]", blaming the capture.
        return mhc::parse_bandwidth_in(options.host_bw, mhc::sim::kMinBandwidthBps, mhc::sim::kMaxBandwidthBps);
    });
    host.per_tensor_s = mhc::cli::option_value("--host-tensor-cost", [&] {
        const double seconds = mhc::parse_seconds(options.host_tensor);
        if (seconds > 1) throw mhc::Error(mhc::quoted_value(options.host_tensor) + ": more than 1 s; give at most 1s");
        return seconds;
    });
    return host;
}

// --step-time in ns (0: not given), refused before the trace is read when it is not a time.
int64_t measured_step_of(const Options& options) {
    if (options.step_time.empty()) return 0;
    const double seconds = mhc::cli::option_value("--step-time", [&] { return mhc::parse_seconds(options.step_time); });
    if (!(seconds > 0) || seconds > 3600)
        throw mhc::Error(mhc::refused_value("--step-time", options.step_time, "not a step time in (0, 1 h]"));
    const int64_t measured_step = std::llround(seconds * 1e9);
    // Below half a nanosecond it rounded to 0, which means "not given": the option was dropped.
    if (measured_step < 1)
        throw mhc::Error(
            mhc::refused_value("--step-time", options.step_time, "less than 1 ns (a step time in (0, 1 h])"));
    return measured_step;
}

// The capture, checked as `mhc check` checks one, with --verify's recipe settled before any work.
mhc::trace::TraceData load_capture(const Options& options) {
    auto data = mhc::trace::load_checked_trace(options.trace);
    // --verify's recipe, before any work: a model file the trace names runs only as --model.
    if (options.verify) data.meta["capture.recipe"] = recipe_to_run(options.trace, data.meta, options.model);
    // What a capture keeps beyond any trace (`mhc check` says it too), before the plan is made of it.
    mhc::trace::require_ok(mhc::trace::check_capture(data), options.trace);
    return data;
}

// --comm-link: the collectives' link, where the capture has collectives.
void apply_comm_link(const Options& options, const mhc::trace::TraceData& data, Base& base) {
    if (options.comm_link.empty()) return;
    // The input decides whether --comm-link does anything: said, not refused (a script may pass it to every capture).
    if (base.info.data_parallel.empty())
        mhc::say(
            "mhc: warning: --comm-link %s has no effect: %s has no DDP or FSDP2 collectives (a step on one GPU)\n",
            mhc::printable(options.comm_link).c_str(), mhc::printable(options.trace).c_str());
    apply_comm_model(base, comm_model(data, base.info, options.comm_link));
}

// --setting: the one given setting, predicted (and with --trace-out, written as the step it makes).
std::vector<Row> predict_given(const Options& options, const Base& base, const Evaluator& ev, Advice& advice) {
    try {
        Setting setting = parse_setting(options.setting);
        // Its allocator text read as --allocator-conf's is (it was said as "--allocator-conf: ...",
        // an option not given).
        if (!setting.allocator.empty()) mhc::sim::parse_allocator_conf(setting.allocator, "setting: field 'allocator'");
        check_selective(base, setting);
        if (!options.trace_out.empty()) write_trace(ev.trace(setting), options.trace_out, options.force);
        advice.baseline = ev.predict(Setting{});
        return {Row{predicted_answer(ev, setting, advice.baseline), false, {}, ""}};
    } catch (const mhc::Error& refusal) {
        throw setting_refusal(options.setting, refusal);
    }
}

// The search: the settings that fit, fastest first; none is bad input, said in one line.
std::vector<Row> search(const Options& options, const Base& base, const Evaluator& ev, int64_t capacity, double budget,
                        Advice& advice) {
    PlannerOptions po;
    po.capacity = capacity;
    po.budget = budget;
    po.top = options.top;
    if (mhc::cli::show_progress() && !options.json)
        po.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    advice = advise(ev, po);
    if (advice.broken > 0)
        std::fprintf(stderr,
                     "mhc: warning: %lld combinations left out of the search, their predicted step inconsistent "
                     "(mhc's fault, not the capture's; please report it): the first: %s\n",
                     static_cast<long long>(advice.broken), mhc::printable(advice.broken_first).c_str());
    std::vector<Row> rows;
    for (Answer& answer : ranked_answers(advice, base, capacity, budget, options.top))
        rows.push_back(Row{std::move(answer), false, {}, ""});
    if (rows.empty()) throw mhc::Error(options.trace + ": " + nothing_fits(advice, base.info, capacity, budget));
    return rows;
}

// What the report shows: the inputs, the search and its answers.
struct Report {
    const Options& options;
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
    bool limited() const { return options.setting.empty() && capacity > 0; }
    // A time is the whole captured trace's: with several steps, say so rather than call it a step.
    std::string time_of() const {
        return base.steps.size() > 1 ? std::to_string(base.steps.size()) + " steps" : "step";
    }
};

void print_json(const Report& report) {
    const Advice& advice = report.advice;
    nlohmann::json doc = {
        {"trace", report.options.trace},
        {"capacity_bytes", report.capacity},
        {"link", report.ev.link().name},
        {"comm", describe(report.base.comm)},
        {"budget", report.budget},
        {"baseline",
         {{"peak_bytes", advice.baseline.memory.peak},
          {"reserved_bytes", advice.baseline.memory.reserved},
          {"fits", report.options.setting.empty() ? nlohmann::json(fits(advice.baseline.memory, report.capacity))
                                                  : nlohmann::json(nullptr)},
          {"step_time_ns", advice.baseline.step_time},
          {"comm_ns", advice.baseline.comm},
          {"comm_exposed_ns", advice.baseline.comm_waits}}},
        {"times", report.cal ? kCalibratedTimeNote : kTimeNote},
        {"passes_per_step", report.base.passes},
        {"calibration", report.cal ? nlohmann::json{{"factor", report.cal->factor},
                                                    {"estimated_step_ns", report.cal->estimated_step},
                                                    {"measured_step_ns", report.cal->measured_step},
                                                    {"calibrated_step_ns", report.cal->calibrated_step}}
                                   : nlohmann::json(nullptr)},
        {"data_parallel", data_parallel_note(report.base.info)},
        {"rows", nlohmann::json::array()},
        {"search",
         {{"dp_runs", advice.dp_runs},
          {"evaluations", advice.evaluations},
          {"left_out_inconsistent", advice.broken},
          {"max_states", advice.max_states},
          {"allocator_confs", advice.allocator_confs},
          {"split_conf", advice.split_conf},
          {"split_values", advice.split_values},
          {"roundup_values", advice.roundup_values},
          {"allocator_trials", advice.allocator_trials},
          {"seconds", advice.seconds}}}};
    for (const Row& row : report.rows) doc["rows"].push_back(row_json(row, report.base.info));
    std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

// Whether an answer steps the captured optimizer's own implementation on the host.
bool host_as_captured(const Report& report) {
    return std::any_of(report.rows.begin(), report.rows.end(), [](const Row& row) {
        const mhc::advise::Setting& setting = row.answer.candidate.setting;
        return setting.optimizer_on_host && setting.optimizer_impl == mhc::advise::OptimizerImpl::AsCaptured;
    });
}

// The lines above the table: the trace, its notes, the GPU, the links and the baseline.
void print_header(const Report& report, std::FILE* out) {
    const Base& base = report.base;
    const std::string blocks = base.info.block_name.empty()
                                   ? std::string("no blocks")
                                   : std::to_string(base.info.block_name.size()) + " blocks (" + base.info.block_prefix + ")";
    std::fprintf(out, "trace      %s: %s, %zu step%s\n", report.options.trace.c_str(), blocks.c_str(),
                 base.steps.size(), base.steps.size() == 1 ? "" : "s");
    if (const std::string note = mhc::advise::blocks_note(base.info); !note.empty())
        std::fprintf(out, "note       %s\n", note.c_str());
    if (const std::string own = mhc::advise::own_checkpoint_note(base.info); !own.empty())
        std::fprintf(out, "note       %s\n", own.c_str());
    // Gradient accumulation where the capture says so (capture.micro_batches); a step of the
    // user's own with several backward passes and an optimizer step after each group (a GAN's
    // discriminator and generator) is not.
    if (base.passes > 1 && base.info.micro_batches == base.passes)
        std::fprintf(
            out, "note       %d forward and backward passes per step (gradient accumulation): settings act in each\n",
            base.passes);
    else if (base.passes > 1)
        std::fprintf(out,
                     "note       %d backward passes per step (the step function's, not gradient accumulation): "
                     "settings act in each\n",
                     base.passes);
    if (const std::string dp = data_parallel_note(base.info); !dp.empty())
        std::fprintf(out, "note       %s\n", dp.c_str());
    if (const std::string host = mhc::advise::host_step_note(base.info); !host.empty() && host_as_captured(report))
        std::fprintf(out, "note       %s\n", host.c_str());
    if (!report.capacity_what.empty())
        std::fprintf(out, "capacity   %s (%s)\n", mhc::format_bytes(report.capacity).c_str(),
                     report.capacity_what.c_str());
    std::fprintf(out, "link       %s; host optimizer steps at %s + %s per parameter tensor\n",
                 report.ev.link().name.c_str(), mhc::format_rate(report.host.bandwidth_Bps).c_str(),
                 mhc::format_ns(std::llround(report.host.per_tensor_s * 1e9)).c_str());
    const Prediction& baseline = report.advice.baseline;
    if (const std::string comm = comm_line(base, baseline); !comm.empty())
        std::fprintf(out, "comm       %s\n", comm.c_str());
    std::fprintf(out, "baseline   peak %s, reserved %s, %s %s%s\n", mhc::format_bytes(baseline.memory.peak).c_str(),
                 mhc::format_bytes(baseline.memory.reserved).c_str(), report.time_of().c_str(),
                 baseline_time(baseline, report.cal).c_str(),
                 report.options.setting.empty() && report.capacity > 0 && !fits(baseline.memory, report.capacity)
                     ? ": does not fit"
                     : "");
}

// The labelled lines above the table, each wrapped under its words (column 11) on a terminal
// narrower than it (a file or a pipe gets each whole).
void print_labelled(const Report& report) {
    char* text = nullptr;
    size_t size = 0;
    std::FILE* out = open_memstream(&text, &size);
    if (out == nullptr) throw std::bad_alloc();
    print_header(report, out);
    std::fclose(out);
    const std::string lines(text, size);
    std::free(text);
    const int terminal = mhc::table_width();
    std::istringstream in(lines);
    for (std::string line; std::getline(in, line);)
        std::fputs((terminal > 0 && static_cast<int>(line.size()) > terminal && line.size() > 11
                        ? line.substr(0, 11) + mhc::wrap(line.substr(11), terminal, 11, 11).substr(11)
                        : line + "\n")
                       .c_str(),
                   stdout);
}

// The answers' table: peaks, time and throughput loss (headed over two lines, as sweep heads it),
// then the setting; on a terminal narrower than a row the setting wraps under its start (a pipe
// gets each row whole). The figures' columns as wide as they were printed before (10 and 11).
void print_answers(const Report& report) {
    std::vector<mhc::TableColumn> columns = {
        {{"rank"}, true, true, 4}, {{"peak"}, false, false, 10}, {{"reserved"}, false, false, 10}};
    if (report.limited()) columns.push_back({{"no limit"}, false, false, 10});
    columns.push_back({{"host peak"}, false, false, 10});
    columns.push_back({{report.base.steps.size() > 1 ? "time (est.)" : "step (est.)"}, false, false, 11});
    columns.push_back({{"throughput", "loss"}});
    columns.push_back({{"setting"}, true, false, 0, true});
    mhc::TextTable table(std::move(columns));
    for (size_t i = 0; i < report.rows.size(); ++i) {
        const Candidate& candidate = report.rows[i].answer.candidate;
        const Prediction& prediction = candidate.prediction;
        std::vector<std::string> row = {std::to_string(i + 1), mhc::format_bytes(prediction.memory.peak),
                                        mhc::format_bytes(shown_reserved(prediction.memory))};
        if (report.limited()) row.push_back(mhc::format_bytes(prediction.memory.reserved));
        row.push_back(mhc::format_bytes(prediction.host_peak));
        row.push_back(mhc::format_ns(time_at_capacity(prediction)));
        row.push_back(format_loss(candidate.loss));
        row.push_back(describe(report.rows[i].answer, report.base.info));
        table.add_row(std::move(row));
    }
    std::printf("\n%s", table.render(mhc::table_width()).c_str());
}

// --verify's table, of its own (beside the predictions it ran to 150 columns): like with like,
// the captured stream through the same model, at the same capacity.
void print_verified(const Report& report) {
    // The host's peak too where an answer moves memory there (an offload, the optimizer).
    const bool host = std::any_of(report.rows.begin(), report.rows.end(), [](const Row& row) {
        return row.answer.candidate.prediction.host_peak > 0 || row.captured.host_peak > 0;
    });
    std::printf("verified: each setting applied and the step captured again\n%-4s %14s %18s %9s %12s", "rank",
                "captured peak", "captured reserved", "peak err", "reserved err");
    if (host) std::printf(" %14s %9s", "captured host", "host err");
    if (report.limited()) std::printf(" %5s", "runs");
    std::printf("\n");
    for (size_t i = 0; i < report.rows.size(); ++i) {
        const Row& row = report.rows[i];
        const Prediction& prediction = row.answer.candidate.prediction;
        std::printf("%-4zu %14s %18s %8.2f%% %11.2f%%", i + 1, mhc::format_bytes(row.captured.memory.peak).c_str(),
                    mhc::format_bytes(shown_reserved(row.captured.memory)).c_str(),
                    100 * relative_error(prediction.memory.peak, row.captured.memory.peak),
                    100 * relative_error(shown_reserved(prediction.memory), shown_reserved(row.captured.memory)));
        if (host)
            std::printf(" %14s %8.2f%%", mhc::format_bytes(row.captured.host_peak).c_str(),
                        100 * relative_error(prediction.host_peak, row.captured.host_peak));
        if (report.limited()) std::printf(" %5s", row.captured.memory.fits ? "yes" : "NO");
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
void print_capacity_notes(const Report& report) {
    print_note(
        "(reserved: the caching allocator's peak with %s as the GPU's limit, where a failed cudaMalloc "
        "gives cached memory back and retries, as PyTorch does; no limit: its peak on a larger GPU)\n",
        mhc::format_bytes(report.capacity).c_str());
    for (size_t i = 0; i < report.rows.size(); ++i) {
        const Memory& mem = report.rows[i].answer.candidate.prediction.memory;
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
void print_search(const Report& report) {
    const Advice& advice = report.advice;
    std::printf("\nsearch: %lld DP runs over %zu blocks (at most %lld states), %lld evaluations, %.1f s\n",
                static_cast<long long>(advice.dp_runs), report.base.info.block_name.size(),
                static_cast<long long>(advice.max_states), static_cast<long long>(advice.evaluations), advice.seconds);
    if (advice.split_conf.empty()) return;
    std::string confs;
    for (const std::string& conf : advice.allocator_confs)
        confs += (confs.empty() ? "" : ", ") + (conf.empty() ? "as captured" : conf);
    std::printf(
        "        allocator settings searched: %s (after the first two: of %lld values of max_split_size_mb and %lld of "
        "roundup_power2_divisions tried on the captured step and each global setting alone, the one that does best "
        "at the capacity on each)\n",
        confs.c_str(), static_cast<long long>(advice.split_values), static_cast<long long>(advice.roundup_values));
}

void print_text(const Report& report) {
    print_labelled(report);
    print_answers(report);
    if (report.options.verify) print_verified(report);
    if (report.limited()) print_capacity_notes(report);
    print_note(
        "(%s%s)\n",
        report.base.steps.size() > 1 ? ("time: the " + report.time_of() + " of the capture together; ").c_str() : "",
        report.cal ? kCalibratedTimeNote : kTimeNote);
    for (size_t i = 0; i < report.rows.size(); ++i)
        std::printf("\n# %zu. %s\n%s\n", i + 1, describe(report.rows[i].answer, report.base.info).c_str(),
                    code_for(report.rows[i].answer, report.base.info).c_str());
    if (report.options.setting.empty()) print_search(report);
}

int run(const Options& options) {
    const double budget = budget_of(options.budget);
    check_option_combinations(options);
    std::string capacity_what;
    const int64_t capacity = options.setting.empty() ? capacity_of(options, capacity_what) : 0;
    const HostModel host = host_model_of(options);
    if (!options.comm_link.empty()) check_comm_link(options.comm_link);
    const int64_t measured_step = measured_step_of(options);
    if (!options.model.empty() && !options.verify)
        throw mhc::Error("--model: the model file --verify runs, and no --verify is given");
    const mhc::trace::TraceData data = load_capture(options);
    Base base = make_base(data);
    apply_comm_link(options, data, base);
    const mhc::sim::LinkModel link = mhc::sim::link_from_spec(options.link);
    std::optional<Calibration> calibration;
    if (measured_step > 0) calibration = calibrate_compute(base, link, measured_step);
    const Evaluator ev(base, link, host);
    Report report{options,  base,          ev,     host, calibration ? &*calibration : nullptr,
                  capacity, capacity_what, budget, {},   {}};
    report.rows = options.setting.empty() ? search(options, base, ev, capacity, budget, report.advice)
                                          : predict_given(options, base, ev, report.advice);
    if (options.verify) verify_rows(report.rows, options, data.meta, options.setting.empty() ? capacity : 0);
    if (options.json) print_json(report);
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
        // Each value checked as the command line is read (docs/cli.md: "--gpu: 'v100': ..."), before
        // the capture is read.
        app.add_option("--capacity", o->capacity, "GPU memory the reserved peak must fit, e.g. 80GiB")
            ->type_name("SIZE")
            ->check(mhc::cli::parsed_by(gpu_capacity));
        app.add_option("--gpu", o->gpu, "The GPU: " + gpu_names() + " (its memory less 1 GiB for the CUDA context)")
            ->type_name("NAME")
            ->check(mhc::cli::parsed_by(gpu_memory));
        app.add_option("--budget", o->budget, "Largest loss of step time against the baseline, e.g. 3% (none without it)")
            ->type_name("SHARE")
            ->check(mhc::cli::parsed_by([](const std::string& text) { mhc::parse_share(text, 1000); }));
        app.add_option("--link", o->link, "Link to the host: a preset (" + mhc::cli::link_preset_names() +
                                                ") or a link profile file (mhc help links)")
            ->type_name("LINK")
            ->check(mhc::cli::link_name())
            ->default_str(o->link);
        app.add_option("--comm-link", o->comm_link,
                       "The collectives' link (DDP, FSDP2): nvlink (the capture's GPU), ib-ndr, ib-hdr, or a bus "
                       "bandwidth such as 200GB/s (default: nvlink up to 8 ranks, else ib-ndr)")
            ->type_name("LINK")
            ->check(mhc::cli::parsed_by(check_comm_link));
        app.add_option("--step-time", o->step_time,
                       "The step's measured time without any setting, e.g. 60ms (the median of a run's steady steps): "
                       "kernel times are scaled to it (the roofline's without it)")
            ->type_name("DURATION");
        app.add_option("--host-bandwidth", o->host_bw, "Memory bandwidth a host optimizer step streams at (an assumption)")
            ->type_name("RATE")
            ->default_str(o->host_bw);
        app.add_option("--host-tensor-cost", o->host_tensor,
                       "Fixed cost of a host optimizer step per parameter tensor (an assumption)")
            ->type_name("DURATION")
            ->default_str(o->host_tensor);
        auto* top = app.add_option("--top", o->top, "How many settings to print, 1 to 100")
                        ->check(mhc::cli::number_in([](double count) { return count >= 1 && count <= 100; }, "in 1..100"))
                        ->default_str(std::to_string(o->top));
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
        app.add_flag("--json", o->json, "Print the baseline and the ranked settings as JSON");
        return [o, top] {
            o->top_given = top->count() > 0;
            return run(*o);
        };
    }}};

}  // namespace
