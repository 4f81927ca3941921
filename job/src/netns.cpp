// Emulated hosts: network namespaces, a bridge, veth links shaped with tc (see netns.h).
#include "lockstep/job/netns.h"

#include "lockstep/job/flags.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace lockstep::job {
namespace {

// The emulated hosts' subnet. The bridge namespace is connected to nothing else, so it cannot
// clash with the machine's own networks; 10.77.0.0/24 is only what shows in messages and logs.
constexpr const char* kSubnetPrefix = "10.77.0.";
constexpr int kPrefixLength = 24;

std::string toolPath(const std::string& tool)
{
    for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
        const std::string path = dir + tool;
        if (access(path.c_str(), X_OK) == 0)
            return path;
    }
    return {};
}

bool haveCapability(int cap)
{
    __user_cap_header_struct header {};
    header.version = _LINUX_CAPABILITY_VERSION_3;
    header.pid = 0;
    __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] {};
    if (syscall(SYS_capget, &header, data) != 0)
        return false;
    return (data[cap / 32].effective & (1u << (cap % 32))) != 0;
}

// A new, anonymous network namespace, held by the returned descriptor only. This thread enters
// it for the moment of creating it and returns to its own.
core::Result<int> newNamespace()
{
    const int self = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (self < 0)
        return core::fail(std::string("cannot open this process's network namespace: ") + std::strerror(errno));
    if (unshare(CLONE_NEWNET) != 0) {
        const int err = errno;
        close(self);
        return core::fail(std::string("cannot create a network namespace: ") + std::strerror(err));
    }
    const int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    const int openErr = errno;
    if (setns(self, CLONE_NEWNET) != 0) {
        // The launcher would go on in the wrong network: nothing sensible is left to do.
        std::fprintf(stderr, "lockstep: cannot return to the launcher's network namespace: %s\n", std::strerror(errno));
        std::abort();
    }
    close(self);
    if (fd < 0)
        return core::fail(std::string("cannot open a new network namespace: ") + std::strerror(openErr));
    return fd;
}

std::string bitsPerSecond(double gbps) { return std::to_string(std::llround(gbps * 1e9)) + "bit"; }

std::string micros(double us) { return std::to_string(std::llround(us)) + "us"; }

// An htb root with one class of `gbps` on `dev`: every packet it sends goes at that rate. The
// burst covers 1 ms at the rate and at least a few 64 KiB GSO packets (veth sends them whole),
// so the shaper neither starves a fast link nor lets a slow one run ahead for long.
core::Status shapeRate(int ns, const std::string& dev, double gbps)
{
    const double bytesPerS = gbps * 1e9 / 8;
    const long long burst = std::max<long long>(256 * 1024, std::llround(bytesPerS * 1e-3));
    const long long quantum = std::clamp<long long>(std::llround(bytesPerS / 1000), 1514, 200000);
    if (auto s = runNetTool("tc", {"qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"}, ns); !s)
        return s;
    if (auto s = runNetTool("tc",
                            {"class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate",
                             bitsPerSecond(gbps), "ceil", bitsPerSecond(gbps), "burst", std::to_string(burst), "cburst",
                             std::to_string(burst), "quantum", std::to_string(quantum)},
                            ns);
        !s)
        return s;
    // A switch port's queue, not a bufferbloated one: htb's default leaf queue holds 1000 packets,
    // which veth sends as 64 KiB GSO packets: half a second at 1 Gbit/s. 2 ms of the rate (and at
    // least a few GSO packets) keeps the queueing delay of a real port.
    const long long queue = std::max<long long>(4 * 65536, std::llround(bytesPerS * 2e-3));
    return runNetTool("tc", {"qdisc", "add", "dev", dev, "parent", "1:1", "handle", "20:", "bfifo", "limit",
                             std::to_string(queue)},
                      ns);
}

