"""Learner self-checks: a clear "expected vs got" message, never a traceback into library code.

Every comparison returns a :class:`Verdict` whatever it is given (None, a list, a NumPy array, a
tensor on another device, an object whose ``__eq__`` lies, ...). :func:`exercise` runs a learner's
code, catches what it raises, and prints one line per exercise:

    Exercise 3.1: passed
    Exercise 3.1: not attempted yet
    Exercise 3.1: not yet. softmax_jacobian(p): expected shape (4, 4), got (4,)

Hidden tests use :func:`require`, which raises ``AssertionError`` with the same message, so a
grader (ours or nbgrader) records a failure.
"""

from __future__ import annotations

import fractions
import math
import numbers
import textwrap
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "Verdict",
    "close",
    "number",
    "choice",
    "digest",
    "number_digest",
    "choice_digest",
    "number_form",
    "choice_form",
    "prediction",
    "predicted",
    "RECORDED",
    "exercise",
    "require",
    "peak_memory",
    "within_memory",
    "MemoryLimitExceeded",
    "RESULTS",
]


@dataclass(frozen=True)
class Verdict:
    """The outcome of one comparison: whether it passed, and what to tell the learner."""

    ok: bool
    message: str

    def __bool__(self) -> bool:
        return self.ok


PASS = Verdict(True, "ok")

# What every form-only check says: the answer has the right form and is graded from the hidden tests when
# the notebook is handed in. The hand-in check counts a line that says this as answered.
RECORDED = "graded when you hand in"

# exercise id -> "passed" | "not attempted" | "failed"; read by the hand-in check.
RESULTS: dict[str, str] = {}


def _describe(value: Any) -> str:
    """A short, safe description of any object (its repr may itself raise)."""
    if value is None:
        return "None"
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)} and dtype {value.dtype} on {value.device}"
    try:
        text = repr(value)
    except Exception:  # a learner's object whose __repr__ raises
        text = f"<{type(value).__name__} object>"
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _not_a_tensor(name: str, got: Any) -> Verdict:
    if got is None:
        return Verdict(False, f"{name}: expected a tensor, got None. Did you forget to `return`?")
    if callable(got) and not isinstance(got, torch.Tensor):
        return Verdict(False, f"{name}: expected a tensor, got a function. Did you forget to call it?")
    hint = ""
    if type(got).__module__ == "numpy":
        hint = " Use torch.from_numpy(...) or do the computation in torch."
    elif isinstance(got, (list, tuple)):
        hint = " Use torch.tensor(...) or torch.stack(...)."
    return Verdict(False, f"{name}: expected a torch.Tensor, got {_describe(got)}.{hint}")


