"""A cluster of N hosts on this machine: one Linux network namespace per host, joined by veth links
to a bridge in a "switch" namespace, each host with its own address, host name (UTS namespace),
/etc/hosts and an sshd that accepts a key made for the run. The file system is shared, as a
cluster's shared run directory is.

    from netns_cluster import Cluster
    with Cluster(4, "/tmp/work") as c:        # c.hosts = ["fc1a2bh0", ...], c.hostfile
        c.shape(rate_bit=1e9)                  # every link 1 Gbit/s each way (tc tbf)
        p = c.popen(0, ["fluxtrain", "launch", "--hosts", c.hostfile, ...])   # runs on host 0
        c.kill_host(2)                         # link down, every process of host 2 killed
        c.restore_host(2)                      # sshd again, link up

Everything it makes (namespaces, /etc/netns/<host>/, cgroups, sshd processes) carries the
prefix fc<creator pid in hex>; teardown removes all of it and always runs: on leaving the `with`
block, at interpreter exit, on SIGTERM/SIGINT, and — if this process is killed outright (ctest's
timeout) — from a detached reaper that waits for the creator to die. Leftovers of creators that
are gone are removed at the next start.

As a command (the bench scripts use it):
    netns_cluster.py up N WORKDIR      # prints the state file; the cluster lives until `down`
    netns_cluster.py down WORKDIR
    netns_cluster.py skip-reason       # empty when namespaces can be made here

Nothing leaves the namespaces: the bridge has no address in the root namespace, the addresses
(10.88.0.0/24) exist only inside. Parallel runs use separate bridges, so they do not collide.
"""
import atexit
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

SUBNET = "10.88.0"
CMD_TIMEOUT = 30
NETNS_ETC = "/etc/netns"
CPU_CGROUP = "/sys/fs/cgroup/cpu"
PREFIX_RE = re.compile(r"^fc([0-9a-f]+)(h\d+|sw)$")


def sh(args, check=True, timeout=CMD_TIMEOUT, **kw):
    """Runs a command (list), bounded in time; raises with its output when it fails."""
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed ({p.returncode}): {p.stdout.strip()}")
    return p.stdout


