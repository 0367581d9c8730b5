"""What a total size limit on a run's workspace costs, for the three ways of enforcing one: the
watcher the sandbox uses (a walk of the folder per poll), a loop-mounted image per run, and a
size-capped tmpfs per command (the workspace copied in and out around each command). Also how far
past the limit a fast writer gets before the watcher stops it. Never a timed test; prints tables.

    python bench/workspace_limit.py [--limit-mb 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from optimizer import sandbox
from optimizer.sandbox.disk import MB, measure

WRITER = "i=0; while :; do head -c 10485760 /dev/zero > /workspace/f$i || exit 1; i=$((i+1)); done"


def _fill(folder: Path, files: int, size: int = 1024) -> None:
    per_dir = 1000
    for i in range(files):
        sub = folder / f"d{i // per_dir}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}").write_bytes(b"x" * size)


def walk_cost(root: Path) -> Table:
    table = Table(title="watcher: one walk of the workspace (median of 5)")
    for col in ("files", "walk ms", "polls/s at 10% of a core"):
        table.add_column(col, justify="right")
    for files in (10, 1_000, 10_000, 100_000):
        folder = root / f"walk-{files}"
        folder.mkdir()
        _fill(folder, files)
        times = []
        for _ in range(5):
            t = time.perf_counter()
            measure(folder)
            times.append(time.perf_counter() - t)
        ms = statistics.median(times) * 1000
        table.add_row(f"{files:,}", f"{ms:.2f}", f"{min(20.0, 100 / ms):.1f}")
        shutil.rmtree(folder)
    return table


def overshoot(root: Path, limit_mb: int) -> Table:
    table = Table(
        title=f"watcher: a writer of 10 MB files at full speed, limit {limit_mb} MB (5 runs each)"
    )
    for col in (
        "mode",
        "stopped by",
        "MB on disk when stopped (max)",
        "overshoot MB (max)",
        "seconds to stop (median)",
    ):
        table.add_column(col, justify="right")
    modes = (["bwrap"] if sandbox.bwrap_available() else []) + ["none"]
    for mode in modes:
        policy = sandbox.SandboxPolicy(mode=mode, timeout_s=60, max_workspace_mb=limit_mb)  # type: ignore[arg-type]
        sizes, secs, causes = [], [], set()
        for i in range(5):
            work = root / f"over-{mode}-{i}"
            work.mkdir()
            t = time.perf_counter()
            result = sandbox.run(WRITER, work_dir=work, skill_dir=None, policy=policy)
            secs.append(time.perf_counter() - t)
            causes.add(result.resource_limit or result.error or "nothing")
            sizes.append(measure(work).bytes / MB)
            shutil.rmtree(work)
        table.add_row(
            mode,
            ", ".join(sorted(causes)),
            f"{max(sizes):.0f}",
            f"{max(sizes) - limit_mb:.0f}",
            f"{statistics.median(secs):.2f}",
        )
    return table


def _timed(argv: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t


def loop_image(root: Path, limit_mb: int) -> list[str]:
    """A sparse image, mkfs, mount, umount: what a per-run loop device would cost."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        return ["loop image: needs root and mkfs.ext4; not measured"]
    image, mount = root / "ws.img", root / "mnt"
    mount.mkdir()
    try:
        steps = {
            "create": _timed(["truncate", "-s", f"{limit_mb}M", str(image)]),
            "mkfs.ext4": _timed(["mkfs.ext4", "-q", "-F", str(image)]),
            "mount": _timed(["mount", "-o", "loop", str(image), str(mount)]),
            "umount": _timed(["umount", str(mount)]),
        }
    except (subprocess.CalledProcessError, OSError) as exc:
        return [f"loop image: does not work here ({exc}); not measured"]
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=False)
    total = sum(steps.values())
    parts = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in steps.items())
    return [
        f"loop image per run: {total * 1000:.0f} ms ({parts}); root and a free loop device needed"
    ]


def tmpfs_copy(root: Path) -> Table:
    """A tmpfs lives as long as one bwrap, so each command would copy the workspace in and out."""
    table = Table(title="tmpfs per command: the workspace copied in and out, per command")
    for col in ("workspace", "copy in + out ms", "x 20 commands of a run, s"):
        table.add_column(col, justify="right")
    shm = Path("/dev/shm") if Path("/dev/shm").is_dir() else root
    for mb, files in ((1, 20), (10, 50), (100, 100)):
        src = root / f"copy-{mb}"
        src.mkdir()
        _fill(src, files, size=mb * MB // files)
        dest = Path(tempfile.mkdtemp(dir=shm))
        t = time.perf_counter()
        shutil.copytree(src, dest / "ws")
        shutil.rmtree(src)
        shutil.copytree(dest / "ws", src)
        spent = time.perf_counter() - t
        shutil.rmtree(dest)
        shutil.rmtree(src)
        table.add_row(f"{mb} MB in {files} files", f"{spent * 1000:.0f}", f"{spent * 20:.2f}")
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--limit-mb", type=int, default=100)
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as tmp:
        root = Path(tmp)
        console.print(walk_cost(root))
        console.print(overshoot(root, args.limit_mb))
        for line in loop_image(root, args.limit_mb):
            console.print(line)
        console.print(tmpfs_copy(root))
    console.print(
        "The watcher costs nothing per run and a walk per poll; its overshoot is what "
        "a writer adds between two polls (bounded per file by max_file_bytes)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