def _index(flat_index: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size)
        flat_index //= size
    return tuple(reversed(index))


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def close(
    got: Any,
    expected: torch.Tensor,
    *,
    name: str = "your result",
    atol: float = 1e-6,
    rtol: float = 1e-5,
    check_dtype: bool = True,
    check_device: bool = True,
) -> Verdict:
    """Compare a learner's tensor with the expected one: type, shape, dtype, device, NaN, values."""
    if not isinstance(got, torch.Tensor):
        return _not_a_tensor(name, got)
    try:
        # A plain tensor, detached: a subclass cannot change how the comparison behaves.
        got_plain = got.detach().as_subclass(torch.Tensor)
        exp_plain = expected.detach().as_subclass(torch.Tensor)
        if tuple(got_plain.shape) != tuple(exp_plain.shape):
            return Verdict(
                False,
                f"{name}: expected shape {tuple(exp_plain.shape)}, got {tuple(got_plain.shape)}",
            )
        if check_dtype and got_plain.dtype != exp_plain.dtype:
            return Verdict(False, f"{name}: expected dtype {exp_plain.dtype}, got {got_plain.dtype}")
        if check_device and got_plain.device.type != exp_plain.device.type:
            return Verdict(
                False,
                f"{name}: expected a tensor on {exp_plain.device}, got one on {got_plain.device}. "
                "Create new tensors on the input's device (device=x.device).",
            )
        if got_plain.is_complex() != exp_plain.is_complex():
            return Verdict(False, f"{name}: expected dtype {exp_plain.dtype}, got {got_plain.dtype}")
        g = got_plain.to("cpu", torch.float64 if not got_plain.is_complex() else torch.complex128)
        e = exp_plain.to("cpu", torch.float64 if not exp_plain.is_complex() else torch.complex128)
        g_nan, e_nan = torch.isnan(g), torch.isnan(e)
        surprise_nan = g_nan & ~e_nan
        if surprise_nan.any():
            where = _index(int(surprise_nan.flatten().nonzero()[0]), g.shape)
            count = int(surprise_nan.sum())
            return Verdict(False, f"{name}: contains NaN ({count} entries), the first at index {where}")
        if (e_nan & ~g_nan).any():
            where = _index(int((e_nan & ~g_nan).flatten().nonzero()[0]), g.shape)
            return Verdict(False, f"{name}: expected NaN at index {where}, got a number")
        both = ~(g_nan | e_nan)
        inf_mismatch = both & (torch.isinf(g) | torch.isinf(e)) & (g != e)
        diff = torch.where(both, (g - e).abs(), torch.zeros_like(g.real if g.is_complex() else g))
        tol = atol + rtol * e.abs()
        bad = (diff > tol) | inf_mismatch
        if bad.any():
            flat = int(bad.flatten().nonzero()[0])
            where = _index(flat, g.shape)
            g_val, e_val = g.flatten()[flat].item(), e.flatten()[flat].item()
            n_bad = int(bad.sum())
            finite = diff[both & ~inf_mismatch]
            worst = _fmt(float(finite.max())) if finite.numel() else "inf"
            return Verdict(
                False,
                f"{name}: {n_bad} of {g.numel()} entries differ; the first at index {where}: "
                f"expected {_fmt(e_val) if isinstance(e_val, float) else e_val}, "
                f"got {_fmt(g_val) if isinstance(g_val, float) else g_val} "
                f"(largest difference {worst}; tolerance atol={atol:g}, rtol={rtol:g})",
            )
        return PASS
    except Exception as exc:  # anything odd about the learner's tensor becomes a message
        return Verdict(False, f"{name}: could not be compared ({type(exc).__name__}: {exc})")


def _as_number(got: Any, name: str) -> float | Verdict:
    """The learner's answer as a float, or a Verdict saying why it is not a number."""
    if isinstance(got, torch.Tensor):
        if type(got) not in (torch.Tensor, torch.nn.Parameter):  # a subclass's item() could read the check's stack
            return Verdict(False, f"{name}: expected a plain number or tensor, got {type(got).__name__}")
        if got.numel() != 1:
            return Verdict(False, f"{name}: expected a single number, got {_describe(got)}")
        got = got.detach().cpu().item()
    if isinstance(got, np.ndarray) and got.ndim == 0:  # np.array(4.0), as a one-element tensor is taken
        got = np.ndarray.item(got)
    if isinstance(got, bool) or not isinstance(got, numbers.Real):
        if got is None:
            return Verdict(False, f"{name}: expected a number, got None. Did you forget to `return`?")
        if isinstance(got, numbers.Number) and not isinstance(got, numbers.Complex):  # decimal.Decimal
            return Verdict(False, f"{name}: expected a plain number (int or float), got {type(got).__name__}: "
                                  "return float(...) of it")
        return Verdict(False, f"{name}: expected a number, got {_describe(got)}")
    if not isinstance(got, (int, float)):
        # NumPy's scalars are read by NumPy; any other Real would be read by its own __float__, which can be
        # written to return whatever the check compares against (red team: it read the caller's `expected`).
        if isinstance(got, np.generic):
            got = np.generic.item(got)
        elif type(got) is fractions.Fraction:  # exactly the standard library's: its parts are ints
            got = got.numerator / got.denominator
        else:
            return Verdict(False, f"{name}: expected a plain number (int or float), got {type(got).__name__}: "
                                  "return float(...) of it")
    try:
        # A subclass of float or int counts as the number it holds (its own __float__ is not asked), as
        # in the grader.
        value = float.__float__(got) if isinstance(got, float) else float(int.__int__(got)) \
            if isinstance(got, int) else float(got)
    except Exception as exc:
        return Verdict(False, f"{name}: could not be read as a number ({type(exc).__name__})")
    if math.isnan(value):
        return Verdict(False, f"{name}: got NaN")
    return value


