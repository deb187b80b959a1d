"""Turn a check cell into probe functions: run the learner's code, record values, judge nothing.

A check cell in solutions/ looks like::

    z_check = ...                                              # setup
    check.exercise("3.1", lambda: check.close(f(z_check), J, name="f(z)"))
    ### BEGIN HIDDEN TESTS
    p = ...                                                    # hidden setup
    J2 = ...                                                   # expected value
    check.require(lambda: check.close(f(p), J2, name="batched"))
    ### END HIDDEN TESTS

Each ``check.KIND(got, expected, ...)`` inside a ``check.exercise``/``check.require`` lambda is a
*probe* (a visible check written some other way is for the learner only and is not graded; every
hidden one must be a probe). The cell becomes two functions, each run in its own scope so that nothing
it makes lands in the notebook's globals:

* the **got form**, run in every graded notebook: only the setup statements the ``got`` expressions
  need (a backward slice), then ``__probe__(i, lambda: got)``, which records the value of ``got`` as
  plain data. Statements that compute expected values are left out, so expected values never exist in
  the submission's process; the locals are renamed (``_g0``, ``_g1``, ...) and the grader sends the
  function compiled, never as text, so the hidden tests' source is not in the submission either.
* the **expected form**, run only in the reference run (the solutions notebook): the whole setup, then
  ``__probe__(i, lambda: expected)``.

A ``got`` written ``check.within_memory(lambda: EXPR, max_mb=N)`` is recorded as ``EXPR`` with a memory bound
of N MiB: the submission computes ``EXPR`` alone, in a job of its own, and the grader measures the growth of the
run's peak memory around that job from outside (coursetools.grading.sandbox.MemoryPeak).

The comparison, ``check.KIND`` itself, runs later in the grader's own process. Statements that define
no name (``torch.manual_seed(5)``) stay in the got form unless they read a left-out name. The grader
checks that the solution passes every probe of the got form, so a slice that changed an input (a
left-out statement that consumed random numbers, say) stops grading with a clear error instead of
mis-grading anyone.
"""

from __future__ import annotations

import ast
import builtins
import copy
import re
from dataclasses import dataclass, field
from typing import Any

from coursetools.grading import flow
from coursetools.release import BEGIN_HIDDEN

KINDS = ("close", "number", "choice")
# Keyword arguments of each kind that may appear in a probe; all must be literals.
ALLOWED_KWARGS = {
    "close": {"name", "atol", "rtol", "check_dtype", "check_device"},
    "number": {"name", "rel", "abs_tol"},
    "choice": {"name"},
}
FUNCTION = "__grader_check__"
PROBE_FUNCTION = "__grader_probe__"
RECORDER = "__probe__"
_BUILTINS = frozenset(dir(builtins))


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
    max_memory: int | None = None  # bytes: ``check.within_memory(lambda: got, max_mb=...)``, measured by the grader


@dataclass
class CheckCell:
    """One check cell as the grader runs it."""

    exercise: str
    probes: list[Probe]
    public_source: str  # the visible part's functions, classes and imports: run as a cell, as in the notebook
    public_uses: frozenset[str]
    got_source: str  # ``def __grader_check__(__probe__): ...`` (sliced, locals renamed, hands over arguments)
    expected_source: str  # the same for the reference run: whole setup, records expected values
    got_uses: frozenset[str]  # globals the got form reads
    expected_uses: frozenset[str]
    # probe index -> (``def __grader_probe__(args): return got``, its parameter names)
    probe_sources: dict[int, tuple[str, tuple[str, ...]]] = field(default_factory=dict)
    setup_uses: frozenset[str] = frozenset()  # globals the got form's setup reads (not the got expressions)

    def compiled(self, form: str) -> Any:
        """The code object of the check function (``form`` "got" or "expected")."""
        source = self.got_source if form == "got" else self.expected_source
        return _code(source, f"<grader check {self.exercise}>", FUNCTION)

    def compiled_probe(self, index: int) -> Any:
        """The code object of one probe's ``got`` expression as a function of its arguments."""
        return _code(self.probe_sources[index][0], f"<grader probe {self.exercise}>", PROBE_FUNCTION)


