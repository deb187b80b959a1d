"""A probe's arguments as plain data: made once in the reference run, handed to every submission.

A probe's ``got`` expression (``merge_softmax_stats(*parts)[0]``) reads a few local values of its
check's setup (``parts``), the exercise's arguments. The setup itself (seeds, shapes, the un-split
scores the parts were made from, the compiled code with its constants) must not exist in the
submission's process: a learner's function could walk the call stack or ``gc.get_objects()`` to it,
or a learner's monkeypatch of a library function the setup calls could see it. So the reference run
(the solutions notebook, in its own sandbox) runs the setup and records each probe's arguments with
:func:`encode`; the grader sends them, probe by probe, with the probe's ``got`` expression compiled as
a function of them; the submission's runner :func:`decode`\\ s fresh copies and calls it in a frame of its
own. Nothing else of the check reaches the submission.

The encoding is a tree of tuples that ``marshal`` carries (no pickle, no code): tensors become
(dtype, shape, requires_grad, raw bytes), with tuples, lists, dicts with string keys, numbers,
strings, None, dtypes and modules (by name). A value of any other kind (a module instance, a
generator) raises :class:`Unencodable`: that check's setup then runs in the submission's process as
before (weaker, and said so in the README).
"""

from __future__ import annotations

import importlib
import random
import sys
import types
from typing import Any

RNG = "__rng__"  # key of the random generators' states at the probe, restored before it runs
MAX_DEPTH = 8
MAX_ITEMS = 10_000


class Unencodable(TypeError):
    """A value the encoding does not carry."""


def encode(value: Any, depth: int = 0) -> tuple:
    kind = type(value)
    if depth > MAX_DEPTH:
        raise Unencodable("nested too deeply")
    if value is None or kind in (bool, int, float, complex, str, bytes):
        return ("v", value)
    if kind in (tuple, list):
        if len(value) > MAX_ITEMS:
            raise Unencodable("too many items")
        return ("tuple" if kind is tuple else "list", tuple(encode(v, depth + 1) for v in value))
    if kind is dict:
        if len(value) > MAX_ITEMS or not all(type(k) is str for k in value):
            raise Unencodable("a dict with keys other than strings")
        return ("dict", tuple((k, encode(v, depth + 1)) for k, v in value.items()))
    if kind is slice:
        return ("slice", encode((value.start, value.stop, value.step), depth + 1))
    if kind is types.ModuleType:
        return ("module", value.__name__)
    torch = sys.modules.get("torch")
    if torch is not None:
        if kind is torch.Tensor or kind is torch.nn.Parameter:
            plain = value.detach()
            if plain.device.type != "cpu" or plain.is_sparse or plain.is_quantized:
                raise Unencodable("a tensor that is not a dense CPU tensor")
            flat = plain.contiguous().reshape(-1)
            data = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            return ("tensor", str(plain.dtype).removeprefix("torch."), tuple(plain.shape),
                    bool(value.requires_grad), kind is torch.nn.Parameter, data)
        if kind is torch.dtype:
            return ("torch.dtype", str(value).removeprefix("torch."))
        if kind is torch.device:
            return ("torch.device", str(value))
        if kind is torch.Generator:
            return ("torch.Generator", encode(value.get_state(), depth + 1))
    numpy = sys.modules.get("numpy")
    if numpy is not None and kind is numpy.ndarray and value.dtype.kind in "biufc":
        return ("ndarray", value.dtype.str, tuple(value.shape), numpy.ascontiguousarray(value).tobytes())
    raise Unencodable(f"a value of type {kind.__name__}")


def decode(data: tuple) -> Any:
    tag = data[0]
    if tag == "v":
        return data[1]
    if tag in ("tuple", "list"):
        items = [decode(v) for v in data[1]]
        return tuple(items) if tag == "tuple" else items
    if tag == "dict":
        return {k: decode(v) for k, v in data[1]}
    if tag == "slice":
        return slice(*decode(data[1]))
    if tag == "module":
        return importlib.import_module(data[1])
    if tag == "ndarray":
        import numpy

        return numpy.frombuffer(bytearray(data[3]), dtype=numpy.dtype(data[1])).reshape(data[2])
    import torch

    if tag == "tensor":
        _, dtype, shape, requires_grad, parameter, raw = data
        dtype = getattr(torch, dtype)
        if raw:
            tensor = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(dtype).reshape(shape)
        else:
            tensor = torch.empty(shape, dtype=dtype)
        if parameter:
            return torch.nn.Parameter(tensor, requires_grad=requires_grad)
        return tensor.requires_grad_(requires_grad) if requires_grad else tensor
    if tag == "torch.dtype":
        return getattr(torch, data[1])
    if tag == "torch.device":
        return torch.device(data[1])
    if tag == "torch.Generator":
        generator = torch.Generator()
        generator.set_state(decode(data[1]))
        return generator
    raise ValueError(f"unknown tag {tag!r}")


def rng_states() -> dict[str, Any]:
    """The states of the global random generators a probe's ``got`` expression may draw from."""
    states: dict[str, Any] = {"random": random.getstate()}
    if "torch" in sys.modules:
        states["torch"] = sys.modules["torch"].get_rng_state()
    if "numpy" in sys.modules:
        name, keys, pos, has_gauss, gauss = sys.modules["numpy"].random.get_state()
        states["numpy"] = (name, keys, int(pos), int(has_gauss), float(gauss))
    return states


def restore_rng(states: dict[str, Any]) -> None:
    if "random" in states:
        version, internal, gauss = states["random"]
        random.setstate((version, tuple(internal), gauss))
    if "torch" in states and "torch" in sys.modules:
        sys.modules["torch"].set_rng_state(states["torch"])
    if "numpy" in states and "numpy" in sys.modules:
        sys.modules["numpy"].random.set_state(states["numpy"])


def copy_env(env: dict[str, Any]) -> tuple[tuple | None, dict[str, Any] | None]:
    """(the encoding of ``env`` and the generators' states, or None) and, when it cannot be encoded, the
    values themselves (copied where ``copy.deepcopy`` can) for a probe run in the same process."""
    env = {**env, RNG: rng_states()}
    try:
        return encode(env), None
    except Unencodable:
        import copy

        copied = {}
        for name, value in env.items():
            try:
                copied[name] = copy.deepcopy(value)
            except Exception:
                copied[name] = value
        return None, copied
