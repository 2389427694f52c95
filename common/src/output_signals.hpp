#pragma once
// The signal handler behind OutputFile (output_signals.cpp): the temporary files and folders a
// SIGINT, SIGTERM or SIGHUP removes, the outputs its one line names as written whole, and the
// holds that make such a signal wait. Private to mhc_common.
#include <signal.h>

#include <string>

namespace mhc::output_signals {

// Adds a temporary file (or, `directory`, a folder made for outputs) to those the handler
// removes; `target` is the file it becomes, named by the handler's line. Returns its slot, -1
// when every slot is taken (the file is still removed by its owner or the next run).
int claim(const std::string& name, bool directory = false, const std::string& target = "");
void release(int slot);

// An output moved into place: the handler's line names it as written whole, unless a NotOutputs
// lives on this thread.
void note_written(const std::string& path);
// One written whole and removed again (commit_together undoing its set): no longer named.
void forget_written(const std::string& path);

// Removes every temporary file and folder claimed (async-signal-safe): what a signal handler
// that ends the process leaves no part of.
void remove_temporaries();

// While a set of files is moved into place: the handler's signals are blocked on this thread and
// wait on every other; release() lets them go, and the outermost hold dies of one that came.
class Hold {
public:
    Hold();
    void release();

private:
    sigset_t before_;
};

}  // namespace mhc::output_signals