def skip_reason():
    """Why a cluster cannot be made on this machine ('' when it can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "tc", "nsenter", "unshare", "ssh", "ssh-keygen", "mpirun"):
        if not shutil.which(tool):
            return f"{tool} is not installed (scripts/install-deps.sh)"
    if not os.path.exists("/usr/sbin/sshd"):
        return "/usr/sbin/sshd is not installed (openssh-server; scripts/install-deps.sh)"
    probe = f"fc{os.getpid():x}sw"
    p = subprocess.run(["ip", "netns", "add", probe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return f"cannot create a network namespace: {p.stdout.strip()}"
    subprocess.run(["ip", "netns", "del", probe], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return ""


def pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def netns_pids(ns):
    p = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                       timeout=CMD_TIMEOUT)
    return [int(x) for x in p.stdout.split()]


def remove_everything(tag, namespaces=None):
    """Removes every namespace, /etc/netns entry and cgroup named fc<tag>...: kills the processes
    inside first (sshd, launchers, ranks), then deletes (which also removes veths and bridge)."""
    if namespaces is None:
        namespaces = [n for n in list_netns() if PREFIX_RE.match(n) and PREFIX_RE.match(n).group(1) == tag]
    for ns in namespaces:
        for pid in netns_pids(ns):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for ns in namespaces:
        subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=CMD_TIMEOUT)
    if os.path.isdir(NETNS_ETC):
        for d in os.listdir(NETNS_ETC):
            m = PREFIX_RE.match(d)
            if m and m.group(1) == tag:
                shutil.rmtree(os.path.join(NETNS_ETC, d), ignore_errors=True)
        try:
            os.rmdir(NETNS_ETC)  # only when empty: other users of /etc/netns keep theirs
        except OSError:
            pass
    if os.path.isdir(CPU_CGROUP):
        for d in os.listdir(CPU_CGROUP):
            m = PREFIX_RE.match(d)
            if m and m.group(1) == tag:
                path = os.path.join(CPU_CGROUP, d)
                for _ in range(50):
                    try:
                        os.rmdir(path)
                        break
                    except OSError:  # processes still leaving
                        time.sleep(0.1)


def list_netns():
    out = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=CMD_TIMEOUT).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def remove_stale():
    """Leftovers of earlier runs whose creator is gone (a crash before the reaper could act)."""
    tags = set()
    for n in list_netns():
        m = PREFIX_RE.match(n)
        if m and not pid_alive(int(m.group(1), 16)):
            tags.add(m.group(1))
    for t in tags:
        remove_everything(t)


class Cluster:
    def __init__(self, n, workdir, owner_pid=None, aliases=0):
        if n < 1 or n > 200:
            raise ValueError(f"hosts: {n}, expected 1..200")
        self.n = n
        self.owner = owner_pid or os.getpid()
        self.tag = f"{self.owner:x}"
        self.dir = os.path.abspath(os.path.join(workdir, f"cluster-{self.tag}"))
        self.hosts = [f"fc{self.tag}h{i}" for i in range(n)]
        self.switch = f"fc{self.tag}sw"
        self.addr = [f"{SUBNET}.{10 + i}" for i in range(n)]
        self.hostfile = os.path.join(self.dir, "hosts.txt")
        self.sshd_pid = [None] * n
        self.shaping = None
        # Extra names of each host (<host>a0, <host>a1, ...): a host file listing several of them
        # starts that many ranks on one host, each through its own ssh session as on separate
        # hosts (the kernel's scheduler then treats them alike: autogroups are per session).
        self.aliases = [[f"{h}a{k}" for k in range(aliases)] for h in self.hosts]
        self._up = False

    # ---------------------------------------------------------------- lifetime

    def __enter__(self):
        self.up()
        return self

    def __exit__(self, *exc):
        self.down()

    def up(self, slots=1):
        remove_stale()
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self._up = True
        atexit.register(self.down)
        for sig in (signal.SIGTERM, signal.SIGINT):
            prev = signal.getsignal(sig)

            def handler(s, f, prev=prev):
                self.down()
                if callable(prev):
                    prev(s, f)
                raise SystemExit(128 + s)

            signal.signal(sig, handler)
        self._start_reaper()
        self._keys()
        sh(["ip", "netns", "add", self.switch])
        sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory
        for i, h in enumerate(self.hosts):
            sh(["ip", "netns", "add", h])
            sh(["ip", "-n", h, "link", "set", "lo", "up"])
            # eth0 inside the host, p<i> on the switch: created directly in their namespaces.
            sh(["ip", "link", "add", "eth0", "netns", h, "type", "veth", "peer", "name", f"p{i}", "netns",
                self.switch])
            sh(["ip", "-n", self.switch, "link", "set", f"p{i}", "master", "br0"])
            sh(["ip", "-n", self.switch, "link", "set", f"p{i}", "up"])
            sh(["ip", "-n", h, "addr", "add", f"{self.addr[i]}/24", "dev", "eth0"])
            sh(["ip", "-n", h, "link", "set", "eth0", "up"])
            self._etc(i)
            self._start_sshd(i)
        with open(self.hostfile, "w") as f:
            for h in self.hosts:
                f.write(f"{h} slots={slots}\n")
        self._save_state()
        self.wait_ssh()
        return self

    def down(self):
        if not self._up:
            return
        self._up = False
        remove_everything(self.tag, [self.switch] + self.hosts)
        try:
            os.unlink(os.path.join(self.dir, "state.json"))
        except OSError:
            pass

    def _start_reaper(self):
        """A detached process that tears the cluster down once the creator is gone, however it
        ended (SIGKILL from a test timeout included)."""
        code = (f"import os,sys,time\nsys.path.insert(0,{os.path.dirname(os.path.abspath(__file__))!r})\n"
                f"import netns_cluster as nc\n"
                f"while nc.pid_alive({self.owner}): time.sleep(0.5)\n"
                f"nc.remove_everything({self.tag!r})\n")
        subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)

    def _save_state(self):
        state = {"owner": self.owner, "tag": self.tag, "hosts": self.hosts, "addresses": self.addr,
                 "switch": self.switch, "hostfile": self.hostfile, "sshd_pids": self.sshd_pid, "dir": self.dir}
        with open(os.path.join(self.dir, "state.json"), "w") as f:
            json.dump(state, f, indent=1)

    # ---------------------------------------------------------------- hosts

    def _keys(self):
        d = self.dir
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"fluxtrain-cluster-{self.tag}", "-f",
            f"{d}/id_ed25519"])
        sh(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"host-{self.tag}", "-f", f"{d}/host_ed25519"])
        shutil.copy(f"{d}/id_ed25519.pub", f"{d}/authorized_keys")
        with open(f"{d}/host_ed25519.pub") as f:
            host_pub = " ".join(f.read().split()[:2])
        with open(f"{d}/known_hosts", "w") as f:
            for h, a, more in zip(self.hosts, self.addr, self.aliases):
                f.write(f"{','.join([h] + more + [a])} {host_pub}\n")

    def _etc(self, i):
        """/etc/netns/<host>/{hosts,ssh/} — `ip netns exec` bind-mounts them over /etc for the host's
        processes: names of the cluster's hosts, and an ssh client that uses the run's key."""
        h, d = self.hosts[i], self.dir
        etc = os.path.join(NETNS_ETC, h)
        os.makedirs(os.path.join(etc, "ssh"), exist_ok=True)
        with open(os.path.join(etc, "hosts"), "w") as f:
            f.write("127.0.0.1 localhost\n::1 localhost\n")
            for name, a, more in zip(self.hosts, self.addr, self.aliases):
                f.write(f"{a} {' '.join([name] + more)}\n")
        with open(os.path.join(etc, "ssh", "ssh_config"), "w") as f:
            f.write(f"Host *\n  IdentityFile {d}/id_ed25519\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {d}/known_hosts\n  StrictHostKeyChecking yes\n  BatchMode yes\n"
                    f"  ConnectTimeout 5\n  ServerAliveInterval 2\n  ServerAliveCountMax 3\n  LogLevel ERROR\n")
        with open(os.path.join(d, f"sshd-{i}.conf"), "w") as f:
            f.write(f"ListenAddress {self.addr[i]}\nHostKey {d}/host_ed25519\nPidFile {d}/sshd-{i}.pid\n"
                    f"AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\n"
                    f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                    f"PrintMotd no\nMaxStartups 200\nMaxSessions 200\nClientAliveInterval 2\n"
                    f"ClientAliveCountMax 3\n")

    def _start_sshd(self, i):
        h, d = self.hosts[i], self.dir
        pidfile = f"{d}/sshd-{i}.pid"
        try:
            os.unlink(pidfile)
        except OSError:
            pass
        # Its own UTS namespace: the host's processes see their own host name.
        log = open(f"{d}/sshd-{i}.log", "a")
        subprocess.Popen(["ip", "netns", "exec", h, "unshare", "--uts", "sh", "-c",
                          f"hostname {h} && exec /usr/sbin/sshd -D -f {d}/sshd-{i}.conf"],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        t0 = time.time()
        while time.time() - t0 < 10:
            try:
                with open(pidfile) as f:
                    self.sshd_pid[i] = int(f.read().strip())
                return
            except (OSError, ValueError):
                time.sleep(0.05)
        raise RuntimeError(f"sshd of {h} did not start; see {d}/sshd-{i}.log")

    def wait_ssh(self, hosts=None, timeout=20):
        """Until host 0 reaches every host over ssh."""
        for i in hosts if hosts is not None else range(self.n):
            t0 = time.time()
            while True:
                p = subprocess.run(self.wrap(0, ["ssh", self.hosts[i], "hostname"]), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True, timeout=30)
                if p.returncode == 0 and p.stdout.strip() == self.hosts[i]:
                    break
                if time.time() - t0 > timeout:
                    raise RuntimeError(f"ssh {self.hosts[i]} from {self.hosts[0]} fails: {p.stdout.strip()}")
                time.sleep(0.2)

    # ---------------------------------------------------------------- running things on a host

    def wrap(self, i, argv):
        """argv run on host i: its network, host name and /etc (the namespaces of its sshd)."""
        return ["nsenter", "-t", str(self.sshd_pid[i]), "-n", "-u", "-m", "--"] + list(argv)

    def popen(self, i, argv, **kw):
        return subprocess.Popen(self.wrap(i, argv), **kw)

    def run(self, i, argv, timeout=CMD_TIMEOUT, check=True):
        return sh(self.wrap(i, argv), check=check, timeout=timeout)

    def pids(self, i):
        return netns_pids(self.hosts[i])

    def processes(self, i):
        """(pid, command line) of every process on host i."""
        out = []
        for pid in self.pids(i):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    out.append((pid, f.read().replace(b"\0", b" ").decode(errors="replace").strip()))
            except OSError:
                pass
        return out

    # ---------------------------------------------------------------- faults

    def link(self, i, up):
        state = "up" if up else "down"
        sh(["ip", "-n", self.switch, "link", "set", f"p{i}", state])

    def kill_host(self, i):
        """The host is lost: its link goes down first (no FIN or RST reaches its peers), then every
        process on it (sshd, orted, ranks) is killed."""
        self.link(i, False)
        for pid in self.pids(i):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        t0 = time.time()
        while self.pids(i) and time.time() - t0 < 10:
            time.sleep(0.05)
        self.sshd_pid[i] = None

    def restore_host(self, i):
        """The host returns: sshd starts again, the link comes up."""
        self._start_sshd(i)
        self.link(i, True)
        self._save_state()
        self.wait_ssh([i])

    def cpu_limit(self, i, cpus):
        """Caps host i at `cpus` CPUs (cgroup v1 cpu quota); its current and future processes
        (children of its sshd) are in the group."""
        path = os.path.join(CPU_CGROUP, self.hosts[i])
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
            f.write("100000")
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write(str(int(cpus * 100000)))
        for pid in self.pids(i):
            try:
                with open(os.path.join(path, "cgroup.procs"), "w") as f:
                    f.write(str(pid))
            except OSError:
                pass

    def cpu_unlimit(self, i):
        """Lifts host i's CPU cap (the group stays, without a quota)."""
        path = os.path.join(CPU_CGROUP, self.hosts[i])
        if os.path.isdir(path):
            with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
                f.write("-1")

    def leftovers(self):
        """Namespaces, /etc/netns entries and cgroups of this cluster still there (after down())."""
        out = [n for n in list_netns() if PREFIX_RE.match(n) and PREFIX_RE.match(n).group(1) == self.tag]
        for root in (NETNS_ETC, CPU_CGROUP):
            if os.path.isdir(root):
                out += [os.path.join(root, d) for d in os.listdir(root)
                        if PREFIX_RE.match(d) and PREFIX_RE.match(d).group(1) == self.tag]
        return out

    # ---------------------------------------------------------------- links

    def shape(self, rate_bit, hosts=None):
        """Every (or the given) host's link limited to rate_bit bit/s in each direction: a token
        bucket on the host's eth0 (its uplink) and on the switch port (its downlink). The bucket
        holds 1 ms of traffic (at least 64 KiB), the queue 100 ms, so TCP sees a rate, not loss."""
        burst = max(64 * 1024, int(rate_bit / 8 * 1e-3))
        for i in hosts if hosts is not None else range(self.n):
            for ns, dev in ((self.hosts[i], "eth0"), (self.switch, f"p{i}")):
                sh(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", dev, "root", "tbf", "rate",
                    f"{int(rate_bit)}bit", "burst", str(burst), "latency", "100ms"])
        self.shaping = rate_bit

    def unshape(self, hosts=None):
        for i in hosts if hosts is not None else range(self.n):
            for ns, dev in ((self.hosts[i], "eth0"), (self.switch, f"p{i}")):
                subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=CMD_TIMEOUT)
        self.shaping = None

    def can_delay(self):
        """Whether this kernel has netem (tc delay); without it a link's latency is what it is."""
        p = subprocess.run(["ip", "netns", "exec", self.switch, "tc", "qdisc", "add", "dev", "br0", "root", "netem",
                            "delay", "1us"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if p.returncode == 0:
            sh(["ip", "netns", "exec", self.switch, "tc", "qdisc", "del", "dev", "br0", "root"])
        return p.returncode == 0

    def counters(self, i):
        """(rx, tx) bytes of host i's eth0."""
        out = []
        for k in ("rx_bytes", "tx_bytes"):
            out.append(int(self.run(i, ["cat", f"/sys/class/net/eth0/statistics/{k}"]).strip()))
        return tuple(out)

    def latency_s(self, a=0, b=1, rounds=2000):
        """One-way latency between hosts a and b: half the median round trip of a 1-byte TCP ping-pong
        (TCP_NODELAY) — what a small MPI message also pays on this link."""
        port = 20000 + (self.owner % 20000)
        server = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                  f"s.bind(('{self.addr[b]}',{port}));s.listen(1);c,_=s.accept()\n"
                  "c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\n"
                  "while True:\n d=c.recv(1)\n if not d: break\n c.sendall(d)\n")
        client = ("import socket,time,statistics\n"
                  f"for _ in range(100):\n try:\n  c=socket.create_connection(('{self.addr[b]}',{port}));break\n"
                  " except OSError: time.sleep(0.05)\n"
                  "c.setsockopt(socket.IPPROTO_TCP,socket.TCP_NODELAY,1)\nts=[]\n"
                  f"for _ in range({rounds}):\n t=time.perf_counter();c.sendall(b'x');c.recv(1);"
                  "ts.append(time.perf_counter()-t)\nprint(statistics.median(ts)/2)\n")
        srv = self.popen(b, [sys.executable, "-c", server], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            return float(self.run(a, [sys.executable, "-c", client], timeout=60).strip())
        finally:
            srv.kill()
            srv.wait()


    def ring_throughput_bit(self, seconds=3.0, port=None):
        """Bit/s each host sends when every host streams to the next at once over TCP (host i to
        i+1, as a ring all-reduce does): what the links and the hosts' network stacks (sharing this
        machine's CPUs) really carry; the median over the hosts."""
        port = port or 21000 + (self.owner % 20000)
        server = ("import socket,sys\ns=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
                  "s.bind((sys.argv[1],int(sys.argv[2])));s.listen(1);c,_=s.accept()\nb=bytearray(1<<22)\n"
                  "while c.recv_into(b): pass\n")
        client = ("import socket,sys,time\nfor _ in range(200):\n try:\n"
                  "  c=socket.create_connection((sys.argv[1],int(sys.argv[2])));break\n"
                  " except OSError: time.sleep(0.05)\n"
                  "b=bytes(1<<22);n=0;t0=time.time();T=float(sys.argv[3])\n"
                  "while time.time()-t0<T: c.sendall(b);n+=len(b)\nprint(8*n/(time.time()-t0))\n")
        servers = [self.popen(i, [sys.executable, "-c", server, self.addr[i], str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(self.n)]
        clients = [self.popen(i, [sys.executable, "-c", client, self.addr[(i + 1) % self.n], str(port), str(seconds)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for i in range(self.n)]
        rates = []
        for p in clients:
            out, _ = p.communicate(timeout=seconds + 60)
            rates.append(float(out.strip()))
        for p in servers:
            p.kill()
            p.wait()
        rates.sort()
        return rates[len(rates) // 2]


def main(argv):
    if len(argv) >= 1 and argv[0] == "skip-reason":
        print(skip_reason())
        return 0
    if len(argv) == 3 and argv[0] == "up":
        # The cluster belongs to our parent (the calling shell): it lives until `down` or until
        # that shell is gone.
        c = Cluster(int(argv[1]), argv[2], owner_pid=os.getppid())
        c.up()
        c._up = False  # do not tear down when this command exits
        print(os.path.join(c.dir, "state.json"))
        return 0
    if len(argv) == 2 and argv[0] == "down":
        for d in os.listdir(argv[1]):
            st = os.path.join(argv[1], d, "state.json")
            if d.startswith("cluster-") and os.path.exists(st):
                with open(st) as f:
                    remove_everything(json.load(f)["tag"])
                os.unlink(st)
        return 0
    print(__doc__.split("As a command")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