def number(
    got: Any,
    expected: float,
    *,
    name: str = "your answer",
    rel: float = 1e-3,
    abs_tol: float = 1e-9,
) -> Verdict:
    """Compare a learner's number with the expected one, to a relative tolerance."""
    value = _as_number(got, name)
    if isinstance(value, Verdict):
        return value
    if not math.isclose(value, float(expected), rel_tol=rel, abs_tol=abs_tol):
        return Verdict(False, f"{name}: expected {_fmt(float(expected))}, got {_fmt(value)}")
    return PASS


def choice(got: Any, expected: str, options: Sequence[str], *, name: str = "your choice") -> Verdict:
    """Check a multiple-choice answer given as one of ``options`` (case and spaces ignored)."""
    allowed = ", ".join(repr(o) for o in options)
    if not isinstance(got, str):
        return Verdict(False, f"{name}: expected one of {allowed} as a string, got {_describe(got)}")
    got = str.__str__(got)  # a subclass of str counts as the text it holds, as in the grader
    answer = got.strip().lower()
    if answer not in [o.lower() for o in options]:
        return Verdict(False, f"{name}: expected one of {allowed}, got {got!r}")
    if answer != expected.lower():
        return Verdict(False, f"{name}: {got!r} is not right; reread the section and try again")
    return PASS


def _canonical_number(value: float, sig: int) -> str:
    """Integers exactly; other numbers to ``sig`` significant digits."""
    if math.isfinite(value) and value == int(value) and abs(value) < 2**53:
        return f"int:{int(value)}"
    return f"float:{value:.{sig}g}"


def digest(answer: str | float, sig: int = 4, *, salt: str | None = None) -> str:
    """A fingerprint of an answer, so a visible self-check can confirm it without printing it.

    ``salt`` is the exercise's grade id (``"ex03_2"``): the same answer has a different digest in every
    exercise, so digests cannot be compared across exercises. Strings are compared case- and
    space-insensitively; integers exactly; other numbers to ``sig`` significant digits. Authors compute it
    once (``check.digest(4.0, salt="ex03_2")``) and paste it into the check cell.
    """
    import hashlib

    if isinstance(answer, str):
        text = answer.strip().lower()
    elif salt is None:  # the unsalted form of earlier versions: 3 significant digits
        text = f"{float(answer):.{sig}g}"
    else:
        text = _canonical_number(float(answer), sig)
    prefix = "transformer-course" if salt is None else f"transformer-course/{salt}"
    return hashlib.sha256(f"{prefix}:{text}".encode()).hexdigest()[:16]


def number_digest(
    got: Any, expected_digest: str, *, name: str = "your answer", sig: int | None = None, salt: str | None = None
) -> Verdict:
    """Self-check of a derived number against its digest; the message never reveals the answer."""
    value = _as_number(got, name)
    if isinstance(value, Verdict):
        return value
    sig = sig if sig is not None else (3 if salt is None else 4)
    if digest(value, sig, salt=salt) != expected_digest:
        whole = math.isfinite(value) and value == int(value)
        how = "whole numbers are checked exactly" if salt is not None and whole else f"checked to {sig} significant digits"
        return Verdict(False, f"{name}: {_fmt(value)} is not right ({how}); recheck your derivation")
    return PASS


def choice_digest(
    got: Any, expected_digest: str, options: Sequence[str], *, name: str = "your choice", salt: str | None = None
) -> Verdict:
    """Self-check of a multiple-choice answer against its digest; never reveals the right option."""
    form = choice_form(got, options, name=name)
    if not form:
        return form
    got = str.__str__(got)
    if digest(got, salt=salt) != expected_digest:
        return Verdict(False, f"{name}: {got!r} is not right; reread the section and try again")
    return PASS


def number_form(got: Any, *, name: str = "your answer") -> Verdict:
    """Assignment-release check: only that the answer is one finite number (its value is graded later)."""
    value = _as_number(got, name)
    if isinstance(value, Verdict):
        return value
    if not math.isfinite(value):
        return Verdict(False, f"{name}: expected a finite number, got {_fmt(value)}")
    return Verdict(True, f"an answer of the right form (it is {RECORDED})")


