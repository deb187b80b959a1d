"""Turn a check cell into a probe cell: run the learner's code, record values, judge nothing.

A check cell in solutions/ looks like::

    z_check = ...                                              # setup
    check.exercise("3.1", lambda: check.close(f(z_check), J, name="f(z)"))
    ### BEGIN HIDDEN TESTS
    p = ...                                                    # hidden setup
    check.require(lambda: check.close(f(p), J2, name="batched"))
    ### END HIDDEN TESTS

Each ``check.KIND(got, expected, ...)`` inside a ``check.exercise``/``check.require`` lambda is a
*probe* (a visible check written some other way is for the learner only and is not graded; every
hidden one must be a probe). In the submission's process the probe becomes ``__probe__(i, lambda: got)``, which only
records the value of ``got`` as plain data. In the reference run (the solutions notebook) it also
records ``expected``. The comparison, ``check.KIND`` itself, runs later in the grader's process.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

from coursetools.release import BEGIN_HIDDEN

KINDS = ("close", "number", "choice")
# Keyword arguments of each kind that may appear in a probe; all must be literals.
ALLOWED_KWARGS = {
    "close": {"name", "atol", "rtol", "check_dtype", "check_device"},
    "number": {"name", "rel", "abs_tol"},
    "choice": {"name"},
}


class ProbeError(ValueError):
    """A check cell that cannot be turned into probes (an authoring error in solutions/)."""


@dataclass
class Probe:
    index: int
    exercise: str  # grade id of the answer cell, e.g. ex03_1
    kind: str
    hidden: bool
    kwargs: dict[str, Any] = field(default_factory=dict)
    options: list[str] | None = None  # for choice


def _is_check_call(node: ast.AST, names: tuple[str, ...]) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "check"
        and node.func.attr in names
    )


def _literal(node: ast.AST, what: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        raise ProbeError(f"{what} must be a literal, got {ast.unparse(node)!r}") from exc


def transform(source: str, exercise: str, first_index: int, reference: bool) -> tuple[str, list[Probe]]:
    """Rewrite a check cell's source into probe calls; return (source, probes)."""
    lines = source.split("\n")
    hidden_from = next((i + 1 for i, line in enumerate(lines) if line.strip() == BEGIN_HIDDEN), None)
    tree = ast.parse(source)
    probes: list[Probe] = []
    body: list[ast.stmt] = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if call is None or not _is_check_call(call, ("exercise", "require")):
            body.append(stmt)
            continue
        lambdas = call.args[1:] if call.func.attr == "exercise" else call.args
        hidden = hidden_from is not None and stmt.lineno > hidden_from
        for lam in lambdas:
            if not isinstance(lam, ast.Lambda) or not _is_check_call(lam.body, KINDS):
                if not hidden:
                    continue  # a visible check with its own logic: for the learner only, not graded
                raise ProbeError(f"{exercise}: expected `lambda: check.close/number/choice(...)`")
            inner = lam.body
            kind = inner.func.attr
            if len(inner.args) < 2:
                raise ProbeError(f"{exercise}: check.{kind} needs (got, expected)")
            kwargs = {}
            for kw in inner.keywords:
                if kw.arg not in ALLOWED_KWARGS[kind]:
                    raise ProbeError(f"{exercise}: keyword {kw.arg!r} not allowed in check.{kind}")
                kwargs[kw.arg] = _literal(kw.value, f"{exercise}: {kw.arg}")
            options = None
            if kind == "choice":
                if len(inner.args) != 3:
                    raise ProbeError(f"{exercise}: check.choice(got, expected, options)")
                options = [str(o) for o in _literal(inner.args[2], f"{exercise}: options")]
            probe = Probe(
                index=first_index + len(probes),
                exercise=exercise,
                kind=kind,
                hidden=hidden,
                kwargs=kwargs,
                options=options,
            )
            probes.append(probe)
            got_src = ast.unparse(inner.args[0])
            body.extend(ast.parse(f"__probe__({probe.index}, lambda: {got_src})").body)
            if reference:
                expected_src = ast.unparse(inner.args[1])
                body.extend(ast.parse(f"__probe__.expected({probe.index}, lambda: {expected_src})").body)
    if not probes:
        raise ProbeError(f"{exercise}: the check cell has no check.exercise/check.require")
    return ast.unparse(ast.Module(body=body, type_ignores=[])), probes
