"""Processes and servers that tests start: on loopback, with their own files, stopped by their own ids.

A user runs this suite on a machine that already has Ray clusters, Ray state
in ``~/.ray`` and other copies of the suite running. So a test that starts a
process never relies on, or harms, anything it did not start:

* servers bind to 127.0.0.1 only, on ports the OS picks (or a free one,
  retried when another process takes it first);
* state goes to a temporary folder of the test's own (Ray's session and
  sockets, an auth token, a ``HOME`` with no ``~/.ray`` in it);
* what a test started is stopped by its process session, never by name
  (no ``ray stop``, no ``pkill``).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = ["LocalRayCluster", "free_port", "loopback_env", "session_processes", "stop_session"]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (another process may take it before use: retry on failure)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_interface() -> str:
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in names if n == "lo"), next((n for n in names if n.startswith("lo")), "lo"))


def loopback_env() -> dict[str, str]:
    """Environment that keeps torch.distributed (gloo) on the loopback interface.

    Without it gloo binds the address the host name resolves to, which on
    many machines is the network interface.
    """
    return {"GLOO_SOCKET_IFNAME": _loopback_interface(), "MASTER_ADDR": "127.0.0.1"}


def session_processes(sid: int) -> list[int]:
    """Live (not zombie) processes of session ``sid``: everything a ``start_new_session`` child started."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            if os.getsid(pid) != sid:
                continue
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if state != "Z":
            found.append(pid)
    return found


def stop_session(sid: int, *, grace: float = 3.0) -> None:
    """Stop every process of session ``sid`` (ours by construction): TERM, then KILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in session_processes(sid):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        end = time.monotonic() + grace
        while session_processes(sid) and time.monotonic() < end:
            time.sleep(0.1)
        if not session_processes(sid):
            return
    left = session_processes(sid)
    if left:
        raise RuntimeError(f"processes {left} of session {sid} survived SIGKILL")


class LocalRayCluster:
    """A one-node Ray cluster of the test's own: loopback, its own folder, token, ``HOME`` and session.

    ``env`` is what a driver needs to reach it (and only it): ``RAY_ADDRESS``
    with the exact address, the cluster's own auth token, and a ``HOME``
    without the user's ``~/.ray``. ``stop()`` ends exactly the processes the
    cluster's ``ray start --block`` started.
    """

    def __init__(self, base_env: Mapping[str, str], *, num_cpus: int = 1, attempts: int = 3) -> None:
        # Short path: Ray puts unix sockets under its temp dir (108-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="lcray-", dir="/tmp"))
        home = self.root / "home"
        home.mkdir()
        token = self.root / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        env = {k: v for k, v in base_env.items() if not k.startswith("RAY_")}
        env.update(
            HOME=str(home),
            # user site-packages are found through HOME: keep the user's
            PYTHONUSERBASE=env.get("PYTHONUSERBASE", site.getuserbase()),
            RAY_AUTH_MODE="token",
            RAY_AUTH_TOKEN_PATH=str(token),
            # makes Ray advertise and bind 127.0.0.1 instead of the host's network address
            RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
            RAY_USAGE_STATS_ENABLED="0",
        )
        self._ray = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
        if self._ray is None:
            raise RuntimeError("the ray command is missing: install the ray extra")
        self._proc: subprocess.Popen[str] | None = None
        last = ""
        for _ in range(attempts):
            port = free_port()
            self._proc = subprocess.Popen(
                [self._ray, "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
                 f"--temp-dir={self.root / 'ray'}", f"--num-cpus={num_cpus}", "--include-dashboard=false",
                 "--disable-usage-stats"],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
            self.address = f"127.0.0.1:{port}"
            self.env = {**env, "RAY_ADDRESS": self.address}
            if self._wait_up():
                return
            last = self._stop_process()
        self.stop()
        raise RuntimeError(f"could not start a local Ray cluster in {attempts} attempts:\n{last[-2000:]}")

    def _wait_up(self, timeout: float = 60.0) -> bool:
        assert self._proc is not None
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self._proc.poll() is not None:
                return False  # e.g. the port was taken meanwhile
            status = subprocess.run([self._ray, "status", f"--address={self.address}"], env=self.env,
                                    capture_output=True, text=True, timeout=60)
            if status.returncode == 0:
                return True
            time.sleep(0.5)
        return False

    def _stop_process(self) -> str:
        if self._proc is None:
            return ""
        stop_session(self._proc.pid)
        output = self._proc.communicate()[0] if self._proc.stdout else ""
        self._proc = None
        return output or ""

    @property
    def pids(self) -> list[int]:
        """The cluster's live processes (its session)."""
        return session_processes(self._proc.pid) if self._proc else []

    def stop(self) -> None:
        """Stop the cluster's processes, and only those, and remove its folder."""
        self._stop_process()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

