"""Hosts as network namespaces, made by the harness itself (no root needed, no `ip netns`).

The harness runs inside `unshare -r -n -m` (a user namespace where it holds CAP_NET_ADMIN, with a
network namespace of its own: the "switch"). There it makes a bridge, and for each host a holder
process (`unshare -n -u`: its own network and UTS namespace, so its own addresses and host name)
joined to the bridge by a veth pair. A process runs "on" a host through `nsenter` into the
holder's namespaces; nsenter execs the command, so the pid we hold is the service's own.

Cutting a host's link sets its bridge-side veth down: the host's packets go nowhere and nothing is
told (no RST, no FIN), the way a failed switch port or cable looks to its peers.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field

SUBNET_PREFIX = "10.77.0"
SWITCH_ADDRESS = f"{SUBNET_PREFIX}.1"
BRIDGE = "br-mh"
TOOLS = ("unshare", "nsenter", "ip")


class NamespacesRefused(RuntimeError):
    """The kernel (or a missing tool) does not let us make user and network namespaces here."""


def probe_namespaces() -> None:
    """Raise `NamespacesRefused` with the reason when `unshare -r -n -m` cannot run here."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise NamespacesRefused(f"missing tool(s): {', '.join(missing)} (util-linux, iproute2)")
    done = subprocess.run(["unshare", "-r", "-n", "-m", "true"], capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise NamespacesRefused(f"the kernel refuses user+network namespaces (unshare -r -n -m: "
                                f"{done.stderr.strip() or f'exit {done.returncode}'})")


def ip(*args: str, holder_pid: int | None = None) -> None:
    """`ip ...` in the switch namespace, or (holder_pid) in a host's."""
    argv = ["ip", *args] if holder_pid is None else ["nsenter", "-t", str(holder_pid), "-n", "ip", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {done.stderr.strip()}")


def make_switch() -> None:
    """Loopback up and the bridge, with the switch's own address (the load client lives here)."""
    ip("link", "set", "lo", "up")
    ip("link", "add", BRIDGE, "type", "bridge")
    ip("addr", "add", f"{SWITCH_ADDRESS}/24", "dev", BRIDGE)
    ip("link", "set", BRIDGE, "up")


@dataclass
class Host:
    """One machine: a name (also its host name) and an address on the bridge."""

    name: str
    address: str
    holder: subprocess.Popen | None = field(default=None, init=False, repr=False)

    @property
    def veth(self) -> str:
        return f"v-{self.name}"[:15]  # interface names are at most 15 bytes

    @property
    def pid(self) -> int:
        if self.holder is None:
            raise RuntimeError(f"host {self.name} is not up")
        return self.holder.pid

    def up(self) -> Host:
        self.holder = subprocess.Popen(["unshare", "-n", "-u", "sh", "-c", f"hostname {self.name} && exec sleep infinity"],
                                       stdin=subprocess.DEVNULL)
        _wait_for_hostname(self.holder.pid, self.name)
        ip("link", "add", self.veth, "type", "veth", "peer", "name", "eth0", "netns", str(self.pid))
        ip("link", "set", self.veth, "master", BRIDGE)
        ip("link", "set", self.veth, "up")
        for args in (("link", "set", "lo", "up"), ("addr", "add", f"{self.address}/24", "dev", "eth0"),
                     ("link", "set", "eth0", "up")):
            ip(*args, holder_pid=self.pid)
        return self

    def argv(self, command: list[str]) -> list[str]:
        """`command` as run on this host (its network and host name)."""
        return ["nsenter", "-t", str(self.pid), "-n", "-u", "--", *command]

    def cut(self) -> None:
        ip("link", "set", self.veth, "down")

    def restore(self) -> None:
        ip("link", "set", self.veth, "up")

    def down(self) -> None:
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait(timeout=5)


def _wait_for_hostname(pid: int, name: str, timeout_s: float = 5.0) -> None:
    """The holder names its UTS namespace before it sleeps; wait until it has."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        done = subprocess.run(["nsenter", "-t", str(pid), "-u", "hostname"], capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == name:
            return
        time.sleep(0.02)
    raise RuntimeError(f"host {name}: its namespace holder (pid {pid}) did not come up")
