// The load probe of a validation (validate_load.hpp) and Load's own judgement.
#include "validate_load.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace mhc::replay {

namespace detail {

CpuSample cpu_sample() {
    CpuSample sample;
    if (FILE* stat = std::fopen("/proc/stat", "r")) {
        unsigned long long jiffies[10] = {};
        if (std::fscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu", &jiffies[0], &jiffies[1],
                        &jiffies[2], &jiffies[3], &jiffies[4], &jiffies[5], &jiffies[6], &jiffies[7], &jiffies[8],
                        &jiffies[9]) >= 4) {
            double total = 0;
            for (int i = 0; i < 8; ++i) total += static_cast<double>(jiffies[i]);   // guest time is in user already
            sample.total = total;
            sample.busy = total - static_cast<double>(jiffies[3]) - static_cast<double>(jiffies[4]);   // minus idle, iowait
        }
        std::fclose(stat);
    }
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        sample.self_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    return sample;
}
int64_t peak_resident_bytes() {
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) != 0 || ru.ru_maxrss <= 0) return -1;
    return static_cast<int64_t>(ru.ru_maxrss) * 1024;   // Linux counts it in KiB
}

int64_t resident_bytes() {
    FILE* statm = std::fopen("/proc/self/statm", "r");
    if (!statm) return -1;
    long long size = 0, resident = -1;
    const int got = std::fscanf(statm, "%lld %lld", &size, &resident);
    std::fclose(statm);
    const long page = sysconf(_SC_PAGESIZE);
    return got == 2 && resident >= 0 && page > 0 ? resident * page : -1;
}

void ResidentPeak::sample(int64_t aliased_bytes) {
    if (most_aliased_ == 0 && aliased_bytes == 0) peak_ = std::max(peak_, peak_resident_bytes());
    const int64_t now = resident_bytes();
    if (now >= 0) peak_ = std::max(peak_, now - aliased_bytes);
    most_aliased_ = std::max(most_aliased_, aliased_bytes);
}

int64_t ResidentPeak::bytes() const {
    const int64_t hwm = peak_resident_bytes();
    return std::max(peak_, hwm >= 0 ? hwm - most_aliased_ : -1);
}

double load_average() {
    double averages[1];
    return getloadavg(averages, 1) == 1 ? averages[0] : -1;
}

void measure_others_share(Load& load, const CpuSample& before, const CpuSample& after) {
    if (before.total < 0 || after.total <= before.total || load.cores <= 0) return;
    // Jiffies to seconds by the wall time they span: total jiffies = wall x cores x HZ.
    const double wall = std::chrono::duration<double>(after.at - before.at).count();
    const double hz = (after.total - before.total) / (wall * load.cores);
    if (hz > 0 && wall > 0) {
        const double busy_s = (after.busy - before.busy) / hz, self_s = after.self_s - before.self_s;
        load.others_share = std::clamp((busy_s - self_s) / (wall * load.cores), 0.0, 1.0);
    }
}

}  // namespace detail

// The other processes' measured share of the CPUs during the run decides; the load average
// (a 1-minute decay that still counts work which ended before the run, and counts the
// validation's own threads) only when /proc/stat could not be read.
bool Load::loaded() const {
    if (others_share >= 0) return others_share > 0.25;
    return cores > 0 && before > 0.5 * cores;
}

std::string Load::text() const {
    char text[256];
    if (others_share >= 0)
        std::snprintf(text, sizeof text, "load average %.2f before, %.2f after, %d cores; other processes used %.0f%% of the CPUs meanwhile",
                      before, after, cores, 100 * others_share);
    else
        std::snprintf(text, sizeof text, "load average %.2f before, %.2f after, %d cores", before, after, cores);
    return text;
}

}  // namespace mhc::replay
