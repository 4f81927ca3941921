// `lockstep run --hosts N`: emulated hosts (network namespaces, a bridge, tc-shaped veth links)
// end to end with real workers, real gloo over the shaped links, real run files; and the promise
// that nothing of the network outlives a run however it ends (success, SIGTERM, a killed rank,
// the launcher killed with SIGKILL).
//
// The namespaces a run uses are found from the outside, as any observer would: the launcher holds
// one descriptor per namespace (/proc/<launcher>/fd/* -> "net:[inode]"); after the run no process
// may refer to any of them (its namespace, a descriptor) and no file system may have one mounted
// (nsfs in /proc/self/mountinfo), so the kernel has destroyed them and every veth and qdisc in them.
// Without CAP_NET_ADMIN (not root) only the refusal is tested; the rest says why it is skipped.
#include "test_support.h"

#include "lockstep/core/analysis.h"
#include "lockstep/core/run_db.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

using namespace lockstep;
using lockstep::test::contains;

namespace {

bool canAdminNetwork()
{
    __user_cap_header_struct header {};
    header.version = _LINUX_CAPABILITY_VERSION_3;
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] {};
    if (syscall(SYS_capget, &header, data) != 0)
        return false;
    const auto has = [&](int cap) { return (data[cap / 32].effective & (1u << (cap % 32))) != 0; };
    return has(CAP_NET_ADMIN) && has(CAP_SYS_ADMIN);
}

// Whether this kernel has netem (delay, jitter, loss): a probe run with a delay fails fast
// without it, naming it.
bool haveNetem(std::string* why)
{
    test::TempDir dir;
    auto o = test::lockstep({"run", "--hosts", "1", "--nproc", "1", "--net-delay-us", "10", "--steps", "1", "--model",
                             "mlp", "--layers", "1", "--width", "8", "--progress", "none", "--out", dir.file("probe.db")},
                            60'000);
    if (o.exitCode == 0)
        return true;
    *why = o.err;
    return false;
}

std::string linkTarget(const std::string& path)
{
    char buf[256];
    const ssize_t n = readlink(path.c_str(), buf, sizeof buf - 1);
    return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

std::vector<std::string> entries(const std::string& dir)
{
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d))
            if (e->d_name[0] != '.')
                out.push_back(e->d_name);
        closedir(d);
    }
    return out;
}

// The network namespaces `pid` holds descriptors of ("net:[4026532345]").
std::set<std::string> netDescriptors(pid_t pid)
{
    std::set<std::string> out;
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    for (const std::string& fd : entries(dir))
        if (const std::string t = linkTarget(dir + "/" + fd); t.starts_with("net:["))
            out.insert(t);
    return out;
}

// Every network namespace something on this machine still refers to: a process's (or thread's)
// own, a descriptor, an nsfs mount.
std::set<std::string> liveNetNamespaces()
{
    std::set<std::string> out;
    for (const std::string& p : entries("/proc")) {
        if (p.find_first_not_of("0123456789") != std::string::npos)
            continue;
        const std::string base = "/proc/" + p;
        out.insert(linkTarget(base + "/ns/net"));
        for (const std::string& t : entries(base + "/task"))
            out.insert(linkTarget(base + "/task/" + t + "/ns/net"));
        for (const std::string& fd : entries(base + "/fd"))
            if (const std::string t = linkTarget(base + "/fd/" + fd); t.starts_with("net:["))
                out.insert(t);
    }
    std::ifstream mounts("/proc/self/mountinfo");
    for (std::string line; std::getline(mounts, line);)
        if (const size_t at = line.find("net:["); at != std::string::npos)
            out.insert(line.substr(at, line.find(']', at) - at + 1));
    out.erase("");
    return out;
}

