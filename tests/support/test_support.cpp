// Helpers of the Qt-free test suites (see test_support.h).
#include "test_support.h"

#include "lockstep/job/process.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace lockstep::test {

namespace fs = std::filesystem;

namespace {
double nowMs()
{
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
} // namespace

TempDir::TempDir()
{
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/lockstep-test-XXXXXX";
    if (mkdtemp(tmpl.data()))
        m_path = tmpl;
}

TempDir::~TempDir()
{
    std::error_code ec;
    if (!m_path.empty())
        fs::remove_all(m_path, ec);
}

std::vector<std::string> environment(const std::vector<std::string>& set, const std::vector<std::string>& unset)
{
    std::vector<std::string> keys(unset.begin(), unset.end());
    for (const std::string& kv : set)
        keys.push_back(kv.substr(0, kv.find('=')));
    std::vector<std::string_view> drop(keys.begin(), keys.end());
    std::vector<std::string> env = job::environmentWithout(drop);
    env.insert(env.end(), set.begin(), set.end());
    return env;
}

Child::Child(Child&& o) noexcept
    : m_pid(o.m_pid), m_outFd(o.m_outFd), m_errFd(o.m_errFd), m_exited(o.m_exited), m_signaled(o.m_signaled),
      m_exitCode(o.m_exitCode), m_out(std::move(o.m_out)), m_err(std::move(o.m_err)), m_startMs(o.m_startMs),
      m_endMs(o.m_endMs)
{
    o.m_pid = -1;
    o.m_outFd = o.m_errFd = -1;
}

Child::~Child()
{
    if (m_pid > 0 && !m_exited) {
        job::signalChild(m_pid, SIGKILL);
        reap(true);
    }
    for (int fd : {m_outFd, m_errFd})
        if (fd >= 0)
            close(fd);
}

bool Child::start(const std::string& program, const std::vector<std::string>& args, std::vector<std::string> env)
{
    std::vector<std::string> argv{program};
    argv.insert(argv.end(), args.begin(), args.end());
    if (env.empty())
        env = environment();
    m_startMs = nowMs();
    auto child = job::spawnChild(argv, env);
    if (!child) {
        m_err = child.error().message;
        m_exited = true;
        return false;
    }
    m_pid = child->pid;
    m_outFd = child->outFd;
    m_errFd = child->errFd;
    return true;
}

void Child::reap(bool block)
{
    if (m_pid <= 0 || m_exited)
        return;
    int status = 0;
    if (waitpid(m_pid, &status, block ? 0 : WNOHANG) == m_pid) {
        m_exited = true;
        m_endMs = nowMs();
        m_signaled = WIFSIGNALED(status);
        m_exitCode = job::exitCodeOf(status);
    }
}

bool Child::pump(int ms)
{
    pollfd fds[2];
    int n = 0;
    if (m_outFd >= 0)
        fds[n++] = {m_outFd, POLLIN, 0};
    if (m_errFd >= 0)
        fds[n++] = {m_errFd, POLLIN, 0};
    if (n > 0 && poll(fds, nfds_t(n), ms) > 0) {
        for (int i = 0; i < n; ++i) {
            if (fds[i].revents == 0)
                continue;
            int& fd = fds[i].fd == m_outFd ? m_outFd : m_errFd;
            std::string& into = fds[i].fd == m_outFd ? m_out : m_err;
            char buf[65536];
            for (;;) {
                const ssize_t r = read(fd, buf, sizeof buf);
                if (r > 0) {
                    into.append(buf, size_t(r));
                    continue;
                }
                if (r < 0 && errno == EINTR)
                    continue;
                if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                    break;
                close(fd);
                fd = -1;
                break;
            }
        }
    } else if (n == 0) {
        usleep(useconds_t(std::min(ms, 20)) * 1000);
    }
    reap(false);
    return !m_exited || m_outFd >= 0 || m_errFd >= 0;
}

bool Child::wait(int timeoutMs)
{
    const double deadline = nowMs() + timeoutMs;
    double exitedAt = 0;
    while (pump(50)) {
        if (m_exited) {
            // Pipes held open by something the child left behind: do not wait for them long.
            if (exitedAt == 0)
                exitedAt = nowMs();
            else if (nowMs() - exitedAt > 2000)
                break;
        }
        if (nowMs() > deadline) {
            kill(SIGKILL);
            reap(true);
            return false;
        }
    }
    return true;
}

void Child::kill(int sig)
{
    if (m_pid > 0 && !m_exited)
        job::signalChild(m_pid, sig);
}

double Child::elapsedMs() const { return (m_exited ? m_endMs : nowMs()) - m_startMs; }

std::string Outcome::describe() const
{
    const auto tail = [](const std::string& s) { return s.size() > 3000 ? "..." + s.substr(s.size() - 3000) : s; };
    std::ostringstream o;
    o << "exit " << exitCode << (signaled ? " (signal)" : "") << (finished ? "" : " (did not finish)") << " after "
      << ms << " ms\nstdout:\n"
      << tail(out) << "\nstderr:\n"
      << tail(err);
    return o.str();
}

Outcome run(const std::string& program, const std::vector<std::string>& args, int timeoutMs, std::vector<std::string> env)
{
    Outcome o;
    Child c;
    if (!c.start(program, args, std::move(env))) {
        o.err = c.err();
        return o;
    }
    o.finished = c.wait(timeoutMs);
    o.exitCode = c.exitCode();
    o.signaled = c.signaled();
    o.out = c.out();
    o.err = c.err();
    o.ms = c.elapsedMs();
    return o;
}

std::string cliPath()
{
    const char* cli = std::getenv("LOCKSTEP_CLI");
    return cli ? cli : "";
}

std::string workerPath() { return (fs::path(cliPath()).parent_path() / "lockstep-worker").string(); }

Outcome lockstep(const std::vector<std::string>& args, int timeoutMs, std::vector<std::string> env)
{
    return run(cliPath(), args, timeoutMs, std::move(env));
}

int freePort()
{
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

std::string readFile(const std::string& path)
{
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
        return {};
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void writeFile(const std::string& path, std::string_view bytes)
{
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), std::streamsize(bytes.size()));
}

bool exists(const std::string& path)
{
    std::error_code ec;
    return fs::exists(fs::symlink_status(path, ec));
}

std::vector<std::string> listDir(const std::string& path)
{
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
        out.push_back(it->path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

std::vector<pid_t> childrenWithEnv(pid_t parent, const std::string& entry)
{
    std::vector<pid_t> out;
    std::error_code ec;
    for (fs::directory_iterator it("/proc", ec), end; !ec && it != end; it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit))
            continue;
        const std::string stat = readFile("/proc/" + name + "/stat");
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        const size_t close = stat.rfind(')');
        if (close == std::string::npos)
            continue;
        std::istringstream rest(stat.substr(close + 2));
        std::string state;
        long ppid = 0;
        rest >> state >> ppid;
        if (ppid != parent)
            continue;
        const std::string env = readFile("/proc/" + name + "/environ");
        size_t pos = 0;
        while (pos < env.size()) {
            const size_t end = env.find('\0', pos);
            if (env.compare(pos, (end == std::string::npos ? env.size() : end) - pos, entry) == 0) {
                out.push_back(pid_t(std::stol(name)));
                break;
            }
            if (end == std::string::npos)
                break;
            pos = end + 1;
        }
    }
    return out;
}

} // namespace lockstep::test
