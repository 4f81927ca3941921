// bench_big: issue 31's targets, measured on generated big runs (1024 ranks, 8 to a host).
//
// For 10 M spans (and 100 M with --with-100m: ~7.5 GB of disk and ~20 minutes), it writes the run
// with core's generator (writeSyntheticRun: rank after rank, or step after step with
// --step-major; bounded memory) into a temporary folder, then runs the shipped programs on it as
// child processes, one after another, each with a time limit and a memory limit:
//   big_<size>_write_spans_per_s, _write_s, _write_peak_rss_mb (the generator's child),
//   big_<size>_write_cpu_spans_per_s (its CPU time: the rate a shared machine does not blur),
//   big_<size>_file_bytes_per_span, _file_mb, and where the bytes are (spans, instants; dbstat),
//   big_<size>_report_computed_s, _cpu_s, _peak_rss_mb (`lockstep report FILE` before the file
//       has stored summaries: every span loaded and analysed),
//   big_<size>_index_s, ... likewise (`lockstep index FILE`: the summaries computed and stored),
//   big_<size>_report_s, _report_cpu_s, _report_peak_rss_mb (`lockstep report FILE`, from them),
//   big_<size>_report_json_s, ... likewise                  (`lockstep report --json FILE`),
//   big_<size>_ui_screenshot_s, _ui_cpu_s, _ui_peak_rss_mb  (`lockstep-ui --screenshot OUT.png
//       --view timeline FILE`, offscreen), and big_<size>_ui_first_frame_s: from the fork to
//       the first processed paint after the window is shown (the app prints that moment when
//       LOCKSTEP_FIRST_FRAME_CLOCK is set; ui/screenshot.cpp: a run with a stored overview
//       shows it first, its spans load behind it), and big_<size>_ui_pan_*: the app's session
//       of 400 pan and zoom frames across the whole run at five zoom levels, kept going until
//       the spans are in (--pan-frames): frame render times (all, and while the spans load;
//       the maximum of what repeats when a frame over 16 ms is painted again, and the time the
//       machine's host stole), the longest GUI-thread stall between frames, the resident
//       memory's maximum; for 10 M
//       also big_10m_streamed_ui_*: the same with LOCKSTEP_MAX_DETAIL_SPANS=0 (the spans streamed
//       around the view, never loaded whole: what the app does with a run over its limit).
// Peak RSS is each child's own (wait4's rusage). A child that runs past --timeout (300 s) is
// killed and its line says "timed out after N s"; one that fails (past --mem-limit-mb, 12 GB of
// address space, it cannot allocate) says how it ended. The load average is printed before and
// after: the machine is shared. The files are removed unless --keep.
//   bench_big [--with-100m] [--only-100m] [--spans N] [--ranks N] [--dir DIR] [--keep]
//             [--timeout S] [--mem-limit-mb MB] [--no-ui] [--step-major] [--cli PATH] [--ui PATH]
#include "../bench_child.h"
#include "lockstep/core/synthetic.h"

#include <sqlite3.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace lockstep::core;
using Clock = std::chrono::steady_clock;

