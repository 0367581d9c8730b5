"""Order independence and free resumes through real processes: `optimizer sim-server` with real
latency, a logging proxy in front of it that counts every request, and `optimizer run` with the
anthropic provider pointed at the proxy.

1. Two uninterrupted runs with the same seed: the multiset of requests and the lineage must match.
2. A third run killed with SIGKILL at a seeded moment, then resumed: the same lineage, and no
   request the resume sends is one the killed process had completed (its answer in the
   ledger): nothing completed is paid twice. Calls in flight at the kill are asked again; the
   table counts them.

    .venv/bin/python bench/twins.py [--latency-ms 150] [--iterations 2] [--seed 11]

Prints a table and exits 1 if a property fails.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from optimizer.model import canonical_json, request_hash  # noqa: E402 - the bench runs from a checkout

EXAMPLE = ROOT / "examples" / "csv-report"
VOLATILE = {"created_at", "started_at", "decided_at"}


class Proxy(ThreadingHTTPServer):
    """Forwards to the sim-server and records (role, sample, body hash, status) of each request."""

    daemon_threads = True

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.log: list[tuple[str, str, str, int]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _ProxyHandler)

    def handle_error(self, request, client_address) -> None:
        pass  # a client killed mid-request drops its connection: expected here

    def take(self) -> list[tuple[str, str, str, int]]:
        with self.lock:
            out, self.log = self.log, []
        return out


class _ProxyHandler(BaseHTTPRequestHandler):
    server: Proxy
    protocol_version = "HTTP/1.1"

    def log_message(self, *_args: object) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        conn = http.client.HTTPConnection("127.0.0.1", self.server.upstream_port, timeout=600)
        headers = {
            k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")
        }
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            reply = conn.getresponse()
            data = reply.read()
        except OSError:
            self.close_connection = True
            return
        finally:
            conn.close()
        delivered = True
        try:
            self.send_response(reply.status)
            for name, value in reply.getheaders():
                if name.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(name, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except OSError:  # the client died before it got the answer: it never completed
            delivered = False
            self.close_connection = True
        if self.command == "POST" and self.path.startswith("/v1/messages"):
            parsed = json.loads(body or b"{}")
            parsed.pop("stream", None)
            role = self.headers.get("x-optimizer-role", "")
            sample = self.headers.get("x-optimizer-sample", "")
            digest = ledger_hash(parsed, role, sample)
            with self.server.lock:
                self.server.log.append((role, sample, digest, reply.status if delivered else -1))


def ledger_hash(body: dict, role: str, sample: str) -> str:
    """The key the product's ledger gives this request: the request before the client added its
    cache breakpoints (llm.with_cache_control marks the last tool and the last system block, past the model's minimum)."""
    for part in ("tools", "system"):
        blocks = body.get(part)
        if isinstance(blocks, list) and blocks and isinstance(blocks[-1], dict):
            blocks[-1] = {k: v for k, v in blocks[-1].items() if k != "cache_control"}
    return request_hash(canonical_json(body), role, int(sample or 0))


def ledger_ok(run_dir: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{run_dir / 'state.db'}?mode=ro", uri=True)
    try:
        return {h for (h,) in conn.execute("select hash from calls where outcome = 'ok'")}
    finally:
        conn.close()


def start_sim(seed: int, latency_ms: float) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "optimizer",
            "sim-server",
            "--port",
            "0",
            "--set",
            f"sim.seed={seed}",
            "--set",
            f"sim.latency_ms={latency_ms}",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    line = proc.stdout.readline()  # "simulated Messages API on http://127.0.0.1:PORT (...)"
    port = int(line.split("http://127.0.0.1:", 1)[1].split()[0])
    return proc, port


def command(run_dir: Path, proxy_port: int, iterations: int, seed: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "optimizer",
        "run",
        str(EXAMPLE),
        "--provider",
        "anthropic",
        "--set",
        f"llm.base_url=http://127.0.0.1:{proxy_port}",
        "--set",
        f"loop.seed={seed}",
        "--max-iterations",
        str(iterations),
        "--run-dir",
        str(run_dir),
    ]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPTIMIZER_", "ANTHROPIC_"))}
    env["ANTHROPIC_API_KEY"] = "sim-key"  # the simulator takes any key
    return env


def lineage(run_dir: Path) -> dict:
    def strip(value):
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(json.loads((run_dir / "history.json").read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--latency-ms", type=float, default=150)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--kill-seed", type=int, default=1)
    args = parser.parse_args()
    sim, sim_port = start_sim(args.seed, args.latency_ms)
    proxy = Proxy(sim_port)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    port, env = proxy.server_address[1], environment()
    rows: list[tuple[str, str]] = []
    failed = False
    try:
        with tempfile.TemporaryDirectory(prefix="twins-") as tmp:
            runs, seen, seconds = {}, {}, {}
            for name in ("a", "b"):
                runs[name] = Path(tmp) / name
                t0 = time.monotonic()
                subprocess.run(
                    command(runs[name], port, args.iterations, args.seed),
                    env=env,
                    check=True,
                    capture_output=True,
                    cwd=ROOT,
                )
                seconds[name] = time.monotonic() - t0
                seen[name] = proxy.take()
            asked = {n: Counter((r, s, h) for r, s, h, _ in seen[n]) for n in seen}
            same_requests = asked["a"] == asked["b"]
            same_lineage = lineage(runs["a"]) == lineage(runs["b"])
            rows += [
                ("requests, twin a / twin b", f"{len(seen['a'])} / {len(seen['b'])}"),
                ("seconds, twin a / twin b", f"{seconds['a']:.0f} / {seconds['b']:.0f}"),
                ("same request multiset", str(same_requests)),
                ("same lineage (history.json)", str(same_lineage)),
            ]
            failed |= not (same_requests and same_lineage)

            killed = Path(tmp) / "killed"
            delay = random.Random(args.kill_seed).uniform(0.3, 0.8) * seconds["a"]
            proc = subprocess.Popen(
                command(killed, port, args.iterations, args.seed),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=ROOT,
            )
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            time.sleep(3 * args.latency_ms / 1000)  # the proxy logs calls in flight once answered
            before, completed = proxy.take(), ledger_ok(killed)
            matched = sum(1 for *_, h, _ in before if h in completed)
            subprocess.run(
                [sys.executable, "-m", "optimizer", "resume", str(killed)],
                env=env,
                check=True,
                capture_output=True,
                cwd=ROOT,
            )
            after = proxy.take()
            repaid = [h for _, _, h, _ in after if h in completed]
            in_flight = {h for _, _, h, _ in before if h not in completed} & {
                h for *_, h, _ in after
            }
            same_after_kill = lineage(killed) == lineage(runs["a"])
            rows += [
                (
                    f"SIGKILL at {delay:.1f} s: requests before / after resume",
                    f"{len(before)} / {len(after)}",
                ),
                ("  completed before the kill (ledger)", str(len(completed))),
                ("  requests before the kill found in the ledger", f"{matched} of {len(before)}"),
                ("  in flight at the kill, asked again", str(len(in_flight))),
                ("completed calls paid again after resume", str(len(repaid))),
                ("same lineage after kill + resume", str(same_after_kill)),
            ]
            failed |= bool(repaid) or not same_after_kill
    finally:
        proxy.shutdown()
        sim.terminate()
        sim.wait()
    width = max(len(k) for k, _ in rows)
    print(
        f"twins through sim-server (seed {args.seed}, latency {args.latency_ms:g} ms, "
        f"{args.iterations} iterations)"
    )
    for key, value in rows:
        print(f"  {key.ljust(width)}  {value}")
    print("FAILED" if failed else "OK")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
