"""Simulated hosts for the peer benchmarks: one network namespace per rank, joined by a link.

Each "host" is a network namespace with loopback and one interface named
eth0 (the same name in every namespace, so GLOO_SOCKET_IFNAME and Open MPI's
btl_tcp_if_include take one value), address 10.99.0.<i+1>/24. Two hosts are
joined by a veth pair (a cable); more by one veth each to a Linux bridge in an
extra namespace (a switch). Every rank's traffic then crosses a real network
device and the kernel's full TCP/IP path (segmentation at the link's MTU,
GRO, ...), as between machines, instead of loopback's 64 KiB MTU shortcut.
The file system is shared, so file-based rendezvous (FileStore, file://, a
FileKeyValueStore directory) still works.

    with NetnsHosts(2, mtu=1500, rate="1gbit") as hosts:   # rate: tc's token bucket, optional
        cmd = hosts.exec(1, ["./allreduce_gloo", f"--host={hosts.addr(1)}", ...])
        mpirun = hosts.mpirun_prefix(tmp)  # mpirun on host 0, orted via `ip netns exec`

Needs root and iproute2's `ip netns`; NetnsUnavailable (with the command and
its error) otherwise. The namespaces (and with them the veths and the
bridge) are deleted on exit, after killing any process still inside them;
namespaces left by a run that was killed outright (SIGKILL) are named after
its pid and removed by the next run. Not thread-safe: one instance per run.
"""
import os
import re
import shutil
import signal
import subprocess

PREFIX = "strata-bench-"
IFNAME = "eth0"
SUBNET = "10.99.0."


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here: not root, no `ip`, or a command failed."""


def _ip(*args):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise NetnsUnavailable(f"`ip {' '.join(args)}` exited with {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def check():
    """None when namespaces can be made here, else why not."""
    if os.geteuid() != 0:
        return f"network namespaces need root (this runs as uid {os.geteuid()})"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"`ip netns list` exited with {r.returncode}: {r.stderr.strip()}"
    return None


def remove_stale():
    """Deletes the namespaces of earlier runs whose process is gone (killed before cleaning up)."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in re.findall(rf"^({re.escape(PREFIX)}(\d+)-\S+)", out, re.M):
        try:
            os.kill(int(name[1]), 0)
            continue  # its run is still going
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _kill_inside(name[0])
        subprocess.run(["ip", "netns", "del", name[0]], capture_output=True)


def _kill_inside(ns):
    """Kills the processes still in namespace ns (this run's ranks, by their ids)."""
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    for pid in out.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


