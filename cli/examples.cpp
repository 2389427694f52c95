// Each command's examples, ending its --help (docs/cli.md, "Help"): the commands of the README's
// first hour, each a whole command line a user can run as it is (files named as the README names them).
#include <map>

#include "command.hpp"

namespace mhc::cli {

std::vector<std::string> command_examples(const std::string& name) {
    static const std::map<std::string, std::vector<std::string>> kExamples = {
        {"generate", {"mhc generate --preset gpt2-small --steps 2 -o t.db",
                      "mhc generate --preset llama2-7b --layers 8 --seq 2048 -o l.db --force"}},
        {"import", {"mhc import snapshot.pickle -o t.db", "mhc import et.json --kineto kineto.json -o t.db"}},
        {"record", {"mhc record -o run.db -- ./train", "mhc record -o run.db --torch -- python3 train.py"}},
        {"allocator", {"mhc allocator t.db", "mhc allocator t.db --allocator-conf expandable_segments:True"}},
        {"check", {"mhc check t.db"}},
        {"info", {"mhc info t.db", "mhc info t.db --json"}},
        {"prune", {"mhc prune t.db --dry-run", "mhc prune t.db --run 1,3"}},
        {"simulate", {"mhc simulate t.db --capacity 70%",
                      "mhc simulate t.db --capacity 60% --policy dtr --prefetch forecast",
                      "mhc simulate t.db --capacity 70% --allocator-conf expandable_segments:True"}},
        {"advise", {"mhc advise gpt2.db --capacity 4GiB --top 2 --verify",
                    "mhc advise gpt2.db --gpu h100-sxm --budget 3% --step-time 60ms",
                    "mhc advise gpt2.db --setting '{\"optimizer\": {\"state\": \"host\"}}'"}},
        {"sweep", {"mhc sweep t.db", "mhc sweep t.db --capacities 90%,70%,50% --links pcie4,pcie5 --budget 3%"}},
        {"validate", {"mhc validate t.db --policy lru --capacity 80%,65%",
                      "mhc validate t.db --capacity 70% --backend cuda"}},
        {"export", {"mhc export t.db --format perfetto -o t.json.gz --run 1", "mhc export t.db --format csv -o t-csv"}},
        {"kernels", {"mhc kernels sinkhorn --n 4 --iters 20 --input H.f32 --output P.f32"}},
        {"calibrate", {"mhc calibrate --backend host -o link.json", "mhc simulate t.db --capacity 70% --link link.json"}},
        {"help", {"mhc help simulate", "mhc help sizes"}},
        {"seconds", {"mhc seconds 9min", "mhc seconds 600 --bare-unit s"}},
    };
    const auto found = kExamples.find(name);
    return found == kExamples.end() ? std::vector<std::string>{} : found->second;
}

}  // namespace mhc::cli