def _code(source: str, filename: str, name: str) -> Any:
    module = compile(source, filename, "exec")
    return next(c for c in module.co_consts if getattr(c, "co_name", None) == name)


def _is_check_call(node: ast.AST, names: tuple[str, ...]) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "check"
        and node.func.attr in names
    )


def _literal(node: ast.AST, what: str) -> Any:
    text = ast.unparse(node).replace('"', "'")
    special = {"float('inf')": float("inf"), "float('-inf')": float("-inf"), "math.inf": float("inf"),
               "-math.inf": float("-inf"), "torch.inf": float("inf")}
    if text in special:
        return special[text]
    try:
        return ast.literal_eval(node)
    except ValueError as exc:
        value = _arithmetic(node)
        if value is None:
            raise ProbeError(f"{what} must be a literal, got {ast.unparse(node)!r}") from exc
        return value


# A tolerance may be arithmetic on numbers and a dtype's machine epsilon, e.g. ``100 * torch.finfo(torch.float32).eps
# * 3000.0`` (the author's hidden test, never the submission's code): evaluated here, by walking the tree.
_FINFO_DTYPES = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}
_OPERATORS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
              ast.Div: lambda a, b: a / b, ast.Pow: lambda a, b: a**b}


def _arithmetic(node: ast.AST) -> float | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _arithmetic(node.operand)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _arithmetic(node.left), _arithmetic(node.right)
        return None if left is None or right is None else _OPERATORS[type(node.op)](left, right)
    text = ast.unparse(node)
    match = re.fullmatch(r"torch\.finfo\(torch\.(\w+)\)\.eps", text)
    if match and match.group(1) in _FINFO_DTYPES:
        return _FINFO_DTYPES[match.group(1)]
    return None


MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add", "remove", "discard", "pop", "clear",
            "sort", "reverse"}
SEEDED = {"Generator", "manual_seed", "default_rng", "RandomState", "Random", "SeedSequence"}
DRAWS = {"randn", "rand", "randint", "randperm", "rand_like", "randn_like", "randint_like", "normal", "normal_",
         "uniform", "uniform_", "bernoulli", "bernoulli_", "multinomial", "exponential_", "random_", "shuffle",
         "permutation", "choice", "sample", "random", "dropout", "gauss"}


def _call_name(node: ast.Call) -> str:
    return node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")


@dataclass
class _Statement:
    node: ast.stmt
    names: flow.Names
    probes: list[tuple[Probe, ast.expr, ast.expr]] = field(default_factory=list)  # (probe, got, expected)
    is_check: bool = False  # a check.exercise/check.require statement

    @property
    def mutates(self) -> set[str]:
        """Names this statement changes in place (``x.append(...)``, ``x[i] = ...``, ``x.add_(...)``)."""
        found = set()
        for n in ast.walk(self.node):
            if isinstance(n, (ast.Subscript, ast.Attribute)) and isinstance(n.ctx, ast.Store):
                base = n.value
                while isinstance(base, (ast.Subscript, ast.Attribute)):
                    base = base.value
                if isinstance(base, ast.Name):
                    found.add(base.id)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) \
                    and (n.func.attr in MUTATORS or (n.func.attr.endswith("_") and not n.func.attr.startswith("_"))):
                found.add(n.func.value.id)
            elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
                found.add(n.target.id)
        return found

    @property
    def makes_generator(self) -> bool:
        return any(isinstance(n, ast.Call) and _call_name(n) in SEEDED for n in ast.walk(self.node))

    @property
    def draws_global(self) -> bool:
        """Draws from a global random generator (a random function called without ``generator=``)."""
        return any(isinstance(n, ast.Call) and _call_name(n) in DRAWS
                   and not any(k.arg in ("generator", "rng") for k in n.keywords) for n in ast.walk(self.node))


def _expression_uses(node: ast.expr) -> frozenset[str]:
    return flow.analyse(f"_ = {ast.unparse(node)}", ipython=False).uses - {"_"}