class NetnsHosts:
    """n namespaces ("hosts") on one link of the given MTU; a context manager."""

    def __init__(self, n, mtu=1500, congestion=None, rate=None):
        if n < 2:
            raise ValueError(f"NetnsHosts: need at least 2 hosts, got {n}")
        self.n, self.mtu, self.ifname = n, mtu, IFNAME
        # Each host's default TCP congestion control (None: the kernel's).
        self.congestion = congestion
        # Each host's sending rate ("1gbit", "100mbit": tc's token bucket on
        # its eth0, as a link of that speed); None: the veth's own.
        self.rate = rate
        tag = f"{os.getpid()}-{mtu}-{n}"
        self.names = [f"{PREFIX}{tag}-h{i}" for i in range(n)]
        self.switch = f"{PREFIX}{tag}-sw" if n > 2 else None
        self._made = []

    def addr(self, i):
        return f"{SUBNET}{i + 1}"

    def exec(self, i, cmd):
        """cmd run on host i."""
        return ["ip", "netns", "exec", self.names[i]] + list(cmd)

    def __enter__(self):
        why = check()
        if why:
            raise NetnsUnavailable(why)
        remove_stale()
        try:
            self._create()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def _create(self):
        for ns in self.names + ([self.switch] if self.switch else []):
            _ip("netns", "add", ns)
            self._made.append(ns)
        # Temporary veth names are unique on the machine (15 characters at
        # most); inside its namespace each host's end is renamed to eth0.
        tag = f"{os.getpid() % 100000}"
        if self.switch is None:
            a, b = f"sbv{tag}a", f"sbv{tag}b"
            _ip("link", "add", a, "netns", self.names[0], "mtu", str(self.mtu), "type", "veth",
                "peer", "name", b, "netns", self.names[1], "mtu", str(self.mtu))
            ends = [a, b]
        else:
            _ip("-n", self.switch, "link", "add", "br0", "mtu", str(self.mtu), "type", "bridge")
            ends = []
            for i, ns in enumerate(self.names):
                a = f"sbv{tag}h{i}"
                _ip("link", "add", a, "netns", ns, "mtu", str(self.mtu), "type", "veth",
                    "peer", "name", f"p{i}", "netns", self.switch, "mtu", str(self.mtu))
                _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0")
                _ip("-n", self.switch, "link", "set", f"p{i}", "up")
                ends.append(a)
            _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, ns in enumerate(self.names):
            _ip("-n", ns, "link", "set", ends[i], "name", IFNAME)
            _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", IFNAME)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", IFNAME, "up")
            if self.rate:
                # A 256 KiB bucket (2 ms at 1 Gbit/s) and 50 ms of queue.
                r = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", IFNAME,
                                    "root", "tbf", "rate", self.rate, "burst", "256kb",
                                    "latency", "50ms"], capture_output=True, text=True)
                if r.returncode != 0:
                    raise NetnsUnavailable(f"tc rate {self.rate} in {ns}: {r.stderr.strip()}")
            if self.congestion:
                r = subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                                    f"net.ipv4.tcp_congestion_control={self.congestion}"],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise NetnsUnavailable(f"congestion control {self.congestion} in {ns}: "
                                           f"{r.stderr.strip()}")

    def close(self):
        """Kills what still runs inside and deletes the namespaces; safe to call twice."""
        errors = []
        for ns in reversed(self._made):
            _kill_inside(ns)
            r = subprocess.run(["ip", "netns", "del", ns], capture_output=True, text=True)
            if r.returncode != 0:
                errors.append(f"{ns}: {r.stderr.strip()}")
        self._made = []
        if errors:
            raise RuntimeError("cannot remove network namespaces: " + "; ".join(errors))

    def mpirun_prefix(self, tmp, ranks_per_host=1):
        """mpirun's command and options to run one rank per host, started on host 0.

        Open MPI starts a daemon (orted) on each other host through its rsh
        agent, here a script that runs it with `ip netns exec` in place of
        ssh; the daemons call back over the link (oob_tcp_if_include), and
        each rank talks to its own host's daemon (PMIx) over that host's
        loopback, exactly as between machines. Ranks are placed as mpirun
        places them on one host: with up to as many ranks as cores, rank i
        bound to core i; with more, not bound (its socket binding spans every
        core here) and yielding while they poll, as mpirun makes oversubscribed
        ranks yield (each daemon sees one rank on a machine of its own, so it
        would neither bind apart nor yield by itself)."""
        agent = os.path.join(tmp, "netns_rsh")
        cases = "".join(f"  {self.addr(i)}) ns={ns};;\n" for i, ns in enumerate(self.names))
        with open(agent, "w") as f:
            f.write("#!/bin/sh\n# Open MPI's rsh agent for namespace hosts: ssh HOST CMD -> ip netns exec.\n"
                    'host=$1; shift\ncase "$host" in\n' + cases
                    + '  *) echo "netns_rsh: unknown host $host" >&2; exit 1;;\nesac\n'
                    'exec ip netns exec "$ns" /bin/sh -c "$*"\n')
        os.chmod(agent, 0o755)
        cmd = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
        cmd += ["-np", str(self.n), "--host", ",".join(f"{self.addr(i)}:1" for i in range(self.n)),
                "--mca", "plm_rsh_agent", agent, "--mca", "oob_tcp_if_include", IFNAME]
        cores = os.cpu_count() or 1
        if self.n <= cores:
            rankfile = os.path.join(tmp, "rankfile")
            with open(rankfile, "w") as f:
                f.writelines(f"rank {i}={self.addr(i)} slot={i}\n" for i in range(self.n))
            cmd += ["--rankfile", rankfile]
        else:
            cmd += ["--bind-to", "none", "--mca", "mpi_yield_when_idle", "1"]
        return self.exec(0, cmd)
