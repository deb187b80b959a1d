"""Values crossing from a submission's process to the grader: plain JSON and .npy, never pickle.

The writer runs inside the (untrusted) submission process; the reader runs in the grader and
trusts nothing it reads: files are opened with coursetools.grading.safeio (no links, no FIFOs, size
caps), NumPy data is loaded with ``allow_pickle=False`` and only numeric or boolean dtypes, JSON is
checked for depth, size and shape, and anything malformed fails that one probe with a reason. Values
are recorded as built-in types only: a subclass of ``str``, ``int`` or ``float`` as the built-in value
it holds (read with the built-in type's own methods, so its ``__eq__`` or ``__float__`` changes nothing),
NumPy scalars (``np.float32(4)``, ``np.longdouble``, ``np.str_('c')``) and ``fractions.Fraction`` as the
number or string they stand for, as the learner's self-check accepts them; an object whose ``__eq__``
always answers True is recorded as unsupported, never as a value.
"""

from __future__ import annotations

import builtins
import fractions
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from coursetools.grading import safeio

MAX_JSON_BYTES = 1 << 20
MAX_NPY_BYTES = 64 << 20
MAX_DEPTH = 6
MAX_ITEMS = 100_000
PLAIN_SCALARS = (bool, int, float, str, type(None))
# Exact NumPy scalar types and what they become (other NumPy numbers: see _scalar).
NUMPY_SCALARS = {
    np.bool_: bool, np.int8: int, np.int16: int, np.int32: int, np.int64: int, np.uint8: int,
    np.uint16: int, np.uint32: int, np.uint64: int, np.float16: float, np.float32: float,
    np.float64: float, np.str_: str,
}
ARRAY_KINDS = "biufc"  # bool, signed, unsigned, float, complex: never strings, objects or records


def _scalar(value: Any) -> Any:
    """A plain built-in for an accepted scalar type, else raise TypeError.

    What the learner's self-check accepts is accepted here, as the built-in value it holds: every NumPy
    number type (``np.longdouble``, ``np.longlong`` too), ``Fraction``, and subclasses of ``str``, ``int`` and
    ``float``, read through the built-in type's own methods (``str.__str__``, ``float.__float__``), so that
    a subclass's ``__eq__``, ``lower`` or ``__float__`` changes nothing."""
    kind = type(value)
    if kind in PLAIN_SCALARS:
        return value
    if kind in NUMPY_SCALARS:
        return NUMPY_SCALARS[kind](value.item() if kind is not np.str_ else str.__str__(value))
    if kind.__module__ == "numpy" and issubclass(kind, (np.integer, np.floating, np.bool_)):
        return bool(value) if issubclass(kind, np.bool_) else int(value) if issubclass(kind, np.integer) \
            else float(value)
    if kind is fractions.Fraction:
        return float(value)
    if isinstance(value, bool):
        return bool.__bool__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    raise TypeError(kind.__name__)