namespace {

struct Options {
    std::vector<int64_t> sizes;
    int32_t ranks = 1024;
    std::string dir;
    bool keep = false;
    bool ui = true;
    SyntheticOrder order = SyntheticOrder::RankMajor;
    int timeoutS = 300;
    int64_t memLimitMb = 12288;
    std::string cli = LOCKSTEP_CLI_PATH;
    std::string uiPath = LOCKSTEP_UI_PATH;
};

std::string loadAverage()
{
    std::ifstream in("/proc/loadavg");
    std::string a, b, c;
    in >> a >> b >> c;
    return a + " " + b + " " + c;
}

// "10m", "100m", "2.5m", or the count.
std::string sizeLabel(int64_t spans)
{
    if (spans % 1'000'000 == 0)
        return std::to_string(spans / 1'000'000) + "m";
    return std::to_string(spans);
}

void limitMemory(int64_t mb)
{
    if (mb <= 0)
        return;
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(mb) << 20;
    setrlimit(RLIMIT_AS, &lim);
}

struct ChildResult {
    bool started = false;
    bool timedOut = false;
    int status = 0;       // waitpid's
    double seconds = 0;   // fork to exit
    double maxRssMb = 0;  // the child's own peak RSS
    double cpuS = 0;      // its user + system time
    Clock::time_point forkedAt;
    std::string err;      // its stderr (the last 64 KiB)
    bool ok() const { return started && !timedOut && WIFEXITED(status) && WEXITSTATUS(status) == 0; }
    std::string how() const
    {
        if (!started)
            return "could not start";
        if (timedOut)
            return "timed out";
        if (WIFSIGNALED(status))
            return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
        return "exit status " + std::to_string(WEXITSTATUS(status));
    }
};

// Runs `argv` in a process group of its own, stdout to /dev/null, stderr captured; kills the
// group after `timeoutS`. `env` entries are added to the environment.
ChildResult runChild(const std::vector<std::string>& argv, const std::vector<std::string>& env, int timeoutS,
                     int64_t memLimitMb)
{
    ChildResult res;
    int errPipe[2];
    if (pipe(errPipe) != 0)
        return res;
    res.forkedAt = Clock::now();
    const pid_t pid = fork();
    if (pid < 0)
        return res;
    if (pid == 0) {
        setpgid(0, 0);
        const int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(errPipe[1], 2);
        close(errPipe[0]);
        for (const std::string& e : env)
            putenv(const_cast<char*>(e.c_str()));
        limitMemory(memLimitMb);
        std::vector<char*> args;
        for (const std::string& a : argv)
            args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
        _exit(127);
    }
    res.started = true;
    close(errPipe[1]);
    fcntl(errPipe[0], F_SETFL, O_NONBLOCK);
    const auto deadline = res.forkedAt + std::chrono::seconds(timeoutS);
    rusage usage{};
    char buf[4096];
    for (;;) {
        ssize_t n;
        while ((n = read(errPipe[0], buf, sizeof buf)) > 0) {
            res.err.append(buf, static_cast<size_t>(n));
            if (res.err.size() > (64u << 10))
                res.err.erase(0, res.err.size() - (64u << 10));
        }
        const pid_t done = wait4(pid, &res.status, WNOHANG, &usage);
        if (done == pid)
            break;
        if (Clock::now() > deadline && !res.timedOut) {
            res.timedOut = true;
            kill(-pid, SIGKILL);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    res.seconds = std::chrono::duration<double>(Clock::now() - res.forkedAt).count();
    res.maxRssMb = static_cast<double>(usage.ru_maxrss) / 1024.0; // kB on Linux
    res.cpuS = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
    close(errPipe[0]);
    return res;
}

void printFailure(const std::string& name, const ChildResult& r, int timeoutS)
{
    if (r.timedOut)
        std::printf("%s: timed out after %d s\n", name.c_str(), timeoutS);
    else
        std::printf("%s: failed (%s, after %.1f s, peak %.0f MB)\n", name.c_str(), r.how().c_str(), r.seconds, r.maxRssMb);
    // The last line the child said, for the reader of the output.
    std::string last = r.err;
    while (!last.empty() && last.back() == '\n')
        last.pop_back();
    if (const auto nl = last.rfind('\n'); nl != std::string::npos)
        last = last.substr(nl + 1);
    if (!last.empty())
        std::printf("  (its stderr ends: %s)\n", last.c_str());
}

// Bytes of a table with its indexes (SQLite's dbstat; -1 when this SQLite lacks it).
int64_t tableBytes(sqlite3* db, const char* table)
{
    sqlite3_stmt* st = nullptr;
    const std::string sql = std::string("SELECT SUM(pgsize) FROM dbstat WHERE name = '") + table
        + "' OR name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = '" + table + "')";
    int64_t bytes = -1;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        bytes = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return bytes;
}

// Where the file's bytes are: spans, and instants (the gradient-ready instants, ~0.8 per span),
// each table with its indexes.
void printTableSizes(const std::string& prefix, const std::string& path, long long spans, long long instants)
{
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
        // Blocks (schema 6 and 7 on); the rows' tables of older builds.
        int64_t spanBytes = tableBytes(db, "span_blocks"), instantBytes = tableBytes(db, "instant_blocks");
        if (spanBytes <= 0)
            spanBytes = tableBytes(db, "spans");
        if (instantBytes <= 0)
            instantBytes = tableBytes(db, "instants");
        if (spanBytes > 0 && spans > 0)
            std::printf("%s_spans_table_bytes_per_span: %.1f B\n", prefix.c_str(), static_cast<double>(spanBytes) / static_cast<double>(spans));
        if (instantBytes > 0 && instants > 0)
            std::printf("%s_instants_bytes_per_instant: %.1f B\n", prefix.c_str(),
                        static_cast<double>(instantBytes) / static_cast<double>(instants));
    }
    sqlite3_close(db);
}

// The generator in a forked child, so that its peak RSS is the writing's alone.
bool writeRun(const std::string& prefix, const SyntheticParams& params, const std::string& path, const Options& o)
{
    const auto [msg, status] = lockstep::bench::runInChild([&]() -> std::pair<std::string, int> {
        limitMemory(o.memLimitMb);
        const auto w0 = Clock::now();
        auto counts = writeSyntheticRun(params, path, RunWriter::Mode::Overwrite, o.order);
        const double s = std::chrono::duration<double>(Clock::now() - w0).count();
        rusage self{};
        getrusage(RUSAGE_SELF, &self);
        const double cpu = static_cast<double>(self.ru_utime.tv_sec + self.ru_stime.tv_sec)
            + static_cast<double>(self.ru_utime.tv_usec + self.ru_stime.tv_usec) * 1e-6;
        if (!counts)
            return {"error " + counts.error().message + "\n", 1};
        char line[512];
        std::snprintf(line, sizeof line, "ok %.6f %lld %lld %lld %.6f\n", s, static_cast<long long>(counts->spans),
                      static_cast<long long>(counts->instants), static_cast<long long>(lockstep::bench::peakRssKb()), cpu);
        return {line, 0};
    });
    double seconds = 0, cpu = 0;
    long long spans = 0, instants = 0, hwmKb = 0;
    if (std::sscanf(msg.c_str(), "ok %lf %lld %lld %lld %lf", &seconds, &spans, &instants, &hwmKb, &cpu) != 5) {
        std::printf("%s_write: failed (%s)\n", prefix.c_str(), !msg.empty() ? msg.c_str() : "the writer died");
        return false;
    }
    std::error_code ec;
    const auto bytes = std::filesystem::file_size(path, ec);
    std::printf("%s_ranks: %d\n", prefix.c_str(), params.worldSize);
    std::printf("%s_steps: %d\n", prefix.c_str(), params.steps);
    std::printf("%s_spans: %lld\n", prefix.c_str(), spans);
    std::printf("%s_instants: %lld\n", prefix.c_str(), instants);
    std::printf("%s_write_s: %.2f s\n", prefix.c_str(), seconds);
    std::printf("%s_write_order: %s\n", prefix.c_str(), o.order == SyntheticOrder::RankMajor ? "rank-major" : "step-major");
    std::printf("%s_write_spans_per_s: %.3f M/s\n", prefix.c_str(), static_cast<double>(spans) / seconds / 1e6);
    // CPU time (the generator's included): what the writing costs on a machine shared with others.
    std::printf("%s_write_cpu_spans_per_s: %.3f M/s\n", prefix.c_str(), static_cast<double>(spans) / cpu / 1e6);
    std::printf("%s_write_peak_rss_mb: %.1f MB\n", prefix.c_str(), static_cast<double>(hwmKb) / 1024.0);
    std::printf("%s_file_mb: %.1f MB\n", prefix.c_str(), static_cast<double>(bytes) / (1 << 20));
    std::printf("%s_file_bytes_per_span: %.1f B\n", prefix.c_str(), static_cast<double>(bytes) / static_cast<double>(spans));
    printTableSizes(prefix, path, spans, instants);
    std::fflush(stdout);
    return true;
}

// `lockstep ARGS... FILE` as a child: <name>_s, _cpu_s, _peak_rss_mb.
void measureCli(const std::string& name, std::vector<std::string> args, const std::string& file, const Options& o)
{
    std::vector<std::string> argv{o.cli};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(file);
    const ChildResult r = runChild(argv, {}, o.timeoutS, o.memLimitMb);
    if (!r.ok())
        printFailure(name + "_s", r, o.timeoutS);
    else
        std::printf("%s_s: %.2f s\n", name.c_str(), r.seconds);
    std::printf("%s_cpu_s: %.2f s\n", name.c_str(), r.cpuS);
    std::printf("%s_peak_rss_mb: %.1f MB\n", name.c_str(), r.maxRssMb);
    std::fflush(stdout);
}

// The moment the app printed (LOCKSTEP_FIRST_FRAME_CLOCK), steady_clock nanoseconds.
std::optional<int64_t> firstFrameNs(const std::string& err)
{
    const std::string key = "first_frame_steady_ns: ";
    const auto at = err.find(key);
    if (at == std::string::npos)
        return std::nullopt;
    return std::atoll(err.c_str() + at + key.size());
}

// `lockstep-ui --screenshot OUT.png --view timeline FILE`, offscreen.
void measureUi(const std::string& prefix, const std::string& file, const std::string& dir, const Options& o,
               const std::string& extraEnv = {})
{
    const std::string png = dir + "/" + prefix + "_timeline.png";
    std::vector<std::string> env{"QT_QPA_PLATFORM=offscreen", "LOCKSTEP_FIRST_FRAME_CLOCK=1"};
    if (!extraEnv.empty())
        env.push_back(extraEnv);
    const ChildResult r = runChild({o.uiPath, "--screenshot", png, "--view", "timeline", "--pan-frames", "400", file},
                                   env, o.timeoutS, o.memLimitMb);
    if (!r.ok()) {
        printFailure(prefix + "_ui_screenshot_s", r, o.timeoutS);
    } else {
        std::printf("%s_ui_screenshot_s: %.2f s\n", prefix.c_str(), r.seconds);
        if (const auto ns = firstFrameNs(r.err)) {
            const double s = static_cast<double>(*ns - std::chrono::duration_cast<std::chrono::nanoseconds>(r.forkedAt.time_since_epoch()).count()) * 1e-9;
            std::printf("%s_ui_first_frame_s: %.2f s\n", prefix.c_str(), s);
        }
        // The app's own statistics of its pan and zoom session (--pan-frames).
        size_t at = 0;
        while ((at = r.err.find("ui_pan_", at)) != std::string::npos) {
            const size_t end = r.err.find('\n', at);
            std::printf("%s_%s\n", prefix.c_str(), r.err.substr(at, end == std::string::npos ? std::string::npos : end - at).c_str());
            at = end == std::string::npos ? r.err.size() : end;
        }
        if (const size_t w = r.err.find("# the slowest frame"); w != std::string::npos)
            std::printf("# %s: %s\n", prefix.c_str(), r.err.substr(w + 2, r.err.find('\n', w) - w - 2).c_str());
    }
    std::printf("%s_ui_cpu_s: %.2f s\n", prefix.c_str(), r.cpuS);
    std::printf("%s_ui_peak_rss_mb: %.1f MB\n", prefix.c_str(), r.maxRssMb);
    std::fflush(stdout);
}

bool parse(int argc, char** argv, Options& o)
{
    bool with100m = false, only100m = false;
    int64_t spans = 10'000'000;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool hasValue = i + 1 < argc;
        if (a == "--with-100m")
            with100m = true;
        else if (a == "--only-100m")
            only100m = true;
        else if (a == "--keep")
            o.keep = true;
        else if (a == "--no-ui")
            o.ui = false;
        else if (a == "--step-major")
            o.order = SyntheticOrder::StepMajor;
        else if (a == "--spans" && hasValue)
            spans = std::atoll(argv[++i]);
        else if (a == "--ranks" && hasValue)
            o.ranks = std::atoi(argv[++i]);
        else if (a == "--dir" && hasValue)
            o.dir = argv[++i];
        else if (a == "--timeout" && hasValue)
            o.timeoutS = std::atoi(argv[++i]);
        else if (a == "--mem-limit-mb" && hasValue)
            o.memLimitMb = std::atoll(argv[++i]);
        else if (a == "--cli" && hasValue)
            o.cli = argv[++i];
        else if (a == "--ui" && hasValue)
            o.uiPath = argv[++i];
        else {
            std::fprintf(stderr, "usage: bench_big [--with-100m] [--only-100m] [--spans N] [--ranks N] [--dir DIR] [--keep] "
                                 "[--timeout S] [--mem-limit-mb MB] [--no-ui] [--step-major] [--cli PATH] [--ui PATH]\n");
            return false;
        }
    }
    if (!only100m)
        o.sizes.push_back(spans);
    if (with100m || only100m)
        o.sizes.push_back(100'000'000);
    if (o.uiPath.empty())
        o.ui = false;
    return o.ranks > 0 && o.timeoutS > 0;
}

} // namespace

