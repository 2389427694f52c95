// SIGINT/SIGTERM handling. Where the previous action would end the process (default), the
// handler asks the writer thread to flush and write the trace (marked incomplete), waits
// for it, then restores the previous action and raises the signal again. Where the program
// handles the signal itself (Python turns SIGINT into KeyboardInterrupt), the handler only
// notes the interruption and chains; the normal exit path writes the trace. Only
// async-signal-safe calls are made here (atomics, sem_post, sem_trywait, nanosleep,
// sigaction, raise).
#include "signals.hpp"

#include <signal.h>

#include <cstring>

#include "recorder.hpp"

namespace mhc::record::inject {

namespace {

constexpr int kSignals[] = {SIGINT, SIGTERM};
struct sigaction g_previous[2];
// Long enough to write indexes of a large trace; short enough that a stuck flush does not
// keep a killed job alive.
constexpr int kFinishTimeoutMs = 30000;

int slot_of(int sig) { return sig == SIGINT ? 0 : 1; }

void handler(int sig, siginfo_t* info, void* uctx) {
    const struct sigaction& prev = g_previous[slot_of(sig)];
    Recorder& rec = Recorder::get();
    bool is_default = !(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_DFL;
    bool ignored = !(prev.sa_flags & SA_SIGINFO) && prev.sa_handler == SIG_IGN;
    if (ignored) return;
    if (is_default) {
        rec.finish_from_signal(sig, kFinishTimeoutMs);
        sigaction(sig, &prev, nullptr);
        raise(sig);   // delivered when this handler returns (the signal is blocked now)
        return;
    }
    rec.note_signal(sig);
    if (prev.sa_flags & SA_SIGINFO) prev.sa_sigaction(sig, info, uctx);
    else prev.sa_handler(sig);
}

}  // namespace

bool install_signal_handlers() {
    for (int sig : kSignals) {
        struct sigaction sa;
        std::memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, &g_previous[slot_of(sig)]) != 0) return false;
    }
    return true;
}

}  // namespace mhc::record::inject
