#pragma once
// A file read through a memory map (SQLite maps a trace to read it) that another process cuts
// short while it is read: the kernel sends SIGBUS at the first page past the file's new end, and
// the command died of it (exit 135, nothing said, its temporary outputs left).

#include <string>

namespace mhc {

// Catches SIGBUS for the rest of the process: when the fault lies in a file's mapping, one line
// on stderr, "PROGRAM: FILE: cut short by another process while PROGRAM read it (SIGBUS); stopped,
// nothing half-written left", the temporary outputs removed as a SIGTERM removes them, and exit
// status 2 (the input changed under the command). Any other SIGBUS ends the process as before.
void catch_files_cut_short(const char* program);

// `given` (a file about to be opened, as the user named it) is how the line above names it: the
// handler found only the mapping's absolute path (/proc/self/maps), where every other line says the
// name as given. Matched by device and inode, or by the absolute path; 32 files at most are kept
// (the rest said by their absolute path). Call it before the file is read, never from a handler.
void name_file_as_given(const std::string& given);

}  // namespace mhc
