"""Values crossing from a submission's process to the grader: plain JSON and .npy, never pickle.

The writer runs inside the (untrusted) submission process; the reader runs in the grader and
trusts nothing it reads: sizes are capped, NumPy files are loaded with ``allow_pickle=False``,
and only exact built-in types are accepted (a ``float`` subclass or an object whose ``__eq__``
always answers True is recorded as unsupported, never as a value).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

MAX_JSON_BYTES = 1 << 20
MAX_NPY_BYTES = 64 << 20
PLAIN_SCALARS = (bool, int, float, str, type(None))


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able built-ins, or raise TypeError (exact types only, no subclasses)."""
    if depth > 4:
        raise TypeError("nested too deeply")
    if type(value) in PLAIN_SCALARS:
        if type(value) is float and not math.isfinite(value):
            return {"__float__": repr(value)}
        return value
    if type(value) in (list, tuple) and len(value) <= 10_000:
        return [_plain(v, depth + 1) for v in value]
    raise TypeError(type(value).__name__)


def dump(value: Any, folder: Path, stem: str) -> None:
    """Record ``value`` as ``stem.json`` (and ``stem.npy`` for arrays). Runs in the submission."""
    import torch  # the submission's process has torch; the grader's reader does not need it here

    meta: dict[str, Any]
    if isinstance(value, torch.Tensor):
        plain = torch.Tensor.as_subclass(value, torch.Tensor).detach()
        meta = {"type": "tensor", "dtype": str(plain.dtype), "device": plain.device.type,
                "shape": list(plain.shape)}
        if plain.dtype == torch.bfloat16:
            plain = plain.float()
        np.save(folder / f"{stem}.npy", plain.cpu().numpy(), allow_pickle=False)
    elif type(value) is np.ndarray and value.dtype != object:
        meta = {"type": "ndarray", "dtype": str(value.dtype), "shape": list(value.shape)}
        np.save(folder / f"{stem}.npy", value, allow_pickle=False)
    else:
        try:
            meta = {"type": "plain", "value": _plain(value)}
        except TypeError as exc:
            meta = {"type": "unsupported", "type_name": str(exc)[:80]}
    (folder / f"{stem}.json").write_text(json.dumps({"status": "value", **meta}))


def dump_status(folder: Path, stem: str, status: str, detail: str = "") -> None:
    (folder / f"{stem}.json").write_text(json.dumps({"status": status, "detail": detail[:300]}))


TORCH_DTYPES = {
    "torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16",
    "torch.bfloat16": "bfloat16", "torch.int64": "int64", "torch.int32": "int32", "torch.int16": "int16",
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
    "torch.complex64": "complex64", "torch.complex128": "complex128",
}


def load(folder: Path, stem: str) -> dict[str, Any]:
    """Read one record. Returns a dict with ``status`` and, for values, ``value`` (torch/plain).

    Anything missing, oversized or malformed becomes ``{"status": "missing"|"invalid", ...}``.
    """
    import torch

    meta_path = folder / f"{stem}.json"
    if not meta_path.is_file():
        return {"status": "missing"}
    if meta_path.stat().st_size > MAX_JSON_BYTES:
        return {"status": "invalid", "detail": "record too large"}
    try:
        meta = json.loads(meta_path.read_text())
    except (ValueError, UnicodeDecodeError):
        return {"status": "invalid", "detail": "record is not JSON"}
    if not isinstance(meta, dict) or meta.get("status") not in ("value", "raised", "not attempted"):
        return {"status": "invalid", "detail": "record has no valid status"}
    if meta["status"] != "value":
        return {"status": meta["status"], "detail": str(meta.get("detail", ""))[:300]}
    kind = meta.get("type")
    if kind == "plain":
        return {"status": "value", "value": _unplain(meta.get("value"))}
    if kind == "unsupported":
        return {"status": "value", "value": Unsupported(str(meta.get("type_name", "?"))[:80])}
    if kind in ("tensor", "ndarray"):
        npy = folder / f"{stem}.npy"
        if not npy.is_file() or npy.stat().st_size > MAX_NPY_BYTES:
            return {"status": "invalid", "detail": "array data missing or too large"}
        try:
            array = np.load(npy, allow_pickle=False)
        except Exception:
            return {"status": "invalid", "detail": "array data unreadable"}
        if kind == "ndarray":
            return {"status": "value", "value": array}
        dtype_name = TORCH_DTYPES.get(str(meta.get("dtype")))
        if dtype_name is None or list(array.shape) != list(meta.get("shape", [])):
            return {"status": "invalid", "detail": "tensor metadata inconsistent"}
        tensor = torch.from_numpy(np.ascontiguousarray(array)).to(getattr(torch, dtype_name))
        return {"status": "value", "value": tensor, "device": str(meta.get("device", "cpu"))}
    return {"status": "invalid", "detail": "unknown record type"}


def _unplain(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"__float__"}:
        return float(value["__float__"])
    if isinstance(value, list):
        return [_unplain(v) for v in value]
    return value


class Unsupported:
    """Stands for a value the submission returned that is not plain data."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<an object of type {self.type_name}>"


class Recorder:
    """``__probe__`` in the submission's namespace: records the value of each probe as plain data."""

    def __init__(self, got_dir: Path, expected_dir: Path) -> None:
        self.got_dir, self.expected_dir = got_dir, expected_dir

    def _record(self, folder: Path, index: int, compute) -> None:
        stem = f"probe_{int(index)}"
        try:
            value = compute()
        except NotImplementedError:
            dump_status(folder, stem, "not attempted")
            return
        except Exception as exc:
            dump_status(folder, stem, "raised", type(exc).__name__)
            return
        try:
            dump(value, folder, stem)
        except Exception as exc:
            dump_status(folder, stem, "raised", f"unrecordable result ({type(exc).__name__})")

    def __call__(self, index: int, compute) -> None:
        self._record(self.got_dir, index, compute)

    def expected(self, index: int, compute) -> None:
        self._record(self.expected_dir, index, compute)