// The processes whose parent is `parent`.
std::vector<pid_t> childrenOf(pid_t parent)
{
    std::vector<pid_t> out;
    for (const std::string& p : entries("/proc")) {
        if (p.find_first_not_of("0123456789") != std::string::npos)
            continue;
        std::ifstream stat("/proc/" + p + "/stat");
        std::string all((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
        const size_t close = all.rfind(')');
        if (close == std::string::npos)
            continue;
        std::istringstream rest(all.substr(close + 2));
        char state = 0;
        pid_t ppid = 0;
        rest >> state >> ppid;
        if (ppid == parent)
            out.push_back(pid_t(std::stoi(p)));
    }
    return out;
}

// Waits (on the processes' exits, through pidfds) until none of `pids` runs; false after timeoutMs.
bool waitGone(const std::vector<pid_t>& pids, int timeoutMs)
{
    std::vector<pollfd> fds;
    for (pid_t pid : pids) {
        const int fd = int(syscall(SYS_pidfd_open, pid, 0));
        if (fd >= 0)
            fds.push_back({fd, POLLIN, 0});
    }
    bool ok = true;
    for (pollfd& p : fds) {
        if (poll(&p, 1, timeoutMs) <= 0)
            ok = false;
        close(p.fd);
    }
    return ok;
}

std::vector<std::string> smallJob(const std::string& out, int steps, int width = 512)
{
    return {"run", "--hosts", "2", "--nproc", "2", "--model", "mlp", "--layers", "2", "--width", std::to_string(width),
            "--batch", "16",
            "--steps", std::to_string(steps), "--warmup", "1", "--bucket-mb", "1", "--progress", "plain", "--out", out};
}

struct RankRow {
    std::string host, bootId;
    int64_t offsetNs = 0, rttNs = 0, uncertaintyNs = 0, offsetEndNs = 0, syncEndNs = 0;
};

// The ranks table as stored (before the reader's alignClocks decides whose offset applies).
std::map<int, RankRow> storedRanks(const std::string& file)
{
    std::map<int, RankRow> out;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
        sqlite3_close(db);
        return out;
    }
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db,
                       "SELECT rank, host, boot_id, clock_offset_ns, clock_rtt_ns, clock_uncertainty_ns, "
                       "clock_offset_end_ns, clock_sync_end_ns FROM ranks",
                       -1, &st, nullptr);
    while (st && sqlite3_step(st) == SQLITE_ROW) {
        RankRow r;
        r.host = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
        r.bootId = reinterpret_cast<const char*>(sqlite3_column_text(st, 2));
        r.offsetNs = sqlite3_column_int64(st, 3);
        r.rttNs = sqlite3_column_int64(st, 4);
        r.uncertaintyNs = sqlite3_column_int64(st, 5);
        r.offsetEndNs = sqlite3_column_int64(st, 6);
        r.syncEndNs = sqlite3_column_int64(st, 7);
        out[sqlite3_column_int(st, 0)] = r;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

// Starts a 2 x 2 job and returns once it has finished a step, with the namespaces it holds and
// its workers' pids.
struct Started {
    test::Child child;
    std::set<std::string> namespaces;
    std::vector<pid_t> workers;
};

void startAndWaitForStep(Started& s, const std::vector<std::string>& args)
{
    ASSERT_TRUE(s.child.start(test::cliPath(), args)) << s.child.err();
    while (!contains(s.child.err(), "step 1/") && s.child.pump(200)) {
    }
    ASSERT_TRUE(contains(s.child.err(), "step 1/")) << s.child.all();
    s.namespaces = netDescriptors(s.child.pid());
    s.workers = childrenOf(s.child.pid());
}

} // namespace

TEST(Net, RefusesWithoutNetAdminBeforeStartingAnything)
{
    test::TempDir dir;
    std::vector<std::string> args = smallJob(dir.file("run.db"), 3);
    test::Outcome o;
    if (canAdminNetwork()) {
        // Root: run it with CAP_NET_ADMIN out of its bounding set, so the capability is gone after exec.
        ASSERT_TRUE(test::exists("/usr/bin/setpriv")) << "util-linux's setpriv is needed to drop the capability";
        args.insert(args.begin(), {"--bounding-set=-net_admin", "--", test::cliPath()});
        o = test::run("/usr/bin/setpriv", args, 30'000);
    } else {
        o = test::lockstep(args, 30'000);
    }
    ASSERT_TRUE(o.finished) << o.describe();
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    EXPECT_TRUE(contains(o.err, "CAP_NET_ADMIN")) << o.describe();
    EXPECT_TRUE(contains(o.err, "nothing was started")) << o.describe();
    // Nothing: no run file, no shard folder.
    EXPECT_TRUE(test::listDir(dir.path()).empty()) << o.describe();
}

TEST(Net, ShapeFlagsNeedHosts)
{
    test::TempDir dir;
    auto o = test::lockstep({"run", "--nproc", "2", "--net-gbps", "1", "--out", dir.file("run.db")}, 30'000);
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    EXPECT_TRUE(contains(o.err, "need --hosts")) << o.describe();
    o = test::lockstep({"run", "--hosts", "2", "--nproc", "1", "--net-jitter-us", "5", "--out", dir.file("run.db")}, 30'000);
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    EXPECT_TRUE(contains(o.err, "--net-jitter-us needs --net-delay-us")) << o.describe();
    o = test::lockstep({"run", "--hosts", "65", "--nproc", "1", "--out", dir.file("run.db")}, 30'000);
    EXPECT_EQ(o.exitCode, 2) << o.describe();
    EXPECT_TRUE(test::listDir(dir.path()).empty());
}

// The 2-host x 2-rank run over a 1 Gbit/s link: where every rank ran, the clock exchange between
// hosts, a bucket's bandwidth bounded by the link, `report` naming the hosts, nothing left.
TEST(Net, TwoHostsTwoRanksOverOneGbit)
{
    if (!canAdminNetwork())
        GTEST_SKIP() << "needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root): the refusal is tested instead";
    test::TempDir dir;
    const std::string out = dir.file("2x2.db");
    Started s;
    std::vector<std::string> args = smallJob(out, 8, 1024); // 8 MiB of gradients: 8 buckets a step
    args.insert(args.end(), {"--net-gbps", "1"});
    startAndWaitForStep(s, args);
    // Two hosts and a bridge, held by the launcher; four workers.
    EXPECT_EQ(s.namespaces.size(), 3u) << s.child.all();
    EXPECT_EQ(s.workers.size(), 4u);
    ASSERT_TRUE(s.child.wait(120'000)) << s.child.all();
    ASSERT_EQ(s.child.exitCode(), 0) << s.child.all();
    EXPECT_TRUE(contains(s.child.err(), "2 emulated hosts (10.77.0.1-10.77.0.2 on eth0), links 1 Gbit/s")) << s.child.err();

    // Where each rank ran: ranks 0, 1 on host0, ranks 2, 3 on host1 (its own UTS name).
    const auto ranks = storedRanks(out);
    ASSERT_EQ(ranks.size(), 4u);
    EXPECT_EQ(ranks.at(0).host, "host0");
    EXPECT_EQ(ranks.at(1).host, "host0");
    EXPECT_EQ(ranks.at(2).host, "host1");
    EXPECT_EQ(ranks.at(3).host, "host1");
    // The clock exchange ran between the hosts (a measured round trip over the link), and what it
    // stored covers the true offset: one machine, one clock, so 0.
    for (int r = 1; r < 4; ++r) {
        const RankRow& row = ranks.at(r);
        EXPECT_GT(row.rttNs, 0) << "rank " << r;
        EXPECT_GT(row.uncertaintyNs, 0) << "rank " << r;
        EXPECT_LE(std::llabs(row.offsetNs), row.uncertaintyNs) << "rank " << r;
    }

    // The run keeps its hosts, and `report` names them.
    auto run = core::loadRun(out);
    ASSERT_TRUE(run.has_value()) << run.error().message;
    ASSERT_EQ(run->ranks.size(), 4u);
    EXPECT_EQ(run->ranks[2].host, "host1");
    EXPECT_EQ(run->config.extra["emulated_net"], "hosts=2 nproc=2 gbps=1 delay_us=0 jitter_us=0 loss_pct=0");
    auto report = test::lockstep({"report", out});
    EXPECT_EQ(report.exitCode, 0) << report.describe();
    // The Ranks table has a host column (ranks on several hosts), and the Clocks table names them.
    const size_t ranksAt = report.out.find("\nRanks (");
    ASSERT_NE(ranksAt, std::string::npos) << report.out;
    const std::string ranksTable = report.out.substr(ranksAt, report.out.find("\n\n", ranksAt + 1) - ranksAt);
    EXPECT_TRUE(contains(ranksTable, " host ") && contains(ranksTable, "host0") && contains(ranksTable, "host1"))
        << ranksTable;
    EXPECT_TRUE(contains(report.out.substr(report.out.find("\nClocks")), "host1")) << report.out;

    // No bucket moved faster than the link allows: busbw (ring factor included) is at most the
    // rate (0.125 GB/s), with 15 % for the shaper's burst.
    const core::RunAnalysis a = core::analyze(*run);
    ASSERT_FALSE(a.summary.buckets.empty());
    for (const auto& b : a.summary.buckets)
        EXPECT_LE(b.meanBusbwGBps, 0.125 * 1.15) << "bucket " << b.bucket;

    // Nothing of the network is left.
    const auto live = liveNetNamespaces();
    for (const std::string& ns : s.namespaces)
        EXPECT_FALSE(live.count(ns)) << ns << " outlived the run";
}

// Two runs at once: each has its own (anonymous) namespaces, so their equal addresses and
// interface names never meet.
TEST(Net, TwoRunsCoexist)
{
    if (!canAdminNetwork())
        GTEST_SKIP() << "needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root)";
    test::TempDir dir;
    test::Child a, b;
    ASSERT_TRUE(a.start(test::cliPath(), smallJob(dir.file("a.db"), 3)));
    ASSERT_TRUE(b.start(test::cliPath(), smallJob(dir.file("b.db"), 3)));
    ASSERT_TRUE(a.wait(120'000)) << a.all();
    ASSERT_TRUE(b.wait(120'000)) << b.all();
    EXPECT_EQ(a.exitCode(), 0) << a.all();
    EXPECT_EQ(b.exitCode(), 0) << b.all();
    EXPECT_EQ(storedRanks(dir.file("a.db")).size(), 4u);
    EXPECT_EQ(storedRanks(dir.file("b.db")).size(), 4u);
}

// Every way a run can end leaves nothing: SIGTERM to the launcher, a rank killed, the launcher
// itself killed with SIGKILL (no destructor runs: the kernel's own teardown is what is tested).
TEST(Net, NothingIsLeftHoweverTheRunEnds)
{
    if (!canAdminNetwork())
        GTEST_SKIP() << "needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root)";
    const std::vector<std::string> rootLinksBefore = test::listDir("/sys/class/net");
    for (const std::string how : {"sigterm", "rank-killed", "launcher-sigkill"}) {
        SCOPED_TRACE(how);
        test::TempDir dir;
        Started s;
        startAndWaitForStep(s, smallJob(dir.file("run.db"), 10'000));
        ASSERT_EQ(s.namespaces.size(), 3u) << s.child.all();
        ASSERT_EQ(s.workers.size(), 4u);
        if (how == std::string("sigterm")) {
            s.child.kill(SIGTERM);
            ASSERT_TRUE(s.child.wait(60'000));
            EXPECT_EQ(s.child.exitCode(), 128 + SIGTERM) << s.child.all();
        } else if (how == std::string("rank-killed")) {
            ::kill(s.workers[2], SIGKILL);
            ASSERT_TRUE(s.child.wait(60'000));
            EXPECT_EQ(s.child.exitCode(), 1) << s.child.all();
            EXPECT_TRUE(contains(s.child.err(), "killed by SIGKILL")) << s.child.err();
        } else {
            s.child.kill(SIGKILL);
            ASSERT_TRUE(s.child.wait(60'000));
            // Its workers die with it (PR_SET_PDEATHSIG); wait for their exits.
            EXPECT_TRUE(waitGone(s.workers, 30'000));
        }
        const auto live = liveNetNamespaces();
        for (const std::string& ns : s.namespaces)
            EXPECT_FALSE(live.count(ns)) << ns << " outlived the run";
    }
    // And nothing ever appeared in this machine's own namespace (no veth end, no bridge).
    EXPECT_EQ(test::listDir("/sys/class/net"), rootLinksBefore);
}

// With 2 ms +- 1 ms each way between hosts (tc netem), the clock exchange's stored uncertainty
// still covers the true offset (0: one machine's clock), and is at least the link's delay.
TEST(Net, ClockUncertaintyCoversTheOffsetOverADelayedLink)
{
    if (!canAdminNetwork())
        GTEST_SKIP() << "needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root)";
    std::string why;
    if (!haveNetem(&why))
        GTEST_SKIP() << "this kernel has no netem: " << why;
    test::TempDir dir;
    const std::string out = dir.file("delay.db");
    std::vector<std::string> args = smallJob(out, 3);
    args.insert(args.end(), {"--net-delay-us", "2000", "--net-jitter-us", "1000", "--net-gbps", "1"});
    auto o = test::lockstep(args, 120'000);
    ASSERT_EQ(o.exitCode, 0) << o.describe();
    const auto ranks = storedRanks(out);
    ASSERT_EQ(ranks.size(), 4u);
    for (int r : {2, 3}) {
        const RankRow& row = ranks.at(r);
        EXPECT_LE(std::llabs(row.offsetNs), row.uncertaintyNs) << "rank " << r;
        EXPECT_LE(std::llabs(row.offsetEndNs), row.uncertaintyNs) << "rank " << r;
        // A round trip crosses the link twice: at least 2 x (2 ms - 1 ms).
        EXPECT_GE(row.rttNs, 2'000'000) << "rank " << r;
        EXPECT_GE(row.uncertaintyNs, 1'000'000) << "rank " << r;
    }
}