def _slice(statements: list[_Statement]) -> set[int]:
    """Indices of the setup statements the got expressions need (see the module docstring)."""
    setup = {i: s for i, s in enumerate(statements) if not s.is_check}
    roots: set[str] = set()
    for s in statements:
        for _, got, _ in s.probes:
            roots |= _expression_uses(got)
    kept: set[int] = set()
    while True:
        defining = {i: s.names for i, s in setup.items() if s.names.defines}
        needed = set(roots)
        for i in kept:
            needed |= setup[i].names.uses
        new = flow.closure({i: n for i, n in defining.items()}, needed) | kept
        kept_defs = set().union(*(setup[i].names.defines for i in new)) if new else set()
        dropped_defs = set().union(*(n.defines for i, n in defining.items() if i not in new)) - kept_defs
        for i, s in setup.items():
            if not s.names.defines and not (s.names.uses & dropped_defs):
                new.add(i)
        # A left-out statement that changes a needed value in place (a loop appending to a list of
        # inputs) is part of making the inputs: keep it.
        needed_now = set(roots).union(*(setup[i].names.uses | setup[i].names.defines for i in new)) if new else set(roots)
        for i, s in setup.items():
            if i not in new and s.mutates & needed_now:
                new.add(i)
        # A left-out statement that draws from a generator (or the global one) a kept statement draws
        # from later would change the inputs: keep it too (it makes an input, not an expected value).
        generators = set().union(*(s.names.defines for s in setup.values() if s.makes_generator))
        for i, s in setup.items():
            later = [setup[j] for j in new if j > i]
            shared = s.names.uses & generators & set().union(*(t.names.uses for t in later)) if later else set()
            if i not in new and (shared or (s.draws_global and any(t.draws_global for t in later))):
                new.add(i)
        if new == kept:
            return kept
        kept = new


class _Renamer(ast.NodeTransformer):
    """Rename every occurrence of the given identifiers (the probe function's locals)."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping

    def _new(self, name: str | None) -> str | None:
        return self.mapping.get(name, name) if name is not None else None

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._new(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._new(node.arg)
        self.generic_visit(node)
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        node.name = self._new(node.name)
        self.generic_visit(node)
        return node

    def visit_alias(self, node: ast.alias) -> ast.AST:
        if node.asname is not None:
            node.asname = self._new(node.asname)
        elif "." not in node.name and node.name in self.mapping:
            node.asname = self.mapping[node.name]
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        raise ProbeError("a check cell may not declare `global` names")

    visit_Nonlocal = visit_Global


def _function(body: list[ast.stmt], rename: bool, capture: dict[int, tuple[str, tuple[str, ...]]] | None = None
              ) -> tuple[str, frozenset[str]]:
    """``def __grader_check__(__probe__): body`` as source, and the globals it reads.

    With ``capture`` (a dict to fill), each ``__probe__(i, lambda: got)`` becomes
    ``__probe__(i, {'_g1': _g1, ...})``: the setup only hands over the local values ``got`` reads (the
    exercise's arguments), and ``capture[i]`` gets ``def __grader_probe__(_g1, ...): return got`` and its
    parameter names, to be called later in a frame of its own (see the module docstring)."""
    body = copy.deepcopy(body) or [ast.Pass()]  # the renamer edits nodes in place
    module = ast.Module(body=body, type_ignores=[])
    names = flow.analyse(ast.unparse(module), ipython=False)
    local = set(names.defines) - {flow.STAR}
    uses = frozenset(names.uses - local - {RECORDER} - _BUILTINS)
    mapping: dict[str, str] = {}
    if rename:
        imported = {
            (alias.asname or alias.name).split(".")[0]
            for node in module.body if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }  # module names are no secret, and `import a.b` cannot be renamed
        mapping = {name: f"_g{i}" for i, name in enumerate(sorted(local - imported - {DISCARD}))}
        module = _Renamer(mapping).visit(module)
    if capture is not None:
        renamed_locals = {mapping.get(name, name) for name in local}
        for position, stmt in enumerate(module.body):
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == RECORDER
                    and len(call.args) == 2 and isinstance(call.args[1], ast.Lambda)):
                continue
            index = call.args[0].value
            expression = call.args[1].body
            params = tuple(sorted({n.id for n in ast.walk(expression) if isinstance(n, ast.Name)
                                   and n.id in renamed_locals}))
            capture[index] = (f"def {PROBE_FUNCTION}({', '.join(params)}):\n    return {ast.unparse(expression)}",
                              params)
            values = ", ".join(f"{p!r}: {p}" for p in params)
            module.body[position] = ast.copy_location(
                ast.parse(f"{RECORDER}({index}, {{{values}}})").body[0], stmt)
    func = ast.parse(f"def {FUNCTION}({RECORDER}):\n    pass").body[0]
    func.body = module.body
    source = ast.unparse(ast.fix_missing_locations(ast.Module(body=[func], type_ignores=[])))
    try:
        compile(source, "<check>", "exec")
        for probe_source, _ in (capture or {}).values():
            compile(probe_source, "<probe>", "exec")
    except SyntaxError as exc:
        raise ProbeError(f"the check cell cannot run inside a function: {exc.msg}") from exc
    return source, uses


def _public(body: list[ast.stmt], hidden_from: int | None) -> list[ast.stmt]:
    """The visible part's functions, classes and imports, and the visible assignments they read: global,
    as in the learner's notebook (a later check may call them). Other visible values (an expected
    tensor, say) stay inside the probe's scope."""
    visible = [s for s in body if hidden_from is None or s.lineno <= hidden_from]
    chosen = {id(s) for s in visible if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                        ast.Import, ast.ImportFrom))}
    while True:
        uses = set().union(*(flow.analyse(ast.unparse(s), ipython=False).uses for s in visible if id(s) in chosen)) \
            if chosen else set()
        more = {id(s) for s in visible if isinstance(s, (ast.Assign, ast.AnnAssign)) and id(s) not in chosen
                and flow.analyse(ast.unparse(s), ipython=False).defines & uses}
        if not more:
            return [s for s in visible if id(s) in chosen]
        chosen |= more