def choice_form(got: Any, options: Sequence[str], *, name: str = "your choice") -> Verdict:
    """Assignment-release check: only that the answer is one of ``options`` (it is graded later)."""
    allowed = ", ".join(repr(o) for o in options)
    if not isinstance(got, str):
        return Verdict(False, f"{name}: expected one of {allowed} as a string, got {_describe(got)}")
    got = str.__str__(got)
    if got.strip().lower() not in [o.lower() for o in options]:
        return Verdict(False, f"{name}: expected one of {allowed}, got {got!r}")
    return Verdict(True, f"an answer of the right form (it is {RECORDED})")


def prediction(
    got: Any,
    options: Sequence[str] | None = None,
    *,
    number: bool = False,
    name: str = "your prediction",
    then: str = "run the cell after this check: its result shows whether your prediction held",
) -> Verdict:
    """Visible check of a prediction: records an answer of the right form, never says whether it is right.

    A self-check that confirmed or rejected one of three or four options would let a learner find the
    answer by trying each in turn, before predicting anything; a predicted count (2 items, 7 rows) is as
    easy to find by trying 1, 2, 3, ... So the visible check of every prediction checks only the form (one
    of ``options``, as a string; or, with ``number=True``, one finite number) and says the same thing for
    every valid answer; ``then`` says where the learner finds out (the experiment in the next cell, or the
    section to reread). The hidden test (``check.choice`` or ``check.number``) grades it.
    """
    if (options is None) == (not number):
        raise TypeError("check.prediction: give options (multiple choice) or number=True, not both")
    form = number_form(got, name=name) if number else choice_form(got, options, name=name)
    if not form:
        return form
    return Verdict(True, f"{name} is recorded, not judged here ({RECORDED}); {then}")


def predicted(
    answer: Callable[[], Any],
    exercise_id: str,
    options: Sequence[str] | None = None,
    *,
    number: bool = False,
) -> bool:
    """Whether exercise ``exercise_id``'s prediction is made, in the right form; if not, say what is wrong.

    The cell that runs the experiment of a prediction exercise starts with ``if check.predicted(...):``, so
    that it shows the result only after the prediction (and the copy in chapters/, executed with the stubs,
    stores the reminder, not the result). Its assertion sits in a hidden-tests block: in the learner's copy
    the code does not state the answer either.

    Call it with the answer taken lazily and the form of a valid answer, as the visible check has it::

        if check.predicted(lambda: answer_2_3(), "2.3", ["a", "b", "c", "d"]):   # multiple choice
        if check.predicted(lambda: answer_2_6(), "2.6", number=True):              # a number

    The gate opens only for an answer the visible check records (one of ``options``, or one finite number);
    for None, an option that is not one, or not a number it prints what was expected and what it got. The
    ``lambda`` makes an answer cell that was never run a reminder, not a ``NameError`` traceback. Without
    ``options`` or ``number`` (the older call ``check.predicted(answer_1_4, "1.4")``) any answer that returns
    opens the gate.
    """
    if options is not None and number:
        raise TypeError("check.predicted: give options (multiple choice) or number=True, not both")
    try:
        got = answer()
    except NotImplementedError:
        print(f"Make your prediction in Exercise {exercise_id} first; then run this cell.")
        return False
    except NameError as error:
        if getattr(error, "name", None) == "answer_" + exercise_id.replace(".", "_"):
            print(f"Run the cell of Exercise {exercise_id} (it defines {error.name}) and make your prediction "
                  "first; then run this cell.")
        else:
            print(f"Exercise {exercise_id}'s answer raised NameError: fix it first; then run this cell.")
        return False
    except Exception as error:  # noqa: BLE001 - any failure of the learner's cell means no prediction yet
        print(f"Exercise {exercise_id}'s answer raised {type(error).__name__}: fix it first; then run this cell.")
        return False
    if options is not None:
        form = choice_form(got, options, name=f"Exercise {exercise_id}'s prediction")
    elif number:
        form = number_form(got, name=f"Exercise {exercise_id}'s prediction")
    else:
        return True
    if not form:
        print(f"{form.message}: fix it first; then run this cell.")
        return False
    return True