int main(int argc, char** argv)
{
    Options o;
    if (!parse(argc, argv, o))
        return 2;
    std::string dir = o.dir;
    if (dir.empty()) {
        std::string tmpl = (std::filesystem::temp_directory_path() / "lockstep_bench_big_XXXXXX").string();
        if (!mkdtemp(tmpl.data())) {
            std::fprintf(stderr, "bench_big: cannot make a temporary folder: %s\n", std::strerror(errno));
            return 1;
        }
        dir = tmpl;
    } else {
        std::filesystem::create_directories(dir);
    }
    std::printf("big_loadavg_before: %s\n", loadAverage().c_str());
    std::printf("big_cores: %u\n", std::thread::hardware_concurrency());
    std::fflush(stdout);
    std::vector<std::string> made;
    bool allWritten = true;
    for (const int64_t size : o.sizes) {
        const std::string prefix = "big_" + sizeLabel(size);
        const std::string file = dir + "/" + prefix + ".db";
        made.push_back(file);
        if (!writeRun(prefix, bigRunParams(size, o.ranks), file, o)) {
            allWritten = false;
            continue;
        }
        // The report as a file without stored summaries reads it (every span, analysed), then the
        // summaries stored (`lockstep index`: what merge and import do) and the report again.
        measureCli(prefix + "_report_computed", {"report"}, file, o);
        measureCli(prefix + "_index", {"index"}, file, o);
        measureCli(prefix + "_report", {"report"}, file, o);
        measureCli(prefix + "_report_json", {"report", "--json"}, file, o);
        if (o.ui) {
            measureUi(prefix, file, dir, o);
            // The same run as if it were too big to load whole: only the spans around the view
            // are streamed in (what a 100 M-span run gets), measured at 10 M too.
            if (prefix.find("100m") == std::string::npos)
                measureUi(prefix + "_streamed", file, dir, o, "LOCKSTEP_MAX_DETAIL_SPANS=0");
        } else {
            std::printf("%s_ui_screenshot_s: skipped (no lockstep-ui)\n", prefix.c_str());
        }
        std::printf("%s_loadavg_after: %s\n", prefix.c_str(), loadAverage().c_str());
        std::fflush(stdout);
        if (!o.keep)
            for (const char* suffix : {"", "-wal", "-shm"})
                std::filesystem::remove(file + suffix);
    }
    if (o.keep) {
        std::printf("big_files_kept_in: %s\n", dir.c_str());
    } else if (o.dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(dir, ec);
    } else {
        for (const int64_t size : o.sizes)
            std::filesystem::remove(dir + "/big_" + sizeLabel(size) + "_timeline.png");
    }
    return allWritten ? 0 : 1;
}
