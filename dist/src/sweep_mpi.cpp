// A sweep spread over the processes (run.hpp): its tasks (sim::SweepTasks) are taken from one
// counter on rank 0 by whichever process is free, then each process sends rank 0 the results
// of the tasks it ran.
#include <chrono>
#include <mutex>
#include <stdexcept>

#include "mhc/dist/codec.hpp"
#include "mhc/dist/process.hpp"
#include "mhc/dist/run.hpp"
#include "transport.hpp"

namespace mhc::dist {

namespace {

using detail::Tag;

// The counter: an int64 on rank 0 (an MPI window), advanced by one-sided fetch-and-add.
// Opening and closing it are collective.
class SharedTasks final : public sim::TaskSource {
public:
    explicit SharedTasks(const sim::SweepTasks& tasks) : tasks_(tasks), counter_(detail::mpi().counter_open()) {}

    size_t next() override {
        std::lock_guard<std::mutex> g(mu_);
        const size_t position = static_cast<size_t>(detail::mpi().counter_next(counter_));
        if (position < tasks_.count()) ran_.push_back(tasks_.at(position));
        return position;
    }

    // After the sweep: every process is done taking tasks.
    void close() {
        detail::mpi().counter_close(counter_);
        counter_ = nullptr;
    }
    const std::vector<size_t>& ran() const { return ran_; }

private:
    sim::SweepTasks tasks_;
    void* counter_ = nullptr;
    std::mutex mu_;
    std::vector<size_t> ran_;   // tasks run here
};

// One task's result, as sent: the task, then its grid run or its bisection's answer.
std::string encode_task(const sim::SweepResult& s, const sim::SweepTasks& tasks, size_t task) {
    const std::string body = tasks.is_bisection(task) ? encode(s.answers[task - tasks.grid]) : encode(s.grid[task]);
    return encode(static_cast<int64_t>(task)) + body;
}

void decode_task(sim::SweepResult& s, const sim::SweepTasks& tasks, const std::string& bytes) {
    codec::Reader in{bytes};
    int64_t task = 0;
    in.get(task);
    if (task < 0 || static_cast<size_t>(task) >= tasks.count()) throw std::runtime_error("mpi: sweep result of an unknown task");
    const std::string body = bytes.substr(in.at);
    const size_t i = static_cast<size_t>(task);
    if (tasks.is_bisection(i)) s.answers[i - tasks.grid] = decode<sim::BisectAnswer>(body);
    else s.grid[i] = decode<sim::Result>(body);
}

// Sends the results of the tasks this process ran to rank 0, which fills them into `s`.
void gather(sim::SweepResult& s, const sim::SweepTasks& tasks, const std::vector<size_t>& ran) {
    if (!is_root()) {
        int64_t count = static_cast<int64_t>(ran.size());
        detail::send(&count, 1, 0, Tag::SweepResult);
        for (size_t i : ran) detail::send_bytes(encode_task(s, tasks, i), 0, Tag::SweepResult);
        return;
    }
    for (int p = 1; p < size(); ++p) {
        int64_t count = 0;
        detail::recv(&count, 1, p, Tag::SweepResult);
        for (int64_t k = 0; k < count; ++k) decode_task(s, tasks, detail::recv_bytes(p, Tag::SweepResult));
    }
}

}  // namespace

sim::SweepResult sweep(const sim::Prepared& p, sim::SweepSpec spec, const std::function<void(size_t, size_t)>& progress) {
    if (size() == 1) return sim::sweep(p, spec, progress);
    const sim::SweepTasks tasks = sim::sweep_tasks(spec);
    enter_parallel();
    const auto t0 = std::chrono::steady_clock::now();
    if (spec.jobs == 0) spec.jobs = 1;   // one thread per process unless told otherwise
    SharedTasks source(tasks);
    spec.tasks = &source;
    sim::SweepResult s = sim::sweep(p, spec, progress);
    source.close();
    gather(s, tasks, source.ran());
    leave_parallel();
    s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s;
}

}  // namespace mhc::dist