def _unrolled(body: list[ast.stmt]) -> list[ast.stmt]:
    """Top-level ``for name in <literal tuple or list>:`` loops around checks, written out one value at a
    time (``name = value`` and the body again), so that each check inside is a top-level probe."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.For) and not stmt.orelse and any(
                _is_check_call(n, ("exercise", "require")) for n in ast.walk(stmt)):
            try:
                values = ast.literal_eval(stmt.iter)
            except ValueError:
                values = None
            if isinstance(values, (tuple, list)) and 0 < len(values) <= 50:
                for value in values:
                    assign = ast.Assign(targets=[copy.deepcopy(stmt.target)], value=ast.parse(repr(value), mode="eval").body)
                    for node in ast.walk(assign):
                        if isinstance(node, ast.Name):
                            node.ctx = ast.Store() if node is assign.targets[0] or node in ast.walk(assign.targets[0]) \
                                else node.ctx
                    ast.copy_location(assign, stmt)
                    out.append(ast.fix_missing_locations(assign))
                    out.extend(_unrolled(copy.deepcopy(stmt.body)))
                continue
        out.append(stmt)
    return out


DISCARD = "_"


def _discard_unneeded(node: ast.stmt, needed: set[str]) -> list[ast.stmt]:
    """``a, b, expected = make()``: the names nothing in the got form reads become ``_``, deleted at once,
    so a value made only to be compared with (an expected output returned with the inputs) is dropped
    before any of the learner's code runs."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List))):
        return [node]
    node = copy.deepcopy(node)
    dropped = False
    for i, element in enumerate(node.targets[0].elts):
        if isinstance(element, ast.Name) and element.id not in needed:
            node.targets[0].elts[i] = ast.copy_location(ast.Name(id=DISCARD, ctx=ast.Store()), element)
            dropped = True
    if not dropped:
        return [node]
    return [node, ast.copy_location(ast.Delete(targets=[ast.Name(id=DISCARD, ctx=ast.Del())]), node)]


