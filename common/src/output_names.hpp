#pragma once
// What OutputFile, MadeDirectory and TempFile share with the checks on an output's name
// (output_names.cpp). Private to mhc_common.
#include <sys/types.h>

#include <string>

namespace mhc::output_names {

// "directory", "FIFO", ...: what a file that is not a regular one is, as messages say it.
const char* kind_of(mode_t mode);
// Where a symbolic link points ("?" when it cannot be read).
std::string link_target(const std::string& path);
// Removes the SQLite logs of the file an output replaces (and a write-ahead log's index).
void remove_sqlite_logs(const std::string& path);
bool process_alive(long pid);
// "<base><marker><digits>" -> the pid, else -1.
long pid_after(const std::string& name, const std::string& base, const char* marker);

}  // namespace mhc::output_names
