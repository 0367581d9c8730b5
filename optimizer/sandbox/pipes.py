"""The pipes of one running command under one selector: output captured, stdin fed, status read.
It must never block on a pipe, nor keep more output than the cap (the rest is drained, dropped)."""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
from collections.abc import Iterator

_CHUNK = 65536


def _first_child_pid(status_text: bytes | bytearray) -> int | None:
    # Only the first document counts: bwrap writes it before the command exists, and the
    # status fd is not inherited by the command, so nothing inside can forge it.
    first, newline, _ = bytes(status_text).partition(b"\n")
    if not newline and not first.rstrip().endswith(b"}"):
        return None
    try:
        pid = json.loads(first).get("child-pid")
    except (ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and pid > 1 else None


def _read(fd: int, size: int) -> bytes | None:
    """What the pipe holds now (b"" at its end), or None when it has nothing yet."""
    try:
        return os.read(fd, size)
    except BlockingIOError:
        return None


class Pipes:
    """stdout and stderr (up to cap), stdin, bwrap's status fd, and the two wake-ups the
    supervisor acts on: "exit" (a pidfd, where the kernel has them) and "cancel"."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        *,
        stdin: str | None,
        cap: int,
        status_fd: int | None,
        cancel_fd: int | None,
    ) -> None:
        self.proc = proc
        self.cap = cap
        self.buffers = {"out": bytearray(), "err": bytearray()}
        self.truncated = False
        self.open_streams = {"out", "err"}
        self.pending_stdin = memoryview((stdin or "").encode("utf-8"))
        self.status_fd = status_fd
        self.status_text = bytearray()
        self.sandbox_init: int | None = None  # bwrap's pid 1, once its status says which
        self.pidfd: int | None = None
        self.sel = selectors.DefaultSelector()
        self._register(cancel_fd)

    def _register(self, cancel_fd: int | None) -> None:
        proc, sel = self.proc, self.sel
        assert proc.stdout is not None and proc.stderr is not None
        for tag, stream in (("out", proc.stdout), ("err", proc.stderr)):
            os.set_blocking(stream.fileno(), False)
            sel.register(stream.fileno(), selectors.EVENT_READ, tag)
        if proc.stdin is not None:
            if self.pending_stdin:
                os.set_blocking(proc.stdin.fileno(), False)
                sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "in")
            else:
                proc.stdin.close()
        if self.status_fd is not None:
            os.set_blocking(self.status_fd, False)
            sel.register(self.status_fd, selectors.EVENT_READ, "status")
        # Without a pidfd (old kernels) the supervisor polls for the exit instead.
        with contextlib.suppress(AttributeError, OSError):
            self.pidfd = os.pidfd_open(proc.pid)
            sel.register(self.pidfd, selectors.EVENT_READ, "exit")
        if cancel_fd is not None:
            sel.register(cancel_fd, selectors.EVENT_READ, "cancel")

    def ready(self, timeout: float) -> Iterator[str]:
        """Serve the pipes that are ready within timeout; yield "exit" and "cancel", in the
        order they came, for the supervisor."""
        for key, _ in self.sel.select(timeout):
            tag, fd = key.data, key.fd
            if tag in self.buffers:
                self._read_output(tag, fd)
            elif tag == "in":
                self._write_stdin(fd)
            elif tag == "status":
                self._read_status(fd)
            else:
                self.sel.unregister(fd)
                yield tag

    def _read_output(self, tag: str, fd: int) -> None:
        chunk = _read(fd, _CHUNK)
        if chunk is None:
            return
        if not chunk:
            self.sel.unregister(fd)
            self.open_streams.discard(tag)
            return
        room = self.cap - len(self.buffers[tag])
        if len(chunk) > room:
            self.truncated = True
        # Past the cap the pipe is still drained, so the command never blocks on it.
        if room > 0:
            self.buffers[tag] += chunk[:room]

    def _write_stdin(self, fd: int) -> None:
        try:
            written = os.write(fd, self.pending_stdin[:_CHUNK])
            self.pending_stdin = self.pending_stdin[written:]
        except BlockingIOError:
            return
        except OSError:
            self.pending_stdin = self.pending_stdin[:0]  # the command closed its stdin
        if not self.pending_stdin:
            self.sel.unregister(fd)
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def _read_status(self, fd: int) -> None:
        chunk = _read(fd, 4096)
        if chunk is None:
            return
        if not chunk:
            self.sel.unregister(fd)
            return
        self.status_text.extend(chunk)
        if self.sandbox_init is None:
            self.sandbox_init = _first_child_pid(self.status_text)

    @property
    def started_child(self) -> bool:
        """Whether bwrap got as far as starting the command (always true without a status fd)."""
        return self.status_fd is None or _first_child_pid(self.status_text) is not None

    def close(self) -> None:
        self.sel.close()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        for extra_fd in (self.pidfd, self.status_fd):
            if extra_fd is not None:
                with contextlib.suppress(OSError):
                    os.close(extra_fd)