class MemoryLimitExceeded(Exception):
    """A call whose peak memory went over what it is allowed (see :func:`within_memory`)."""


class _TensorBytes(torch.utils._python_dispatch.TorchDispatchMode):
    """Peak bytes of the tensor storages created inside the block (the fallback of :func:`peak_memory`)."""

    def __enter__(self) -> _TensorBytes:
        from torch.multiprocessing.reductions import StorageWeakRef

        self._ref = StorageWeakRef
        self.live: dict[int, tuple[Any, int]] = {}
        self.current = self.peak = 0
        return super().__enter__()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for key in [key for key, (ref, _) in self.live.items() if ref.expired()]:
            self.current -= self.live.pop(key)[1]
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor):
                ref = self._ref(t.untyped_storage())
                if ref.cdata not in self.live:
                    self.live[ref.cdata] = (ref, t.untyped_storage().nbytes())
                    self.current += self.live[ref.cdata][1]
        self.peak = max(self.peak, self.current)
        return out


def _status_kib(field: str) -> int:
    from pathlib import Path

    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(f"{field} is not in /proc/self/status")


def private_bytes(pid: int | str = "self") -> int:
    """Bytes of a process's private memory that can hold data: anonymous and shared-memory pages, resident or in
    swap (``RssAnon + RssShmem + VmSwap``; the pages of its program and libraries are not counted)."""
    from pathlib import Path

    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("RssAnon", "RssShmem", "VmSwap"):
            fields[key] = int(value.split()[0]) * 1024
    if "RssAnon" not in fields:
        raise OSError(f"no RssAnon for process {pid}")
    return sum(fields.values())


def touched_bytes(pid: int | str = "self") -> int:
    """Bytes of a process's writable memory used (read or written) since its ``clear_refs`` was last written
    ``1``: the ``Referenced`` pages of every writable mapping (for a private one at most its ``Anonymous`` pages,
    so a library's file pages, whose referenced bit other processes share, are not counted).

    A buffer made before a call and reused during it counts here, where it does not raise the peak."""
    total = 0
    writable = shared = False
    referenced = anonymous = 0

    def flush() -> int:
        if not writable:
            return 0
        return referenced if shared else min(referenced, anonymous)

    with open(f"/proc/{pid}/smaps") as handle:
        for line in handle:
            head, _, rest = line.partition(" ")
            if "-" in head and not head.endswith(":"):  # a new mapping: "start-end perms offset dev inode path"
                total += flush()
                perms = rest.split(" ", 1)[0]
                writable, shared, referenced, anonymous = "w" in perms, perms[3:4] == "s", 0, 0
            elif head == "Referenced:":
                referenced = int(rest.split()[0]) * 1024
            elif head == "Anonymous:":
                anonymous = int(rest.split()[0]) * 1024
    return total + flush()


def peak_memory(fn: Callable[[], Any]) -> tuple[Any, int, str]:
    """Run ``fn()``; return its result, how much memory the call used (bytes), and the instrument that measured it.

    On Linux it is what the operating system counts, as the grader counts it from outside the notebook: the
    larger of how far the peak resident size (VmHWM, reset through ``/proc/self/clear_refs`` just before the
    call) rose above the size before it, and the writable memory the call used (:func:`touched_bytes`) plus
    the private memory it gave back (a buffer made before the call, filled during it and freed before it
    returns). NumPy arrays, torch tensors and a buffer made in an earlier cell count alike. Python's garbage
    collector is run before the call and paused during it (it would touch every object). Elsewhere:
    ``tracemalloc`` (Python objects and NumPy arrays) plus every tensor storage torch creates (memory a
    compiled extension takes for itself is not seen there).
    """
    import ctypes
    import gc
    import sys
    from pathlib import Path

    if not callable(fn):
        raise TypeError(f"fn must be a zero-argument callable, got {_describe(fn)}")
    gc.collect()
    if sys.platform.startswith("linux"):
        try:
            try:
                ctypes.CDLL("libc.so.6").malloc_trim(0)  # freed heap goes back: the call must take fresh pages
            except (OSError, AttributeError):
                pass
            clear = Path("/proc/self/clear_refs")
            clear.write_text("1")  # every page: not referenced
            clear.write_text("5")  # VmHWM := the current resident size
            before, private = _status_kib("VmRSS"), private_bytes()
        except OSError:
            pass
        else:
            enabled = gc.isenabled()
            gc.disable()
            try:
                result = fn()
            finally:
                if enabled:
                    gc.enable()
            growth = max(0, _status_kib("VmHWM") - before) * 1024
            used = touched_bytes() + max(0, private - private_bytes())
            return result, max(growth, used), "memory used, as the operating system counts it (Linux)"
    import tracemalloc

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        with _TensorBytes() as tensors:
            result = fn()
        python_peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()
    return result, max(0, python_peak) + tensors.peak, "tracemalloc and torch's tensor storages"


