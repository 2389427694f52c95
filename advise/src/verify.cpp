// Verification by capture: runs mhc-torch as a child process and measures what it wrote.
#include "mhc/advise/verify.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "mhc/common/error.hpp"
#include "mhc/common/output_file.hpp"
#include "mhc/trace/check.hpp"
#include "mhc/trace/summary.hpp"

extern char** environ;

namespace mhc::advise {

namespace {

std::vector<std::string> split_spaces(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::string last_line(const std::string& path) {
    std::ifstream in(path);
    std::string line, last;
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    return last;
}

}  // namespace

std::vector<std::string> mhc_torch_command() {
    if (const char* env = std::getenv("MHC_TORCH"); env && *env) {
        // Blanks alone ran the capture's first argument ("cannot run capture").
        std::vector<std::string> words = split_spaces(env);
        if (words.empty())
            throw Error(std::string("MHC_TORCH='") + env +
                        "': names no command; give the mhc-torch to run, or unset it");
        return words;
    }
    std::error_code ec;
    auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec)
        for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
            auto venv = dir / ".venv" / "bin" / "mhc-torch";
            if (std::filesystem::exists(venv, ec)) return {venv.string()};
        }
    return {"mhc-torch"};
}

double relative_error(int64_t predicted, int64_t captured) {
    if (captured == 0) return predicted == 0 ? 0.0 : 1.0;
    return std::abs(static_cast<double>(predicted - captured)) / static_cast<double>(captured);
}

std::string recipe_to_run(const std::string& trace_path, const std::map<std::string, std::string>& meta,
                          const std::string& model) {
    auto recipe = meta.find("capture.recipe");
    if (recipe == meta.end() || recipe->second.empty())
        throw Error(trace_path + ": no capture.recipe in its meta: --verify captures the step again and needs the "
                    "recipe mhc-torch capture records (a capture made from Python needs capture(..., recipe=...))");
    nlohmann::json doc = nlohmann::json::parse(recipe->second, nullptr, false);
    if (!doc.is_object() || !doc.contains("model") || !doc["model"].is_string())
        throw Error(trace_path + ": capture.recipe is no recipe mhc-torch wrote (a JSON object with a model)");
    const std::string named = doc["model"].get<std::string>();
    const bool file = named.size() > 3 && named.compare(named.size() - 3, 3, ".py") == 0;
    if (!file) {   // a preset of mhc_torch: no code of the trace's
        if (!model.empty())
            throw Error("--model: " + trace_path + " is a capture of the preset '" + named +
                        "', not of a model file: --verify captures the preset; leave --model out");
        return recipe->second;
    }
    // A model file runs as Python: the trace (anyone's) names it, so --verify runs it only when
    // the user names the file to run.
    if (model.empty())
        throw Error(trace_path + ": its capture.recipe names the model file " + named +
                    ": --verify runs no code a trace names; to run that file, give --model " + named);
    std::error_code ec;
    if (!std::filesystem::is_regular_file(model, ec))
        throw Error("--model: " + model + (std::filesystem::exists(model, ec) ? " is not a regular file" : " does not exist"));
    doc["model"] = std::filesystem::absolute(model, ec).lexically_normal().string();
    return doc.dump();
}

Captured capture_with(const std::string& trace_path, const std::map<std::string, std::string>& meta, const Setting& setting,
                      const std::string& out, int64_t capacity) {
    auto recipe = meta.find("capture.recipe");
    if (recipe == meta.end() || recipe->second.empty())
        throw Error(trace_path + ": no capture.recipe in its meta: --verify captures the step again and needs the "
                    "recipe mhc-torch capture records (a capture made from Python needs capture(..., recipe=...))");
    std::vector<std::string> args = mhc_torch_command();
    // `out` is a private temporary file of this process (made empty): the capture replaces it.
    for (const std::string& arg : {std::string("capture"), std::string("--recipe"), recipe->second,
                                   std::string("--setting"), to_json(setting), std::string("-o"), out, std::string("--force")})
        args.push_back(arg);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& word : args) argv.push_back(word.data());
    argv.push_back(nullptr);
    // What the capture says goes to a private temporary file (mkstemp), removed on every way out,
    // signals included: it was OUT.log in $TMPDIR by a name anyone could guess, opened with
    // O_CREAT | O_TRUNC (a link planted there was followed), and left behind when the command
    // could not be run or was stopped.
    TempFile log("advise-log");
    posix_spawn_file_actions_t file_actions;
    posix_spawn_file_actions_init(&file_actions);
    posix_spawn_file_actions_adddup2(&file_actions, log.fd(), STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&file_actions, log.fd(), STDERR_FILENO);
    auto spawned_at = std::chrono::steady_clock::now();
    pid_t pid = 0;
    int rc = posix_spawnp(&pid, argv[0], &file_actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&file_actions);
    if (rc != 0)
        throw Error("--verify: cannot run " + args[0] + ": " + std::strerror(rc) + " (set MHC_TORCH, or scripts/setup --torch)");
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    Captured result;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - spawned_at).count();
    log.close();
    std::string why = last_line(log.path());
    if (why.empty() && WIFSIGNALED(status))
        why = "killed by signal " + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        throw Error("--verify: mhc-torch capture with " + to_json(setting) + " failed: " + (why.empty() ? "no message" : why));
    trace::TraceData captured;
    try {
        captured = trace::load_checked_trace(out);
    } catch (const Error& e) {   // it named the temporary file, which the user never gave
        throw Error("--verify: mhc-torch capture with " + to_json(setting) + " (" + args[0] +
                    ") exited 0 but wrote no trace mhc reads: " + e.what());
    }
    result.memory = measure(captured, setting.allocator, capacity);
    int32_t dev = -1;
    result.host_peak = trace::live_peak(captured, dev).bytes;
    return result;
}

}  // namespace mhc::advise
