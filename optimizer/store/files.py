"""Atomic writes and the paths of a run's workspace, in one place (docs/design.md §5).
Never write a JSON artifact that its model has not validated; never leave a half-written file."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from pydantic import BaseModel

_UMASK = os.umask(0)
os.umask(_UMASK)


def write_text(path: Path, text: str, *, durable: bool = True) -> None:
    """Temp file in the same folder, fsync, rename: a reader sees the old file or the new one.
    `durable=False` skips the fsyncs, for files any command can write again (a report's pages)."""
    write_bytes(path, text.encode("utf-8"), durable=durable)


def write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~_UMASK)  # mkstemp makes 0600; a run's files are for reading
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno is not None:
            # A full disk or a read-only folder names the file being written, not its hidden
            # temp file (or nothing at all, as a failed write or fsync does).
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        raise
    if durable:
        _fsync_dir(path.parent)


def _fsync_dir(folder: Path) -> None:
    # The rename itself must survive a power cut, not only the file's bytes.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json(path: Path, data: BaseModel | Any, model: type[BaseModel] | None = None) -> None:
    """Validate with `model` (or the instance's own class) before writing; extras are kept."""
    if isinstance(data, BaseModel):
        data = type(data).model_validate(
            data.model_dump(mode="json", by_alias=True, exclude_none=False)
        )
        payload = data.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        payload = data
    if model is not None:
        model.model_validate(payload)
    write_text(path, json.dumps(payload, indent=2, ensure_ascii=False) + "\n")


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


CONFIGURATIONS = ("with_skill", "without_skill")


class Workspace:
    """Where every file of one optimizer run lives (docs/design.md §5)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def state_db(self) -> Path:
        return self.root / "state.db"

    @property
    def run_toml(self) -> Path:
        return self.root / "run.toml"

    @property
    def log(self) -> Path:
        return self.root / "optimizer.log"

    @property
    def history(self) -> Path:
        return self.root / "history.json"

    @property
    def feedback_aggregate(self) -> Path:
        return self.root / "eval_feedback_aggregate.json"

    @property
    def feedback(self) -> Path:
        return self.root / "feedback.json"

    @property
    def pidfile(self) -> Path:
        return self.root / "optimizer.pid"

    @property
    def stop_file(self) -> Path:
        return self.root / "STOP"

    @property
    def starting(self) -> Path:
        """The pid of a detached daemon between its spawn and its lock (store/lock.py)."""
        return self.root / "optimizer.starting"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    def version(self, label: str) -> Path:
        return self.root / label

    def skill(self, label: str) -> Path:
        return self.version(label) / "skill"

    def eval_dir(self, label: str, eval_id: int | str) -> Path:
        return self.version(label) / f"eval-{eval_id}"

    def trial_dir(self, label: str, eval_id: int | str, configuration: str, run: int) -> Path:
        return self.eval_dir(label, eval_id) / configuration / f"run-{run}"

    def baseline_trial_dir(self, eval_id: int | str, run: int) -> Path:
        return self.root / "baseline" / f"eval-{eval_id}" / "without_skill" / f"run-{run}"

    def comparison_dir(self, label: str) -> Path:
        return self.version(label) / "comparison"

    def test_dir(self) -> Path:
        return self.root / "test"

    def run_id(self, run_dir: Path) -> str:
        """feedback.json's id of a run: its path under the root with '/' replaced by '-'."""
        return str(Path(run_dir).relative_to(self.root)).replace(os.sep, "-")
