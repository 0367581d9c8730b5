"""`optimizer` commands as processes forked from one interpreter that has imported the package once.

A fresh `python -m optimizer run` spends about 2.5 s of CPU on imports (2 s of it the anthropic
SDK's types) before it does any work, and the kill, stop and resume tests start dozens of them.
A forked command is still a process of its own: its own pid, its own files, signals and exit
status, its own environment and working folder, and Python's normal exit (non-daemon threads
joined, atexit handlers run). The launcher itself only imports and forks: it never runs a
command, starts a thread or configures logging, so a child starts as a fresh interpreter would.

One launcher per test process, started on first use. Tests that check the entry point itself
(`python -m optimizer`, the installed script, a run's first start) keep a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

PACKET = 1 << 20


def serve(fd: int) -> None:
    """The launcher's loop: a request (args, cwd, env and the child's stdout and stderr as
    passed file descriptors) forks a child; every child's exit is reported back."""
    import optimizer.cli  # noqa: F401 - the imports every command pays for, done once here
    import optimizer.daemon  # noqa: F401
    import optimizer.search.probe  # noqa: F401

    sock = socket.socket(fileno=fd)
    while True:
        ready, _, _ = select.select([sock], [], [], 0.02)
        if ready:
            message, fds, _, _ = socket.recv_fds(sock, PACKET, 2)
            if not message:
                return  # the test process is gone
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:
                sock.close()
                _child(request, fds)
            for handle in fds:
                os.close(handle)
            sock.send(json.dumps({"started": request["id"], "pid": pid}).encode())
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock.send(
                json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode()
            )


def _child(request: dict[str, Any], fds: list[int]) -> None:
    """Becomes `optimizer ARGS` and exits with its status; never returns."""
    code: int = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for handle in (null, *fds):
            os.close(handle)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import random

        random.seed()  # a fresh interpreter's seed, not the launcher's state shared by every fork
        sys.argv = ["optimizer", *request["args"]]
        from optimizer.cli import app

        try:
            app(prog_name="optimizer")
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001 - as an interpreter would: the traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed stream at exit
                pass
        os._exit(code)


class Launcher:
    """The test side: starts commands and learns of their exits from the launcher."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {
            k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))
        }
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env=env,
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.sock = ours
        self.lock = threading.Lock()  # one request at a time: its reply is the next "started"
        self.changed = threading.Condition()
        self.started: dict[int, int] = {}
        self.exits: dict[int, int] = {}
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                packet = self.sock.recv(PACKET)
            except OSError:
                packet = b""
            with self.changed:
                if not packet:
                    self.started[-1] = -1  # the launcher is gone: wake every waiter
                    self.changed.notify_all()
                    return
                event = json.loads(packet)
                if "started" in event:
                    self.started[event["started"]] = event["pid"]
                else:
                    self.exits[event["exited"]] = event["code"]
                self.changed.notify_all()

    def alive(self) -> bool:
        return self.process.poll() is None and -1 not in self.started

    def start(
        self, args: list[str], *, cwd: Path, env: dict[str, str], stdout: IO[Any], stderr: IO[Any]
    ) -> Forked:
        with self.lock:
            self.next_id += 1
            request = {"id": self.next_id, "args": args, "cwd": str(cwd), "env": env}
            socket.send_fds(
                self.sock, [json.dumps(request).encode()], [stdout.fileno(), stderr.fileno()]
            )
            with self.changed:
                self.changed.wait_for(
                    lambda: self.next_id in self.started or -1 in self.started, timeout=60
                )
                pid = self.started.pop(self.next_id, None)
        if pid is None:
            raise RuntimeError("the test launcher did not start the command")
        return Forked(self, pid, args)


class Forked:
    """What the tests use of subprocess.Popen, for a command the launcher forked."""

    def __init__(self, launcher: Launcher, pid: int, args: list[str]) -> None:
        self.launcher, self.pid, self.args = launcher, pid, args
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            with self.launcher.changed:
                self.returncode = self.launcher.exits.get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        with self.launcher.changed:
            if not self.launcher.changed.wait_for(lambda: self.pid in self.launcher.exits, timeout):
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.returncode = self.launcher.exits[self.pid]
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never signal a pid that may have been reused
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


_launcher: Launcher | None = None
_guard = threading.Lock()


def launch(
    args: list[str], *, cwd: Path, env: dict[str, str], stdout: IO[Any], stderr: IO[Any]
) -> Forked:
    """`optimizer ARGS` as a process of its own, forked from this test process's launcher."""
    global _launcher
    with _guard:
        if _launcher is None or not _launcher.alive():
            _launcher = Launcher()
        launcher = _launcher
    return launcher.start(args, cwd=cwd, env=env, stdout=stdout, stderr=stderr)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