def _memory_bound(got: ast.expr, exercise: str) -> tuple[ast.expr, int | None]:
    """``check.within_memory(lambda: EXPR, max_mb=N)`` -> (EXPR, N MiB in bytes); anything else -> (got, None).

    The submission then computes ``EXPR`` alone, and the grader measures the peak memory of the run's processes
    around that one call from outside (coursetools.grading.sandbox): the in-process measure never runs there."""
    if not _is_check_call(got, ("within_memory",)):
        return got, None
    keywords = {kw.arg: kw.value for kw in got.keywords}
    if len(got.args) != 1 or not isinstance(got.args[0], ast.Lambda) or got.args[0].args.args \
            or set(keywords) - {"max_mb", "name"} or "max_mb" not in keywords:
        raise ProbeError(f"{exercise}: write check.within_memory(lambda: <call>, max_mb=<MiB>)")
    max_mb = _literal(keywords["max_mb"], f"{exercise}: max_mb")
    if isinstance(max_mb, bool) or not isinstance(max_mb, (int, float)) or not max_mb > 0:
        raise ProbeError(f"{exercise}: max_mb must be a positive number, got {max_mb!r}")
    return got.args[0].body, int(max_mb * 2**20)


def _record(index: int, expression: ast.expr) -> ast.stmt:
    return ast.parse(f"{RECORDER}({index}, lambda: {ast.unparse(expression)})").body[0]


def transform(source: str, exercise: str, first_index: int) -> CheckCell:
    """The got and expected forms of one check cell; its probes are numbered from ``first_index``."""
    lines = source.split("\n")
    hidden_from = next((i + 1 for i, line in enumerate(lines) if line.strip() == BEGIN_HIDDEN), None)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise ProbeError(f"{exercise}: the check cell is not valid Python ({exc.msg})") from exc
    statements: list[_Statement] = []
    probes: list[Probe] = []
    body = _unrolled(tree.body)
    public = _public(body, hidden_from)
    for stmt in body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        hidden = hidden_from is not None and stmt.lineno > hidden_from
        if any(stmt is p for p in public):
            continue
        if call is None or not _is_check_call(call, ("exercise", "require")):
            if hidden and (isinstance(stmt, ast.Assert) or any(
                    _is_check_call(n, ("exercise", "require", *KINDS)) for n in ast.walk(stmt))):
                # A hidden test in another form would silently not count: refuse it.
                raise ProbeError(f"{exercise}: a hidden test must be a top-level "
                                 f"`check.require(lambda: check.close/number/choice(...))`, got "
                                 f"{ast.unparse(stmt)[:80]!r}")
            statements.append(_Statement(stmt, flow.analyse(ast.unparse(stmt), ipython=False)))
            continue
        entry = _Statement(stmt, flow.Names(), is_check=True)
        lambdas = call.args[1:] if call.func.attr == "exercise" else call.args
        for lam in lambdas:
            if not isinstance(lam, ast.Lambda) or not _is_check_call(lam.body, KINDS) or lam.args.args:
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
            got, max_memory = _memory_bound(inner.args[0], exercise)
            probe = Probe(first_index + len(probes), exercise, kind, hidden, kwargs, options, max_memory)
            probes.append(probe)
            entry.probes.append((probe, got, inner.args[1]))
        statements.append(entry)
    if not probes:
        raise ProbeError(f"{exercise}: the check cell has no check.exercise/check.require")
    kept = _slice(statements)
    needed = set().union(*(_expression_uses(got) for st in statements for _, got, _ in st.probes))
    for i in kept:
        needed |= statements[i].names.uses
    got_body: list[ast.stmt] = []
    expected_body: list[ast.stmt] = []
    for i, s in enumerate(statements):
        if not s.is_check:
            expected_body.append(s.node)
            if i in kept:
                got_body.extend(_discard_unneeded(s.node, needed))
            continue
        for probe, got, expected in s.probes:
            got_body.append(_record(probe.index, got))
            expected_body.append(_record(probe.index, expected))
    capture: dict[int, tuple[str, tuple[str, ...]]] = {}
    got_source, got_uses = _function(got_body, rename=True, capture=capture)
    _, setup_uses = _function([s for s in got_body if not _is_record(s)], rename=False)
    expected_source, expected_uses = _function(expected_body, rename=False)
    public_source = ast.unparse(ast.Module(body=public, type_ignores=[])) if public else ""
    public_uses = flow.analyse(public_source, ipython=False).uses if public else frozenset()
    return CheckCell(exercise, probes, public_source, public_uses, got_source, expected_source, got_uses,
                     expected_uses, capture, setup_uses)


def _is_record(stmt: ast.stmt) -> bool:
    call = stmt.value if isinstance(stmt, ast.Expr) else None
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == RECORDER
