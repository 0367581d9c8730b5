"""The simulator on a loopback HTTP port, for real clients such as the Claude Code CLI.
Never binds anything but the host it is given (loopback by default) and never adds behaviour of its own."""

from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from optimizer.sim.transport import Simulator


def _handler_for(sim: Simulator) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # a busy CLI run would flood the terminal; the stats say what happened

        def do_GET(self) -> None:
            self._serve()

        def do_HEAD(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            sim.enter()
            try:
                if sim.service.latency_ms > 0:
                    time.sleep(sim.service.latency_ms / 1000)
                reply = sim.handle(self.command, self.path, dict(self.headers.items()), raw)
            finally:
                sim.leave()
            if reply.drop:
                # A timeout or a cut body: waiting past the client's own timeout would stall a
                # run for minutes, so the connection just closes without an answer.
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            if reply.events is None:
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(reply.body)
                return
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for event in reply.events:
                self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    return Handler


def serve(
    sim: Simulator, host: str = "127.0.0.1", port: int = 0
) -> tuple[ThreadingHTTPServer, int]:
    """Start serving in a daemon thread; returns the server (call `shutdown()`) and its port."""
    server = ThreadingHTTPServer((host, port), _handler_for(sim))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="sim-server", daemon=True).start()
    return server, server.server_address[1]


def run_server(sim: Simulator, port: int = 0, host: str = "127.0.0.1") -> None:
    """Serve in the foreground until interrupted (the `optimizer sim-server` command)."""
    server = ThreadingHTTPServer((host, port), _handler_for(sim))
    server.daemon_threads = True
    print(
        f"simulated Messages API on http://{host}:{server.server_address[1]} (a simulation)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