core::Status addNetem(int ns, const std::string& dev, const NetShape& shape, bool underHtb)
{
    std::vector<std::string> args{"qdisc", "add", "dev", dev};
    if (underHtb)
        args.insert(args.end(), {"parent", "1:1", "handle", "10:"});
    else
        args.insert(args.end(), {"root", "handle", "10:"});
    // A queue long enough for a fast link's packets in flight during the delay.
    args.insert(args.end(), {"netem", "limit", "100000"});
    if (shape.delayUs > 0) {
        args.insert(args.end(), {"delay", micros(shape.delayUs)});
        if (shape.jitterUs > 0)
            args.push_back(micros(shape.jitterUs));
    }
    if (shape.lossPct > 0)
        args.insert(args.end(), {"loss", formatNumber(shape.lossPct) + "%"});
    auto s = runNetTool("tc", args, ns);
    if (!s && s.error().message.find("unknown") != std::string::npos)
        return core::fail(s.error().message
                          + " (this kernel has no netem, CONFIG_NET_SCH_NETEM: --net-delay-us, --net-jitter-us and "
                            "--net-loss-pct need it; --net-gbps alone needs only htb)");
    return s;
}

} // namespace

core::Status runNetTool(const std::string& tool, const std::vector<std::string>& args, int netnsFd, int passFd)
{
    const std::string path = toolPath(tool);
    if (path.empty())
        return core::fail("`" + tool + "` (iproute2) is not installed: apt-get install iproute2");
    std::vector<std::string> argvStr{path};
    argvStr.insert(argvStr.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argvStr)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string envPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin", envLang = "LC_ALL=C";
    char* envp[] = {envPath.data(), envLang.data(), nullptr};
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        return core::fail(std::string("pipe: ") + std::strerror(errno));
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) {
        const int err = errno;
        close(out[0]), close(out[1]);
        return core::fail(std::string("fork: ") + std::strerror(err));
    }
    if (pid == 0) {
        setpgid(0, 0); // a terminal's Ctrl-C is the launcher's to handle
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, nullptr);
        if (netnsFd >= 0 && setns(netnsFd, CLONE_NEWNET) != 0) {
            const char msg[] = "cannot enter the network namespace\n";
            [[maybe_unused]] ssize_t n = write(out[1], msg, sizeof msg - 1);
            _exit(126);
        }
        if (passFd >= 0 && passFd != 3)
            dup2(passFd, 3); // without O_CLOEXEC: the tool opens /proc/self/fd/3
        else if (passFd == 3)
            fcntl(3, F_SETFD, 0);
        const int devNull = open("/dev/null", O_RDONLY);
        if (devNull >= 0)
            dup2(devNull, STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(out[1], STDERR_FILENO);
        execve(argv[0], argv.data(), envp);
        _exit(127);
    }
    close(out[1]);
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = read(out[0], buf, sizeof buf);
        if (n > 0) {
            if (text.size() < 16384)
                text.append(buf, size_t(n));
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
    close(out[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return {};
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
        text.pop_back();
    std::string command = tool;
    for (const auto& a : args)
        command += " " + a;
    return core::fail("`" + command + "` failed" + (text.empty() ? std::string() : ": " + text));
}

core::Status checkHostNetwork(int hosts, const NetShape& shape)
{
    if (hosts < 1 || hosts > kMaxHosts)
        return core::fail(core::ErrorCode::Usage, "--hosts: " + std::to_string(hosts) + " is out of range (1 to " + std::to_string(kMaxHosts) + ")");
    if (shape.jitterUs > 0 && shape.delayUs <= 0)
        return core::fail(core::ErrorCode::Usage, "--net-jitter-us needs --net-delay-us (jitter varies the delay)");
    if (shape.jitterUs > shape.delayUs)
        return core::fail(core::ErrorCode::Usage, "--net-jitter-us " + formatNumber(shape.jitterUs) + " is larger than --net-delay-us "
                          + formatNumber(shape.delayUs) + " (a packet cannot arrive before it was sent)");
    if (!haveCapability(CAP_NET_ADMIN) || !haveCapability(CAP_SYS_ADMIN))
        return core::fail("--hosts needs CAP_NET_ADMIN and CAP_SYS_ADMIN to create network namespaces and shape "
                          "their links (run it as root, e.g. with sudo); nothing was started");
    for (const char* tool : {"ip", "tc"})
        if (toolPath(tool).empty())
            return core::fail(std::string("--hosts needs `") + tool + "` (iproute2): apt-get install iproute2");
    return {};
}

core::Result<std::unique_ptr<HostNetwork>> HostNetwork::create(int hosts, const NetShape& shape)
{
    if (auto s = checkHostNetwork(hosts, shape); !s)
        return std::unexpected(s.error());
    std::unique_ptr<HostNetwork> net(new HostNetwork);
    net->m_shape = shape;
    auto bridge = newNamespace();
    if (!bridge)
        return std::unexpected(bridge.error());
    net->m_bridgeNs = *bridge;
    const int br = net->m_bridgeNs;
    const auto fail = [](const core::Error& e) {
        return core::fail("setting up the emulated hosts' network: " + e.message);
    };
    for (const auto& args : std::vector<std::vector<std::string>>{{"link", "set", "lo", "up"},
                                                                  {"link", "add", "br0", "type", "bridge"},
                                                                  {"link", "set", "br0", "up"}})
        if (auto s = runNetTool("ip", args, br); !s)
            return fail(s.error());
    for (int i = 0; i < hosts; ++i) {
        auto ns = newNamespace();
        if (!ns)
            return fail(ns.error());
        net->m_hostNs.push_back(*ns);
        const std::string port = "h" + std::to_string(i);
        // The pair is made in the bridge's namespace with its other end put straight into the
        // host's (named by the descriptor passed as fd 3): no end ever appears in the machine's.
        if (auto s = runNetTool("ip", {"link", "add", port, "type", "veth", "peer", "name", kHostInterface, "netns",
                                       "/proc/self/fd/3"},
                                br, *ns);
            !s)
            return fail(s.error());
        for (const auto& args : std::vector<std::vector<std::string>>{{"link", "set", port, "master", "br0"},
                                                                      {"link", "set", port, "up"}})
            if (auto s = runNetTool("ip", args, br); !s)
                return fail(s.error());
        for (const auto& args : std::vector<std::vector<std::string>>{
                 {"link", "set", "lo", "up"},
                 {"addr", "add", net->address(i) + "/" + std::to_string(kPrefixLength), "dev", kHostInterface},
                 {"link", "set", kHostInterface, "up"}})
            if (auto s = runNetTool("ip", args, *ns); !s)
                return fail(s.error());
        if (shape.gbps > 0) {
            if (auto s = shapeRate(*ns, kHostInterface, shape.gbps); !s)
                return fail(s.error());
            if (auto s = shapeRate(br, port, shape.gbps); !s)
                return fail(s.error());
        }
        if (shape.needsNetem())
            if (auto s = addNetem(*ns, kHostInterface, shape, shape.gbps > 0); !s)
                return fail(s.error());
    }
    return net;
}

HostNetwork::~HostNetwork()
{
    for (int fd : m_hostNs)
        close(fd);
    if (m_bridgeNs >= 0)
        close(m_bridgeNs);
}

std::string HostNetwork::address(int host) const { return kSubnetPrefix + std::to_string(host + 1); }

std::string HostNetwork::hostname(int host) const { return "host" + std::to_string(host); }

std::vector<uint64_t> HostNetwork::namespaceInodes() const
{
    std::vector<uint64_t> out;
    std::vector<int> fds = m_hostNs;
    fds.push_back(m_bridgeNs);
    for (int fd : fds) {
        struct stat st {};
        if (fd >= 0 && fstat(fd, &st) == 0)
            out.push_back(uint64_t(st.st_ino));
    }
    return out;
}

std::string HostNetwork::describe() const
{
    std::string out = std::to_string(hosts()) + " emulated host" + (hosts() == 1 ? "" : "s") + " (" + address(0)
        + (hosts() > 1 ? "-" + address(hosts() - 1) : std::string()) + " on " + kHostInterface + ")";
    out += m_shape.gbps > 0 ? ", links " + formatNumber(m_shape.gbps) + " Gbit/s" : std::string(", links not rate-limited");
    if (m_shape.delayUs > 0)
        out += ", delay " + formatNumber(m_shape.delayUs) + " us"
            + (m_shape.jitterUs > 0 ? " +- " + formatNumber(m_shape.jitterUs) + " us" : std::string()) + " each way";
    if (m_shape.lossPct > 0)
        out += ", loss " + formatNumber(m_shape.lossPct) + " %";
    return out;
}

} // namespace lockstep::job
