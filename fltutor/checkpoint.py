"""Files a run can trust: atomic, durable writes, verified checkpoints, one writer per run folder.

A checkpoint of round r is a folder ``round-<r>/`` that holds one file per party:

- ``server.pt``: what the server holds (global models, server optimizer state);
- ``clients/<k>.pt``: client k's private state (factor selections, personal heads, control
  variates, ...), one file per client, so the server's file never holds any of it;
- ``log.pt``: the experimenter's histories.

The folder becomes the checkpoint only when ``checkpoint.json`` (written atomically last) names
it, with every file's SHA-256 and size and the run key. A kill at any moment leaves either the
previous checkpoint or the new one; files of an unfinished write are removed at the next start.
A truncated or altered file fails its checksum on load with ``CheckpointError``.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path

import torch

__all__ = ["CheckpointError", "atomic_write_json", "atomic_torch_save", "write_checkpoint", "read_checkpoint",
           "has_checkpoint", "remove_checkpoint", "clean_stray", "RunLock", "MANIFEST", "REUSED"]

MANIFEST = "checkpoint.json"
FORMAT = 2

# Work this process took over from earlier ones: runs resumed from a checkpoint (and how many of their rounds
# were already done) and finished table cells reloaded. A results JSON records it beside its wall time, which
# counts this process only (``fltutor.results.provenance``).
REUSED = {"resumed_runs": 0, "rounds_resumed": 0, "reloaded_cells": 0}


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be trusted: damaged, incomplete or made by another run."""


# ---- atomic, durable writes -----------------------------------------------------------------------
def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some platforms cannot open a folder
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _atomic_write_bytes(path: Path, blob: bytes) -> None:
    """Write to a temporary file in the same folder, fsync it, rename it over ``path``, fsync the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def _json_safe(obj):
    """Strict JSON: non-finite floats become None (a result that is not a number says so elsewhere)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) so that readers see the old file or the new one, never half of one."""
    _atomic_write_bytes(Path(path), text.encode())


def atomic_write_json(path, obj) -> None:
    """Write strict JSON so that readers see the old file or the new one, never half of one."""
    _atomic_write_bytes(Path(path), json.dumps(_json_safe(obj), indent=1, allow_nan=False).encode())


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def atomic_torch_save(path, obj) -> None:
    """``torch.save`` through a temporary file in the same folder, fsync'ed, then renamed."""
    _atomic_write_bytes(Path(path), _torch_bytes(obj))


# ---- checkpoints ----------------------------------------------------------------------------------------
def _fix(out_dir: Path) -> str:
    return (f"Delete {out_dir} to start this run over (or pass fresh=True; from the command line, "
            "python -m fltutor run ... --fresh).")


def has_checkpoint(out_dir) -> bool:
    """True if ``out_dir`` holds a committed checkpoint (or one of an older layout, which load refuses)."""
    out_dir = Path(out_dir)
    return (out_dir / MANIFEST).exists() or (out_dir / "server.pt").exists()


