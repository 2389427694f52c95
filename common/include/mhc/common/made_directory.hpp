#pragma once
// MadeDirectory: a folder a command creates for its outputs (mhc export --format csv -o DIR). The
// folders it made (DIR and any missing parent) are removed again, when empty, if the command
// fails before keep(), and also when the process dies of SIGINT, SIGTERM or SIGHUP (after the
// temporary files of its OutputFiles are removed): an interrupted command leaves no empty
// folder where its output was to be. A folder that existed before is never removed.
#include <string>
#include <vector>

namespace mhc {

class MadeDirectory {
public:
    // Creates `path` and its missing parents; throws mhc::Error naming it when it cannot.
    explicit MadeDirectory(const std::string& path);
    ~MadeDirectory();   // not kept: the folders made are removed, deepest first, when empty
    MadeDirectory(const MadeDirectory&) = delete;
    MadeDirectory& operator=(const MadeDirectory&) = delete;
    void keep();   // the outputs are in place: the folders stay

private:
    std::vector<std::string> made_;   // deepest first
    std::vector<int> slots_;          // in the signal handler's list
};

}   // namespace mhc