def _plain(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able built-ins, or raise TypeError (exact types only, no subclasses)."""
    if depth > MAX_DEPTH - 2:
        raise TypeError("nested too deeply")
    if type(value) in (list, tuple) and len(value) <= 10_000:
        return [_plain(v, depth + 1) for v in value]
    plain = _scalar(value)
    if type(plain) is float and not math.isfinite(plain):
        return {"__float__": repr(plain)}
    return plain


def dump(value: Any, folder: Path, stem: str) -> None:
    """Record ``value`` as ``stem.json`` (and ``stem.npy`` for arrays). Runs in the submission."""
    import torch  # the submission's process has torch already

    meta: dict[str, Any]
    if isinstance(value, torch.Tensor):
        plain = torch.Tensor.as_subclass(value, torch.Tensor).detach()
        meta = {"type": "tensor", "dtype": str(plain.dtype), "device": plain.device.type,
                "shape": list(plain.shape)}
        if plain.dtype == torch.bfloat16:
            plain = plain.float()
        np.save(folder / f"{stem}.npy", plain.cpu().resolve_conj().resolve_neg().numpy(), allow_pickle=False)
    elif type(value) is np.ndarray and value.dtype.kind in ARRAY_KINDS:
        meta = {"type": "ndarray", "dtype": str(value.dtype), "shape": list(value.shape)}
        np.save(folder / f"{stem}.npy", value, allow_pickle=False)
    else:
        try:
            meta = {"type": "plain", "value": _plain(value)}
        except TypeError as exc:
            meta = {"type": "unsupported", "type_name": str(exc)[:80]}
    (folder / f"{stem}.json").write_text(json.dumps({"status": "value", **meta}))


def dump_status(folder: Path, stem: str, status: str, detail: str = "") -> None:
    (folder / f"{stem}.json").write_text(json.dumps({"status": status, "detail": detail[:200]}))


def exception_name(exc: BaseException) -> str:
    kind = type(exc)
    module = getattr(kind, "__module__", "") or ""
    name = getattr(kind, "__qualname__", "") or kind.__name__
    return name if module in ("builtins", "__main__") else f"{module}.{name}"


TORCH_DTYPES = {
    "torch.float32": "float32", "torch.float64": "float64", "torch.float16": "float16",
    "torch.bfloat16": "bfloat16", "torch.int64": "int64", "torch.int32": "int32", "torch.int16": "int16",
    "torch.int8": "int8", "torch.uint8": "uint8", "torch.bool": "bool",
    "torch.complex64": "complex64", "torch.complex128": "complex128",
}
# The NumPy dtype a tensor of each torch dtype is saved as (bfloat16 goes through float32).
SAVED_AS = {**{k: v for k, v in TORCH_DTYPES.items()}, "torch.bfloat16": "float32"}


# The exception names a row may show: Python's own (and two of torch's); any other class, named by the
# submission, could carry what it found (a hidden input, a constant of the grader's code) into the gradebook.
KNOWN_EXCEPTIONS = frozenset(
    [name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)]
    + ["torch.OutOfMemoryError", "torch.linalg.LinAlgError", "torch._C._LinAlgError", "UnrecordableResult"])


def describe_exception(name: Any) -> str:
    """A recorded exception name fit for feedback: one of Python's own exceptions, else a neutral phrase."""
    if isinstance(name, str) and name in KNOWN_EXCEPTIONS:
        return name
    return "an exception"


def _checked_plain(value: Any, depth: int = 0, budget: list[int] | None = None) -> Any:
    """Validate and decode plain data read from a record; raise ValueError if it is not plain data."""
    budget = budget if budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError("too many items")
    if depth > MAX_DEPTH:
        raise ValueError("nested too deeply")
    if type(value) in PLAIN_SCALARS:
        if type(value) is str and len(value) > 10_000:
            raise ValueError("string too long")
        return value
    if type(value) is list:
        return [_checked_plain(v, depth + 1, budget) for v in value]
    if type(value) is dict and set(value) == {"__float__"} and value["__float__"] in ("inf", "-inf", "nan"):
        return float(value["__float__"])
    raise ValueError("not plain data")


def _invalid(detail: str) -> dict[str, Any]:
    return {"status": "invalid", "detail": detail}


def load(dir_fd: int, stem: str) -> dict[str, Any]:
    """Read one record from the folder ``dir_fd``. Never raises for anything the submission wrote.

    Returns ``{"status": "value", "value": ...}`` (a torch tensor for tensors, with ``device``), or
    ``{"status": "raised" | "not attempted", "detail": ...}``, or ``{"status": "missing" | "invalid",
    "detail": ...}``.
    """
    try:
        return _load(dir_fd, stem)
    except FileNotFoundError:
        return {"status": "missing"}
    except safeio.Refused as exc:
        return _invalid(f"record refused: {exc}")
    except Exception as exc:  # any malformed record fails only its own probe
        return _invalid(f"record unreadable ({type(exc).__name__})")


def _load(dir_fd: int, stem: str) -> dict[str, Any]:
    import torch

    raw = safeio.read_bytes(dir_fd, f"{stem}.json", MAX_JSON_BYTES)
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        return _invalid("record is not JSON")
    if not isinstance(meta, dict) or meta.get("status") not in ("value", "raised", "not attempted"):
        return _invalid("record has no valid status")
    if meta["status"] != "value":
        return {"status": meta["status"], "detail": describe_exception(meta.get("detail"))}
    kind = meta.get("type")
    if kind == "plain":
        try:
            return {"status": "value", "value": _checked_plain(meta.get("value"))}
        except (ValueError, RecursionError) as exc:
            return _invalid(f"record malformed ({exc})")
    if kind == "unsupported":
        return {"status": "value", "value": Unsupported("not plain data")}
    if kind not in ("tensor", "ndarray"):
        return _invalid("unknown record type")
    data = safeio.read_bytes(dir_fd, f"{stem}.npy", MAX_NPY_BYTES)
    try:
        array = np.load(io.BytesIO(data), allow_pickle=False)
    except Exception:
        return _invalid("array data unreadable")
    if type(array) is not np.ndarray or array.dtype.kind not in ARRAY_KINDS or array.dtype.itemsize > 16:
        return _invalid("array data is not numbers")
    shape = meta.get("shape")
    if not isinstance(shape, list) or [int(s) for s in shape if type(s) is int] != shape:
        return _invalid("record shape malformed")
    if list(array.shape) != shape:
        return _invalid("array shape does not match its record")
    if kind == "ndarray":
        return {"status": "value", "value": array}
    torch_dtype = meta.get("dtype")
    if torch_dtype not in TORCH_DTYPES or array.dtype != np.dtype(SAVED_AS[torch_dtype]):
        return _invalid("tensor dtype does not match its record")
    device = meta.get("device")
    if not (isinstance(device, str) and re.fullmatch(r"[a-z]{1,12}", device)):
        return _invalid("tensor device malformed")
    tensor = torch.from_numpy(np.ascontiguousarray(array)).to(getattr(torch, TORCH_DTYPES[torch_dtype]))
    return {"status": "value", "value": tensor, "device": device}


class Unsupported:
    """Stands for a value the submission returned that is not plain data."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<an object of type {self.type_name}>"


class Recorder:
    """``__probe__`` in a check's scope: records the value of each probe as plain data (in the submission)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.recorded: set[int] = set()

    def __call__(self, index: int, compute) -> None:
        stem = f"probe_{int(index)}"
        self.recorded.add(int(index))
        try:
            value = compute()
        except NotImplementedError:
            dump_status(self.folder, stem, "not attempted")
            return
        except BaseException as exc:  # noqa: BLE001 (SystemExit and KeyboardInterrupt too: it is one probe)
            dump_status(self.folder, stem, "raised", exception_name(exc))
            return
        try:
            dump(value, self.folder, stem)
        except BaseException:  # noqa: BLE001
            dump_status(self.folder, stem, "raised", "UnrecordableResult")

    def setup_failed(self, indices: list[int], exc: BaseException) -> None:
        """The check's setup raised before these probes ran (for example a learner's class it builds)."""
        for index in indices:
            if int(index) not in self.recorded:
                dump_status(self.folder, f"probe_{int(index)}", "raised", exception_name(exc))
