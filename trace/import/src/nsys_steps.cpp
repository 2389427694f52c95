// An Nsight Systems export's NVTX ranges: the training steps they mark and the markers
// (nsys_import.hpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kineto_map.hpp"
#include "quoted_name.hpp"
#include "nsys_import.hpp"

namespace mhc::trace::import::nsys {

void NsysImport::find_steps() {
    if (!has("NVTX_EVENTS")) return;
    auto cols = db_.columns("NVTX_EVENTS");
    if (!cols.count("end")) return;
    const std::string text = cols.count("textId") && has("StringIds")
                                 ? "COALESCE(n.text, (SELECT value FROM StringIds WHERE id = n.textId))"
                                 : "n.text";
    // A range never ended while nsys recorded (end NULL; not a mark, 34 or 65) was open when the
    // recording stopped: it ends there (recording_end), so a loop stopped inside its last
    // optimizer step or ProfilerStep#N keeps that step. Before 2026-12-05 (fifth) it was passed
    // over, and the export lost its last step (kernels launched in it were in no step).
    const std::string end = nvtx_end("n.");
    const std::string unended = "(" + end + " IS NULL" +
                                std::string(cols.count("eventType") ? " AND n.eventType NOT IN (34, 65))" : ")");
    const std::string query = "SELECT n.start, " + end + ", " + (cols.count("text") ? text : std::string("NULL")) +
                              ", " + (cols.count("globalTid") ? "n.globalTid" : "NULL") + ", n.rowid" +
                              " FROM NVTX_EVENTS n WHERE typeof(n.start) = 'integer' AND (typeof(" + end +
                              ") = 'integer' OR " + unended + ")" + nvtx_ranges_and_marks();
    sql::Stmt rows(db_.db, in_, query.c_str());
    std::vector<NamedSpan> spans;
    std::vector<std::pair<size_t, int64_t>> threads;   // optimizer range (index in spans) -> its globalTid
    std::set<int64_t> step_processes;                  // the processes (globalTid >> 24) of ProfilerStep#N
    std::vector<int64_t> step_process;                 // each ProfilerStep#N's process (-1: none)
    std::vector<int64_t> span_process;                 // each span's process (globalTid >> 24; -1: none)
    while (rows.step()) {
        if (rows.is_null(2)) continue;
        const std::string name = rows.text(2);
        const bool open = rows.is_null(1);
        if (open && !profiler_step_number(name) && !is_optimizer_step(name)) continue;
        const int64_t t_start = rel(rows.i64(0), "NVTX_EVENTS"),
                      t_end = std::max(t_start, open ? recording_end() : rel(rows.i64(1), "NVTX_EVENTS"));
        if (open) open_step_ends_[rows.i64(4)] = t_end;
        if (auto number = profiler_step_number(name)) {
            profiler_steps_.push_back(StepSpan{*number, t_start, t_end});
            step_process.push_back(rows.is_null(3) ? -1 : rows.i64(3) >> 24);
            step_processes.insert(step_process.back());
        }
        else if (is_optimizer_step(name) || is_loop_range(name)) {
            if (is_optimizer_step(name) && !rows.is_null(3)) threads.emplace_back(spans.size(), rows.i64(3));
            spans.push_back(NamedSpan{name, t_start, t_end});
            span_process.push_back(rows.is_null(3) ? -1 : rows.i64(3) >> 24);
        }
    }
    if (step_processes.size() > 1) join_process_steps(step_processes.size(), step_process);
    if (profiler_steps_.empty()) optimizer_work(spans, threads);
    if (!profiler_steps_.empty()) {
        steps_ = profiler_steps_;
        r_.meta["steps_from"] = kStepsFromProfiler;
    } else {
        process_optimizer_steps(spans, span_process);
    }
    std::sort(steps_.begin(), steps_.end(),
              [](const StepSpan& lhs, const StepSpan& rhs) { return lhs.t_start < rhs.t_start; });
    if (steps_.empty() || !has("CUPTI_ACTIVITY_KIND_RUNTIME")) return;
    auto rc = db_.columns("CUPTI_ACTIVITY_KIND_RUNTIME");
    if (!rc.count("correlationId") || !rc.count("start") || !rc.count("globalTid")) return;
    sql::Stmt calls(db_.db, in_,
                    "SELECT globalTid, correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE typeof(start) = "
                    "'integer' AND typeof(correlationId) = 'integer' AND typeof(globalTid) = 'integer'");
    while (calls.step()) {   // globalTid = globalPid + thread id (the low 24 bits)
        const int64_t process = calls.i64(0) & ~int64_t{0xFFFFFF}, id = calls.i64(1);
        launch_at_[{process, id}] = rel(calls.i64(2), "CUPTI_ACTIVITY_KIND_RUNTIME");
        auto [first, fresh] = first_call_id_.try_emplace(process, id);
        if (!fresh) first->second = std::min(first->second, id);
    }
}

// The optimizer's step ranges, per process: an export of several processes (nsys over a launcher,
// emit_nvtx in each rank) holds each rank's, and read as one process's the ranks' ranges took turns
// (two ranks' four steps: `steps 8`) or lay inside one another (the second rank's not counted).
// As Kineto files of merged ranks are read (add_optimizer_steps), each process's steps are found
// on their own and the k-th of every process is one step k, from the first start to the last end.
void NsysImport::process_optimizer_steps(const std::vector<NamedSpan>& spans, const std::vector<int64_t>& process) {
    std::map<int64_t, std::vector<NamedSpan>> by_process;
    std::set<int64_t> stepping;   // processes with an optimizer range
    for (size_t i = 0; i < spans.size(); ++i) {
        by_process[process[i]].push_back(spans[i]);
        if (is_optimizer_step(spans[i].name)) stepping.insert(process[i]);
    }
    if (stepping.size() < 2) by_process = {{0, spans}};
    std::vector<StepSpan> joined;
    int64_t merged = 0;
    bool first = true;
    for (const auto& [pid, mine] : by_process) {
        const OptimizerSteps found = optimizer_steps(mine, 0);
        if (found.steps.empty()) continue;
        if (first) {
            r_.meta["steps_from"] = found.said(), r_.meta["steps_optimizers"] = found.optimizers_said();
            if (const std::string warning = found.warning(); !warning.empty()) r_.warnings.push_back(warning);
            first = false;
        }
        process_steps_[pid] = found.steps;
        for (const StepSpan& step : found.steps) {
            if (static_cast<size_t>(step.step) >= joined.size()) {
                joined.push_back(step);
                continue;
            }
            StepSpan& into = joined[static_cast<size_t>(step.step)];
            into.t_start = std::min(into.t_start, step.t_start);
            into.t_end = std::max(into.t_end, step.t_end);
            ++merged;
        }
    }
    steps_ = std::move(joined);
    if (stepping.size() < 2 || merged == 0) {
        process_steps_.clear();
        return;
    }
    const std::string said = "optimizer steps of " + std::to_string(stepping.size()) +
                             " processes (globalPid) in the export, found per process: " + std::to_string(merged) +
                             " steps of the same number joined, one step marker each" +
                             joined_steps_said(process_skew());
    r_.meta["nsys.step_processes"] = said;
    r_.warnings.push_back(said);
}

// An export of several processes (nsys over a launcher) holds each rank's ProfilerStep#N: one
// step of the job, N times over. As Kineto files of merged ranks are read (kineto.processes), the
// ranges of one N become one step, from the first start to the last end; read_markers writes it
// as the step marker and the ranges themselves as ranges. Before 2026-12-06 each range was a step
// of its own: two ranks' four steps were `steps 8`.
void NsysImport::join_process_steps(size_t processes, const std::vector<int64_t>& process) {
    std::map<int32_t, size_t> at;   // step number -> its span in joined
    std::vector<StepSpan> joined;
    int64_t merged = 0;
    for (size_t i = 0; i < profiler_steps_.size(); ++i) process_steps_[process[i]].push_back(profiler_steps_[i]);
    for (const StepSpan& span : profiler_steps_) {
        auto [it, fresh] = at.try_emplace(span.step, joined.size());
        if (fresh) {
            joined.push_back(span);
            continue;
        }
        StepSpan& step = joined[it->second];
        step.t_start = std::min(step.t_start, span.t_start);
        step.t_end = std::max(step.t_end, span.t_end);
        ++merged;
    }
    if (merged == 0) {   // no number twice: each range is a step, as in one process
        process_steps_.clear();
        return;
    }
    for (auto& [pid, own] : process_steps_)
        std::stable_sort(own.begin(), own.end(),
                         [](const StepSpan& lhs, const StepSpan& rhs) { return lhs.t_start < rhs.t_start; });
    const int64_t skew = process_skew();
    profiler_steps_ = std::move(joined);
    steps_joined_ = true;
    const std::string said = "ProfilerStep#N ranges of " + std::to_string(processes) +
                             " processes (globalPid) in the export: " + std::to_string(merged) +
                             " ranges of the same N joined, one step marker each" + joined_steps_said(skew);
    r_.meta["nsys.step_processes"] = said;
    r_.warnings.push_back(said);
}

int64_t NsysImport::recording_end() {
    if (recording_end_) return *recording_end_;
    int64_t last = INT64_MIN;
    for (const char* table : {"CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                              "CUPTI_ACTIVITY_KIND_RUNTIME", "CUDA_GPU_MEMORY_USAGE_EVENTS", "NVTX_EVENTS",
                              kGraphTrace}) {
        if (!has(table)) continue;
        const std::set<std::string> cols = db_.columns(table);
        for (const char* column : {"start", "end"}) {
            if (!cols.count(column)) continue;
            const std::string query = std::string("SELECT MAX(\"") + column + "\") FROM " + table + " WHERE typeof(\"" +
                                      column + "\") = 'integer'";
            sql::Stmt latest(db_.db, in_, query.c_str());
            if (latest.step() && !latest.is_null(0)) last = std::max(last, std::min(latest.i64(0), kMaxTime));
        }
    }
    recording_end_ = last == INT64_MIN ? 0 : rel(last, "NVTX_EVENTS");
    return *recording_end_;
}

// A kernel (or graph launch) of an export of several processes is in the step of its own process's
// ranges (process_steps_): looked up in the joined ones, a rank running behind another had the
// launches at the end of its step N counted in step N+1, which the other had begun. One without a
// runtime row of a correlation id below all its process's was launched before capture (steps.hpp,
// LaunchedBeforeRecording): in no step. Before 2026-12-07 it took the step of its start.
int32_t NsysImport::kernel_step(const Kernel& kernel, int64_t global_pid) {
    if (steps_.empty()) return -1;
    const int64_t process = global_pid & ~int64_t{0xFFFFFF};
    auto call = launch_at_.find({process, kernel.correlation});
    auto own = process_steps_.find(global_pid >> 24);
    const std::vector<StepSpan>& steps = own != process_steps_.end() ? own->second : steps_;
    if (call != launch_at_.end()) return step_at(steps, call->second);
    const int32_t by_start = step_at(steps, kernel.t_start);
    auto first = first_call_id_.find(process);
    return before_recording_.take(kernel.correlation, first != first_call_id_.end() ? first->second : 0, by_start)
               ? -1
               : by_start;
}

int64_t NsysImport::process_skew() const {
    std::map<int32_t, std::pair<int64_t, int64_t>> starts;   // step number -> (earliest, latest) start
    for (const auto& [pid, own] : process_steps_)
        for (const StepSpan& step : own) {
            auto [it, fresh] = starts.try_emplace(step.step, step.t_start, step.t_start);
            it->second = {std::min(it->second.first, step.t_start), std::max(it->second.second, step.t_start)};
        }
    int64_t skew = 0;
    for (const auto& [step, span] : starts) skew = std::max(skew, span.second - span.first);
    return skew;
}

void NsysImport::optimizer_work(std::vector<NamedSpan>& spans, const std::vector<std::pair<size_t, int64_t>>& threads) {
    if (threads.empty() || !has("CUPTI_ACTIVITY_KIND_RUNTIME")) return;
    auto rc = db_.columns("CUPTI_ACTIVITY_KIND_RUNTIME");
    if (!rc.count("start") || !rc.count("globalTid")) return;
    std::map<int64_t, std::vector<int64_t>> starts;
    for (const auto& [index, thread] : threads) starts[thread];
    sql::Stmt calls(db_.db, in_,
                    "SELECT globalTid, start FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE typeof(start) = 'integer' AND "
                    "typeof(globalTid) = 'integer'");
    while (calls.step()) {
        auto found = starts.find(calls.i64(0));
        if (found != starts.end()) found->second.push_back(rel(calls.i64(1), "CUPTI_ACTIVITY_KIND_RUNTIME"));
    }
    for (auto& [thread, times] : starts) std::sort(times.begin(), times.end());
    for (const auto& [index, thread] : threads) {
        const std::vector<int64_t>& times = starts[thread];
        NamedSpan& span = spans[index];
        span.work = std::upper_bound(times.begin(), times.end(), span.t_end) -
                    std::lower_bound(times.begin(), times.end(), span.t_start);
    }
}

std::string NsysImport::nvtx_end(const std::string& prefix) const {
    std::string end = prefix + "\"end\"";
    if (!db_.not_null("NVTX_EVENTS", "end")) return end;
    return "(CASE WHEN " + end + " <= 0 AND " + end + " < " + prefix + "start THEN NULL ELSE " + end + " END)";
}

std::string NsysImport::nvtx_ranges_and_marks() {
    if (!db_.columns("NVTX_EVENTS").count("eventType")) return "";
    return " AND (eventType IS NULL OR eventType IN (34, 35, 37, 59, 60, 65, 66, 68, 70, 71))";
}

void NsysImport::read_markers() {
    if (!has("NVTX_EVENTS")) return;
    auto cols = db_.columns("NVTX_EVENTS");
    const std::string only = nvtx_ranges_and_marks();
    if (!only.empty()) {
        sql::Stmt skipped(db_.db, in_, ("SELECT COUNT(*) FROM NVTX_EVENTS WHERE NOT (1" + only + ")").c_str());
        if (skipped.step() && skipped.i64(0) > 0)
            r_.meta["nsys.nvtx_rows_not_ranges"] = std::to_string(skipped.i64(0)) +
                                                   " (domain, category and thread names: not markers)";
    }
    // A range (not a mark: 34, 65) whose end is NULL was never ended while nsys recorded.
    const std::string unended = cols.count("eventType") ? "(eventType NOT IN (34, 65))" : "0";
    if (cols.count("end") && db_.not_null("NVTX_EVENTS", "end")) {
        sql::Stmt defaults(db_.db, in_,
                           ("SELECT COUNT(*) FROM NVTX_EVENTS WHERE " + nvtx_end("") + " IS NULL" + only).c_str());
        if (defaults.step() && defaults.i64(0) > 0)
            r_.meta["nsys.nvtx_default_ends"] =
                std::to_string(defaults.i64(0)) +
                " NVTX marks or ranges with end 0 in a table that declares end NOT NULL (an export of 2021 "
                "or before, which wrote a default where a field had none): read as no end";
    }
    std::string query = "SELECT start, " + (cols.count("end") ? nvtx_end("") : std::string("NULL")) + ", " +
                        col(cols, "text", "NULL") + ", " + col(cols, "textId", "NULL") + ", " + unended +
                        ", rowid FROM NVTX_EVENTS WHERE 1" + only + " ORDER BY start, rowid";
    sql::Stmt rows(db_.db, in_, query.c_str());
    Cells cell{rows, in_, "NVTX_EVENTS", 5};
    int64_t markers = 0, open_ranges = 0;
    while (rows.step()) {
        ++events_;
        Marker marker;
        marker.id = ++markers;
        std::string text = !rows.is_null(2) ? rows.text(2) : !rows.is_null(3) ? str(cell.get(3, "textId", INT64_MIN, INT64_MAX)) : "nvtx";
        marker.name = w_.intern(text);
        marker.t_start = rel(cell.get(0, "start", -kMaxTime, kMaxTime), "NVTX_EVENTS");
        marker.t_end = rows.is_null(1) ? marker.t_start : rel(cell.interval(0, 1).second, "NVTX_EVENTS");
        if (rows.is_null(1) && rows.i64(4) == 1 && open_ranges++ == 0) first_open_range_ = quoted_name(text);
        // An unended ProfilerStep#N or optimizer step (find_steps): to the end of recording.
        const auto open_step = rows.is_null(1) ? open_step_ends_.find(rows.i64(5)) : open_step_ends_.end();
        if (open_step != open_step_ends_.end()) marker.t_end = open_step->second;
        const std::optional<int32_t> step = steps_joined_ || (rows.is_null(1) && open_step == open_step_ends_.end())
                                                ? std::nullopt
                                                : profiler_step_number(text);
        marker.kind = step ? MarkerKind::Step : MarkerKind::Range;
        marker.index = step.value_or(-1);
        w_.add(marker);
    }
    if (profiler_steps_.empty())   // steps from the optimizer's ranges (find_steps)
        for (const StepSpan& step : steps_)
            w_.add(Marker{++markers, w_.intern("step#" + std::to_string(step.step)), step.t_start, step.t_end,
                          MarkerKind::Step, step.step});
    if (steps_joined_)   // several processes' ProfilerStep#N, one marker each (join_process_steps)
        for (const StepSpan& step : steps_)
            w_.add(Marker{++markers, w_.intern("ProfilerStep#" + std::to_string(step.step)), step.t_start,
                          step.t_end, MarkerKind::Step, step.step});
    if (open_ranges > 0) {
        const std::string said = std::to_string(open_ranges) +
                                 " NVTX ranges have no end (pushed or started and never ended while nsys "
                                 "recorded; the first: '" +
                                 first_open_range_ + "'): each is a marker of no length at its start" +
                                 (open_step_ends_.empty()
                                      ? std::string()
                                      : ", but " + std::to_string(open_step_ends_.size()) +
                                            " ProfilerStep#N or optimizer-step ranges, which end at the end of "
                                            "recording (" +
                                            std::to_string(recording_end()) + " ns): the step open there");
        r_.meta["nsys.nvtx_unended_ranges"] = said;
        r_.warnings.push_back(said);
    }
}

}  // namespace mhc::trace::import::nsys
