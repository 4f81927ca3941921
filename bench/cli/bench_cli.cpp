// bench/cli: start-up cost of the `lockstep` CLI — wall time and peak memory (the child's
// ru_maxrss from wait4) of `lockstep report --json RUN` on the demo run (scripts/demo.sh's
// recording: mlp 8 x 512, 2 ranks, 12 steps, 1 MiB buckets), and of `lockstep --version`.
// Goals (issue 8): report <= 20 ms and <= 20 MB; before the CLI stopped linking LibTorch,
// --version alone took 0.74 s and 158 MB (288 shared libraries).
//
//   bench_cli [LOCKSTEP_CLI [RUN.db]]
// Without RUN.db the demo run is recorded first with `lockstep run` (needs lockstep-worker).
// Each command runs kRuns times; the median wall time and the largest peak are printed, as
// `name: value unit` lines. Pass another build's CLI to compare (e.g. main's).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

extern char** environ;

namespace {

// 21: an odd count for a clean median; each run is milliseconds (seconds for a LibTorch build).
constexpr int kRuns = 21;

struct Sample {
    double ms = 0;
    double peakMb = 0;
    int status = -1;
};

Sample runOnce(const std::vector<std::string>& args)
{
    std::vector<char*> argv;
    for (const auto& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    Sample s;
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ) != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return s;
    }
    int status = 0;
    rusage usage{};
    wait4(pid, &status, 0, &usage);
    s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    s.peakMb = double(usage.ru_maxrss) / 1024.0; // ru_maxrss is in KiB on Linux
    s.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    posix_spawn_file_actions_destroy(&actions);
    return s;
}

bool measure(const char* name, const std::vector<std::string>& args)
{
    std::vector<double> ms;
    double peak = 0;
    for (int i = 0; i < kRuns; ++i) {
        const Sample s = runOnce(args);
        if (s.status != 0) {
            std::fprintf(stderr, "bench_cli: `%s` failed (status %d)\n", args[1].c_str(), s.status);
            return false;
        }
        ms.push_back(s.ms);
        peak = std::max(peak, s.peakMb);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s_ms: %.2f ms\n", name, ms[ms.size() / 2]);
    std::printf("%s_peak_mb: %.1f MB\n", name, peak);
    return true;
}

} // namespace

int main(int argc, char** argv)
{
    std::string cli = argc > 1 ? argv[1] : (std::getenv("LOCKSTEP_CLI") ? std::getenv("LOCKSTEP_CLI") : "");
    if (cli.empty()) {
        std::fprintf(stderr, "usage: bench_cli LOCKSTEP_CLI [RUN.db]\n");
        return 2;
    }
    std::string run = argc > 2 ? argv[2] : "";
    std::filesystem::path tmp;
    if (run.empty()) {
        char tmpl[] = "/tmp/bench-cli-XXXXXX";
        if (!mkdtemp(tmpl))
            return 1;
        tmp = tmpl;
        run = (tmp / "demo.db").string();
        const Sample rec = runOnce({cli, "run", "--nproc", "2", "--model", "mlp", "--layers", "8", "--width", "512",
                                    "--batch", "32", "--steps", "12", "--bucket-mb", "1", "--out", run});
        if (rec.status != 0) {
            std::fprintf(stderr, "bench_cli: recording the demo run failed (status %d); pass a run file\n", rec.status);
            std::filesystem::remove_all(tmp);
            return 1;
        }
    }
    const bool ok = measure("cli_report", {cli, "report", "--json", run}) && measure("cli_version", {cli, "--version"});
    if (!tmp.empty())
        std::filesystem::remove_all(tmp);
    return ok ? 0 : 1;
}
