"""Make the optional extras (cloud SDKs, OR-Tools) unimportable in a subprocess: a base install.

``blocked_env(folder, env)`` writes a ``sitecustomize.py`` into ``folder`` and puts it first on
``PYTHONPATH``, so every Python process started with that environment (the CLI, and the worker
the embedded default spawns) finds none of ``BLOCKED``, as in a venv that installed only
``pip install skyhop``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BLOCKED", "blocked_env"]

BLOCKED = (
    "boto3",
    "botocore",
    "google.cloud",
    "google.api_core",
    "google.auth",
    "azure",
    "kubernetes",
    "ortools",
)
"""Top-level modules the extras bring (``google.protobuf`` stays: temporalio needs it)."""

_SITECUSTOMIZE = f'''
import sys

BLOCKED = {BLOCKED!r}


class _Blocker:
    """A meta-path finder that says every blocked module is not installed."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if any(name == b or name.startswith(b + ".") for b in BLOCKED):
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, _Blocker())
'''


def blocked_env(folder: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` for a process in which none of ``BLOCKED`` can be imported."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(_SITECUSTOMIZE)
    path = [str(folder), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": ":".join(path)}