def within_memory(fn: Callable[[], Any], *, max_mb: float, name: str = "your code") -> Any:
    """``fn()``'s result, or :class:`MemoryLimitExceeded` if its peak memory (:func:`peak_memory`) grew by more
    than ``max_mb`` MiB. In a hidden test (``check.close(check.within_memory(lambda: f(x), max_mb=32), ...)``)
    the grader runs ``f(x)`` alone and measures the same from outside the submission."""
    if not isinstance(max_mb, (int, float)) or isinstance(max_mb, bool) or not max_mb > 0:
        raise ValueError(f"max_mb must be a positive number of MiB, got {max_mb!r}")
    result, used, instrument = peak_memory(fn)
    if used > max_mb * 2**20:
        raise MemoryLimitExceeded(f"{name} used {used / 2**20:.0f} MiB of memory at its peak ({instrument}), more "
                                  f"than the {max_mb:g} MiB allowed")
    return result


def _learner_frame(exc: BaseException) -> str:
    """'line N of your cell' for the innermost frame outside the course library and torch."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [
        f
        for f in frames
        if "site-packages" not in f.filename
        and "/utils/" not in f.filename.replace("\\", "/")
        and not f.filename.startswith("<frozen")
    ]
    if not own:
        return ""
    frame = own[-1]
    where = f"line {frame.lineno}"
    if frame.name not in ("<module>", "<lambda>"):
        where += f" of {frame.name}()"
    return f" (at {where}: {frame.line.strip()})" if frame.line else f" (at {where})"


def _run(check: Callable[[], Any]) -> tuple[str, str]:
    """Run one check; return (status, message) with status passed / not attempted / failed."""
    try:
        outcome = check()
    except NotImplementedError:
        return "not attempted", "not attempted yet"
    except Exception as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        detail = f": {text}" if text else ""
        return "failed", f"your code raised {type(exc).__name__}{detail}{_learner_frame(exc)}"
    if isinstance(outcome, Verdict):
        if outcome.ok:
            return ("passed", "passed") if outcome.message == PASS.message else ("recorded", outcome.message)
        return "failed", outcome.message
    return "failed", f"internal: a check returned {_describe(outcome)} instead of a Verdict"


def exercise(exercise_id: str, *checks: Callable[[], Verdict]) -> None:
    """Run an exercise's self-checks in order and print one line: passed, not attempted, or why not.

    Each check is a zero-argument callable (usually a lambda) so that the learner's code runs
    inside this function, where a ``NotImplementedError`` or any other exception becomes a message.
    """
    status, message = "passed", "passed"
    for check in checks:
        status, message = _run(check)
        if status not in ("passed", "recorded"):
            break
    RESULTS[exercise_id] = status
    if status == "passed":
        print(f"Exercise {exercise_id}: passed")
    elif status == "recorded":  # a sentence of prose: wrapped to the book's text column (about 90 characters)
        print(textwrap.fill(f"Exercise {exercise_id}: {message}", width=88, break_long_words=False))
    elif status == "not attempted":
        print(f"Exercise {exercise_id}: not attempted yet")
    else:
        print(f"Exercise {exercise_id}: not yet. {message}")


def require(*checks: Callable[[], Verdict]) -> None:
    """For hidden tests: raise AssertionError with the learner-facing message unless all checks pass."""
    for check in checks:
        status, message = _run(check)
        if status != "passed":
            raise AssertionError(message if status != "recorded" else "a form check cannot grade an answer")
