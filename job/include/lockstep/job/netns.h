// Emulated hosts on one machine for `lockstep run --hosts N`: N network namespaces joined by
// veth pairs to a bridge in a namespace of its own, each host with its own address and (in the
// workers, see process.h SpawnPlace) its own host name, the links between hosts shaped with tc.
//
// The network (docs/design.md "Emulated hosts"):
//
//     host0 ns                bridge ns                 host1 ns
//     lo, eth0 10.77.0.1 ──── h0 ┐                ┌ h1 ──── eth0 10.77.0.2, lo
//                                └──── br0 ───────┘
//
//   - Every link is a veth pair: eth0 in the host's namespace, h<i> on the bridge. Rate shaping
//     (--net-gbps) is an htb class on both ends' egress (eth0: what the host sends, h<i>: what it
//     receives), so each host has a full-duplex NIC of that speed; delay, jitter and loss
//     (--net-delay-us, --net-jitter-us, --net-loss-pct) are a netem qdisc under the host's own
//     htb class: a one-way delay per direction (a round trip between two hosts takes twice it).
//   - Ranks on one host talk over its loopback (the host's own address is local): not shaped.
//   - The namespaces are anonymous: held only by file descriptors of the launcher (and by the
//     workers inside them), never mounted under /run/netns. When the launcher exits, however it
//     exits (return, a signal, SIGKILL, a crash), and its workers with it (PR_SET_PDEATHSIG), the
//     kernel destroys the namespaces and with them every veth, bridge and qdisc: nothing can be
//     left behind, so there is nothing for a later run to clean up. The bridge namespace has no
//     link to the machine's own network, so the private subnet cannot clash with it and two runs
//     (each with its own bridge namespace) coexist.
//   - `ip` and `tc` (iproute2) are started with argv lists built from numbers and fixed names
//     only, inside the namespace they configure (setns in the child); no shell.
#pragma once

#include "lockstep/core/result.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace lockstep::job {

// How the links between hosts are shaped; 0 = not shaped in that respect.
struct NetShape {
    double gbps = 0;     // rate of every host's link, each direction, in Gbit/s (htb)
    double delayUs = 0;  // one-way delay added to what a host sends, in microseconds (netem)
    double jitterUs = 0; // +- this much of the delay, uniformly (netem; needs delayUs)
    double lossPct = 0;  // packets a host sends that are dropped, in percent (netem)
    bool needsNetem() const { return delayUs > 0 || jitterUs > 0 || lossPct > 0; }
};

inline constexpr int kMaxHosts = 64;
// The interface every emulated host reaches the others by (what GLOO_SOCKET_IFNAME names).
inline constexpr const char* kHostInterface = "eth0";

// Everything that must hold before any namespace exists: hosts in 1..kMaxHosts, the shape's
// values (jitter only with a delay, no larger than it), CAP_NET_ADMIN and CAP_SYS_ADMIN in this
// process's effective set (creating network namespaces needs both), and `ip` and `tc` installed.
// Errors are usage errors (the CLI exits 2) and say what to do.
core::Status checkHostNetwork(int hosts, const NetShape& shape);

class HostNetwork {
public:
    // Creates the namespaces, the bridge, the links and their shaping. An Error means nothing is
    // left (the namespaces are closed again); its message carries ip's or tc's own words (a
    // kernel without netem: "Specified qdisc kind is unknown").
    static core::Result<std::unique_ptr<HostNetwork>> create(int hosts, const NetShape& shape);
    ~HostNetwork(); // closes the namespaces: the kernel tears everything down
    HostNetwork(const HostNetwork&) = delete;
    HostNetwork& operator=(const HostNetwork&) = delete;

    int hosts() const { return int(m_hostNs.size()); }
    std::string address(int host) const;  // "10.77.0.1" for host 0
    std::string hostname(int host) const; // "host0"
    int netnsFd(int host) const { return m_hostNs[size_t(host)]; }
    // The namespaces' identities (inode numbers of nsfs, as in /proc/<pid>/ns/net: "net:[N]"):
    // hosts first, the bridge's last. For checks that nothing outlives the run.
    std::vector<uint64_t> namespaceInodes() const;
    // One line for the launcher's message: "2 hosts (10.77.0.1-10.77.0.2), 1 Gbit/s links".
    std::string describe() const;

private:
    HostNetwork() = default;
    std::vector<int> m_hostNs;
    int m_bridgeNs = -1;
    NetShape m_shape;
};

// Runs an iproute2 tool (`ip` or `tc`, found in the usual sbin folders) with `args` inside the
// network namespace `netnsFd` (-1: this process's), with `passFd` (-1: none) open in the child
// as descriptor 3 (so an argument can name it as /proc/self/fd/3). Returns its stderr on failure.
core::Status runNetTool(const std::string& tool, const std::vector<std::string>& args, int netnsFd = -1,
                        int passFd = -1);

} // namespace lockstep::job