def write_checkpoint(out_dir, run_key: str, round_: int, server: dict, clients: list[dict], log: dict) -> Path:
    """Write round ``round_``'s files, then commit them by replacing ``checkpoint.json``; older rounds go."""
    out_dir = Path(out_dir)
    folder = out_dir / f"round-{round_:06d}"
    if folder.exists():          # an unfinished write of this round, killed before its commit
        shutil.rmtree(folder)
    (folder / "clients").mkdir(parents=True)
    named = {"server.pt": server, "log.pt": log}
    named.update({f"clients/{k:05d}.pt": c for k, c in enumerate(clients)})
    files = {}
    for name, obj in named.items():
        blob = _torch_bytes(obj)
        with open(folder / name, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        files[name] = {"sha256": hashlib.sha256(blob).hexdigest(), "bytes": len(blob)}
    _fsync_dir(folder / "clients")
    _fsync_dir(folder)
    atomic_write_json(out_dir / MANIFEST, {"format": FORMAT, "run_key": run_key, "round": round_,
                                           "folder": folder.name, "files": files,
                                           "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    clean_stray(out_dir)
    return folder


def read_checkpoint(out_dir, run_key: str | None = None, *, parties=("server", "clients", "log")) -> dict:
    """Verify and load a committed checkpoint: {"round", "server", "clients" (one per client), "log"}.

    ``run_key``: refuse a checkpoint made by another run. ``parties``: load only these (a server
    loads "server", client k would load only its own file). Raises ``CheckpointError`` naming the file.
    """
    out_dir = Path(out_dir)
    mpath = out_dir / MANIFEST
    if not mpath.exists():
        if (out_dir / "server.pt").exists():
            raise CheckpointError(f"{out_dir} holds a checkpoint of an older fltutor (server.pt without "
                                  f"{MANIFEST}); it cannot be verified. {_fix(out_dir)}")
        raise CheckpointError(f"{mpath} is missing: {out_dir} holds no checkpoint.")
    try:
        man = json.loads(mpath.read_text())
        folder, files, round_ = out_dir / man["folder"], man["files"], int(man["round"])
    except (ValueError, KeyError, TypeError) as err:
        raise CheckpointError(f"{mpath} is damaged ({type(err).__name__}: {err}). {_fix(out_dir)}") from None
    if run_key is not None and man.get("run_key") != run_key:
        raise CheckpointError(f"the checkpoint in {out_dir} was made by a different run (run key "
                              f"{man.get('run_key')}, this run's is {run_key}): its settings, model or data "
                              f"differ. Use another out_dir for this run, or: {_fix(out_dir)}")

    def load(name: str):
        path, want = folder / name, files[name]
        try:
            blob = path.read_bytes()
        except OSError as err:
            raise CheckpointError(f"checkpoint file {path} cannot be read ({err.strerror}). {_fix(out_dir)}") from None
        if len(blob) != want["bytes"] or hashlib.sha256(blob).hexdigest() != want["sha256"]:
            what = (f"{len(blob)} bytes instead of {want['bytes']} (truncated?)" if len(blob) != want["bytes"]
                    else "its SHA-256 differs from the one recorded in checkpoint.json (altered or corrupted)")
            raise CheckpointError(f"checkpoint file {path} is damaged: {what}. {_fix(out_dir)}")
        return torch.load(io.BytesIO(blob), weights_only=False, map_location="cpu")

    out = {"round": round_, "run_key": man.get("run_key")}
    if "server" in parties:
        out["server"] = load("server.pt")
    if "log" in parties:
        out["log"] = load("log.pt")
    if "clients" in parties:
        out["clients"] = [load(n) for n in sorted(n for n in files if n.startswith("clients/"))]
    return out


def clean_stray(out_dir) -> list[Path]:
    """Remove what a killed write left: temporary files and round folders that checkpoint.json does not name."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    keep = None
    try:
        keep = json.loads((out_dir / MANIFEST).read_text())["folder"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    gone = []
    for p in out_dir.iterdir():
        if p.name.endswith(".tmp") and p.is_file():
            p.unlink(missing_ok=True)
            gone.append(p)
        elif p.name.startswith("round-") and p.is_dir() and p.name != keep:
            shutil.rmtree(p, ignore_errors=True)
            gone.append(p)
    return gone


def remove_checkpoint(out_dir) -> None:
    """Delete out_dir's checkpoint (``fresh=True``): the manifest, its round folders and results files."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return
    for name in (MANIFEST, "server.pt", "clients.pt", "log.pt"):
        (out_dir / name).unlink(missing_ok=True)
    for p in list(out_dir.glob("results*.json")):
        p.unlink()
    clean_stray(out_dir)


# ---- one writer per run folder --------------------------------------------------------------------------------
class RunLock:
    """An exclusive lock on a run folder (``.lock``, held with ``fcntl.flock``; the OS drops it when the
    holder dies, so a killed run never leaves a stale lock). A second writer gets ``CheckpointError``
    naming the holder. Where ``fcntl`` does not exist (Windows) it does nothing."""

    def __init__(self, out_dir):
        self.path = Path(out_dir) / ".lock"
        self._fd = None

    def acquire(self) -> "RunLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 4096).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise CheckpointError(f"{self.path.parent} is in use by {holder}; two runs writing one folder would "
                                  "corrupt each other. Wait for it to finish, or give this run another out_dir.")
        os.ftruncate(fd, 0)
        os.write(fd, f"process {os.getpid()} on {socket.gethostname()} since "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S')}".encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            import fcntl
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
