"""The build backend of `pip install .`, `pip wheel .` and `python -m build`: setuptools, with its
build/ folder and *.egg-info written to a fresh temporary folder instead of the source tree.

Why: setuptools keeps both next to the sources, so a plain install left build/ in the working
tree, and the next build read it again: a module deleted or moved since was still shipped from
build/lib. setuptools reads one extra configuration file named by DIST_EXTRA_CONFIG; each hook
below runs with one that points both folders into a temporary folder of its own."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every hook this module does not wrap

HOOKS = (
    "get_requires_for_build_wheel",
    "get_requires_for_build_sdist",
    "prepare_metadata_for_build_wheel",
    "build_wheel",
    "build_sdist",
    "get_requires_for_build_editable",
    "prepare_metadata_for_build_editable",
    "build_editable",
)


@contextmanager
def _outside() -> Iterator[None]:
    with tempfile.TemporaryDirectory(prefix="skill-optimizer-build-") as tmp:
        extra = Path(tmp) / "setup.cfg"
        extra.write_text(
            f"[build]\nbuild_base = {Path(tmp) / 'build'}\n\n[egg_info]\negg_base = {tmp}\n",
            encoding="utf-8",
        )
        before = os.environ.get("DIST_EXTRA_CONFIG")
        os.environ["DIST_EXTRA_CONFIG"] = str(extra)
        try:
            yield
        finally:
            if before is None:
                os.environ.pop("DIST_EXTRA_CONFIG", None)
            else:
                os.environ["DIST_EXTRA_CONFIG"] = before


def _wrapped(hook: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        with _outside():
            return hook(*args, **kwargs)

    run.__name__ = run.__qualname__ = hook.__name__
    return run


for _name in HOOKS:
    if hasattr(_setuptools, _name):  # the editable hooks exist from setuptools 64 on
        globals()[_name] = _wrapped(getattr(_setuptools, _name))
