// Helpers of the Qt-free test suites (db, runtime, launcher, job): temporary folders, starting
// real processes (the built `lockstep` CLI, lockstep-worker, torchrun) with a bounded wait,
// reading files. Processes start through the job library's spawnChild: in a process group of
// their own, killed with the test if it dies.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace lockstep::test {

// A fresh folder under $TMPDIR (or /tmp), removed with everything in it.
class TempDir {
public:
    TempDir();
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return m_path; }
    std::string file(std::string_view name) const { return m_path + "/" + std::string(name); }

private:
    std::string m_path;
};

// This process's environment with `set` ("KEY=VALUE") applied and the variables in `unset` removed.
std::vector<std::string> environment(const std::vector<std::string>& set = {}, const std::vector<std::string>& unset = {});

// A started process with its stdout and stderr collected.
class Child {
public:
    Child() = default;
    Child(Child&& other) noexcept;
    Child& operator=(Child&&) = delete;
    ~Child(); // kills it if it still runs

    // Starts `program` with `args`; env empty = this process's environment. false when it could
    // not start (the message is in err()).
    bool start(const std::string& program, const std::vector<std::string>& args, std::vector<std::string> env = {});
    pid_t pid() const { return m_pid; }
    // Reads what is there for up to `ms`; returns true while the process runs or its pipes are open.
    bool pump(int ms);
    // Pumps until the process has exited and its pipes are closed, or timeoutMs passed (then kills
    // it and returns false).
    bool wait(int timeoutMs);
    void kill(int sig);

    bool exited() const { return m_exited; }
    int exitCode() const { return m_exitCode; }   // exit status, 128 + signal when killed by one
    bool signaled() const { return m_signaled; }
    const std::string& out() const { return m_out; }
    const std::string& err() const { return m_err; }
    std::string all() const { return m_out + m_err; }
    double elapsedMs() const;

private:
    void reap(bool block);
    pid_t m_pid = -1;
    int m_outFd = -1, m_errFd = -1;
    bool m_exited = false, m_signaled = false;
    int m_exitCode = -1;
    std::string m_out, m_err;
    double m_startMs = 0, m_endMs = 0;
};

// Runs a program to its end (bounded by timeoutMs; a hang fails instead of stalling CTest).
struct Outcome {
    bool finished = false;
    int exitCode = -1;
    bool signaled = false;
    std::string out, err;
    double ms = 0;
    std::string describe() const; // for failure messages: status, time, the ends of stdout and stderr
};
Outcome run(const std::string& program, const std::vector<std::string>& args, int timeoutMs = 90'000,
            std::vector<std::string> env = {});

// The `lockstep` CLI under test ($LOCKSTEP_CLI, set by CTest) and the worker beside it.
std::string cliPath();
std::string workerPath();
Outcome lockstep(const std::vector<std::string>& args, int timeoutMs = 90'000, std::vector<std::string> env = {});

int freePort(); // a free TCP port on 127.0.0.1
std::string readFile(const std::string& path);
void writeFile(const std::string& path, std::string_view bytes);
bool exists(const std::string& path);
std::vector<std::string> listDir(const std::string& path); // names, hidden ones included, sorted
bool contains(std::string_view haystack, std::string_view needle);

// The processes whose parent is `parent` and whose environment holds `entry` ("RANK=1").
std::vector<pid_t> childrenWithEnv(pid_t parent, const std::string& entry);

} // namespace lockstep::test
