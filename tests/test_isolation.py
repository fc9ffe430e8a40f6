"""The suite runs beside anything else on the machine, and stops only what it started.

Users of Ray-based trainers run this suite on machines with Ray state in
``~/.ray`` and Ray jobs of their own. Here a user's cluster runs (started as
a user starts one: token auth from ``~/.ray/auth_token``, the host's network
address, ``RAY_ADDRESS`` exported), and two copies of the suite's Ray,
torchrun and gloo tests run at the same time beside it: both pass, and the
user's cluster is still up afterwards.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from isolation import free_port, session_processes, stop_session

ROOT = Path(__file__).resolve().parent.parent

PROCESS_TESTS = [
    "tests/test_debug_runs.py::test_a_ray_actor_on_a_cluster_started_before_the_driver",
    "tests/test_debug_runs.py::test_every_torchrun_rank_checks_and_reports",
    "tests/test_distributed.py",
]
"""The tests that start servers and process groups: what two copies of the suite would run at once."""


def _ray() -> str:
    ray = shutil.which("ray", path=os.path.dirname(sys.executable)) or shutil.which("ray")
    assert ray is not None, "the ray command is missing: install the ray extra"
    return ray


def _cluster_up(ray: str, address: str, env: dict[str, str]) -> bool:
    return subprocess.run([ray, "status", f"--address={address}"], env=env, capture_output=True,
                          timeout=60).returncode == 0


def test_two_copies_of_the_process_tests_pass_beside_a_users_ray_cluster_and_leave_it_running(tmp_path):
    pytest.importorskip("ray")
    ray = _ray()
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    user_env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "LAYOUTCHECK"))}
    user_env["HOME"] = str(home)
    user_temp = Path(tempfile.mkdtemp(prefix="lcuser-", dir="/tmp"))  # not /tmp/ray: never touch a real one
    start = subprocess.run(
        [ray, "start", "--head", f"--port={free_port()}", "--num-cpus=1", "--include-dashboard=false",
         "--disable-usage-stats", f"--temp-dir={user_temp}"],
        env=user_env, capture_output=True, text=True, timeout=120, start_new_session=True)
    session = None
    try:
        assert start.returncode == 0, start.stdout + start.stderr
        session = _leader_session(start)
        address = re.search(r"--address='([^']+)'", start.stdout + start.stderr).group(1)
        # exported, as a user of that cluster has them (its token auth is on: ~/.ray/auth_token exists)
        user_env.update(RAY_ADDRESS=address, RAY_AUTH_MODE="token")
        assert _cluster_up(ray, address, user_env)
        core = _core_processes(session)  # its idle workers come and go; these stay while it lives
        assert len(core) == 2, core

        copies = [
            subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              f"--basetemp={tmp_path / f'copy{i}'}", *PROCESS_TESTS],
                             cwd=ROOT, env=user_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for i in range(2)
        ]
        outputs = [c.communicate(timeout=900)[0] for c in copies]
        for copy, output in zip(copies, outputs):
            assert copy.returncode == 0, output[-4000:]

        assert _core_processes(session) == core, "a test stopped a process of the user's cluster"
        assert _cluster_up(ray, address, user_env), "the user's cluster is no longer reachable"
    finally:
        if session is not None:
            stop_session(session)
        shutil.rmtree(user_temp, ignore_errors=True)


def _core_processes(session: int) -> dict[int, str]:
    """The GCS server and raylet of a cluster's session, by pid."""
    found = {}
    for pid in session_processes(session):
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if name in ("gcs_server", "raylet"):
            found[pid] = name
    return found


def _leader_session(start: subprocess.CompletedProcess[str]) -> int:
    """The session of the cluster a `start_new_session` run of ``ray start`` left behind.

    ``ray start`` (without ``--block``) exits once its processes run; they keep
    its session id, which is its pid: found here through the GCS server.
    """
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if b"gcs_server" in cmd and start.args[-1].split("=", 1)[1].encode() in cmd:
            return os.getsid(int(entry))
    raise AssertionError("the user's cluster has no GCS server process")


def _stops_by_name(tree: ast.AST) -> list[int]:
    """Lines that run ``ray stop`` (as an argument list or a shell string), ``pkill`` or ``killall``."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and ast.get_docstring(node)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.List, ast.Tuple)):
            words = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if "stop" in words and any(isinstance(e, ast.Name) or e.value == "ray" for e in node.elts
                                       if not (isinstance(e, ast.Constant) and e.value == "stop")):
                lines.append(node.lineno)
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
              and re.search(r"\bray stop\b|\bpkill\b|\bkillall\b", node.value)):
            lines.append(node.lineno)
    return lines


def test_no_test_stops_processes_by_name():
    # `ray stop` (and pkill/killall) stop every matching process on the machine, a user's included.
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "tests").glob("*.py")) if path.name != Path(__file__).name  # its example below
        for line in _stops_by_name(ast.parse(path.read_text()))
    ]
    assert offenders == []
    # the check itself sees the call the Ray test used to make
    assert _stops_by_name(ast.parse('run([ray, "stop", "--force"], tmp)\nos.system("ray stop")')) == [1, 2]
