#pragma once
// A value computed on a worker thread while the window keeps drawing: the worker computes, the
// view draws what is ready (as Tracy's server does). What the computation throws is kept as a
// one-line message for the view to show, never dropped.
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <optional>
#include <string>

namespace mhc::viewer {

template <class T>
class Job {
public:
    explicit Job(std::function<T()> compute) : future_(std::async(std::launch::async, std::move(compute))) {}

    // True once the computation has returned or thrown (never blocks).
    bool done() {
        if (future_.valid() && future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready) take();
        return !future_.valid();
    }
    // Blocks until done (screenshot mode shows the finished view).
    void wait() {
        if (future_.valid()) take();
    }
    // The value once done without an error; nullptr before, or when it threw.
    const T* value() const { return value_ ? &*value_ : nullptr; }
    // What the computation threw ("" while running or when it succeeded).
    const std::string& error() const { return error_; }

private:
    void take() {
        try {
            value_ = future_.get();
        } catch (const std::exception& e) {
            error_ = e.what();
        } catch (...) {
            error_ = "unknown error";
        }
    }
    std::future<T> future_;
    std::optional<T> value_;
    std::string error_;
};

}  // namespace mhc::viewer
