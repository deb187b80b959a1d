"""Which global names a piece of code defines and which it reads: for slicing check cells and pruning notebooks.

The analysis is static and deliberately conservative in one direction: a name counts as *used* when the
code can read it as a global at any time (module level, or inside a function, class, lambda or
comprehension body as a global), so a cell or statement the code may need is kept. Names are *defined*
by assignments, imports, ``def``/``class`` and ``global`` declarations at module level. A star import
defines the pseudo-name ``*``, which keeps its cell. IPython syntax (magics, ``!shell``) is translated to
Python first; code that still does not parse defines and uses nothing.
"""

from __future__ import annotations

import ast
import symtable
from dataclasses import dataclass, field

STAR = "*"


@dataclass(frozen=True)
class Names:
    defines: frozenset[str] = field(default_factory=frozenset)
    uses: frozenset[str] = field(default_factory=frozenset)
    parsed: bool = True
    # names this code binds only by importing, each with what it imports ("torch", "torch.nn.functional")
    imports: tuple[tuple[str, str], ...] = ()


def python_source(source: str) -> str:
    """IPython cell syntax (magics, shell escapes) as plain Python, as IPython would run it."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # IPython missing or the cell is not valid even for IPython
        return source


def _nested_globals(table: symtable.SymbolTable) -> set[str]:
    found: set[str] = set()
    for child in table.get_children():
        for sym in child.get_symbols():
            if sym.is_referenced() and (sym.is_global() or sym.is_declared_global()):
                found.add(sym.get_name())
        found |= _nested_globals(child)
    return found


def _declared_global_assignments(table: symtable.SymbolTable) -> set[str]:
    found: set[str] = set()
    for child in table.get_children():
        for sym in child.get_symbols():
            if sym.is_declared_global() and sym.is_assigned():
                found.add(sym.get_name())
        found |= _declared_global_assignments(child)
    return found


class _Reads(ast.NodeVisitor):
    """Module-level names read before this code binds them, in execution order (reads inside functions,
    lambdas, classes and comprehensions count when the code does not bind the name at module level)."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.free: set[str] = set()
        self.deferred: set[str] = set()

    def _read(self, name: str) -> None:
        if name not in self.bound:
            self.free.add(name)

    def _bind_target(self, target: ast.AST) -> None:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                if isinstance(node.ctx, ast.Store):
                    self.bound.add(node.id)
                else:
                    self._read(node.id)
            elif isinstance(node, (ast.Subscript, ast.Attribute)):
                for inner in ast.walk(node.value):
                    if isinstance(inner, ast.Name):
                        self._read(inner.id)
                if isinstance(node, ast.Subscript):
                    for inner in ast.walk(node.slice):
                        if isinstance(inner, ast.Name):
                            self._read(inner.id)

    def _nested(self, node: ast.AST) -> None:
        code = ast.unparse(node)
        try:
            table = symtable.symtable(code, "<nested>", "exec")
        except (SyntaxError, ValueError, RecursionError):
            return
        self.deferred |= _nested_globals(table)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self._read(node.id)
        else:
            self.bound.add(node.id)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self._bind_target(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
        self._bind_target(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self.visit(node.value)
        if isinstance(node.target, ast.Name):
            self._read(node.target.id)
        self._bind_target(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self._bind_target(node.target)
        for stmt in [*node.body, *node.orelse]:
            self.visit(stmt)

    visit_AsyncFor = visit_For

    def visit_With(self, node: ast.With) -> None:
        for item in node.items:
            self.visit(item.context_expr)
            if item.optional_vars is not None:
                self._bind_target(item.optional_vars)
        for stmt in node.body:
            self.visit(stmt)

    visit_AsyncWith = visit_With

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name:
            self.bound.add(node.name)
        for stmt in node.body:
            self.visit(stmt)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        self._bind_target(node.target)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for expr in [*node.decorator_list, *node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(expr)
        self.bound.add(node.name)
        self._nested(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)
        self.bound.add(node.name)
        self._nested(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]:
            self.visit(expr)
        self._nested(ast.Expr(node))

    def _comprehension(self, node: ast.AST) -> None:
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        self._nested(ast.Expr(node))

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comprehension

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.bound.add(alias.asname or alias.name.split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name != "*":
                self.bound.add(alias.asname or alias.name)

    def visit_Global(self, node: ast.Global) -> None:
        return None


def analyse(source: str, ipython: bool = True) -> Names:
    """The global names ``source`` (a cell or a few statements) defines, and those it reads that it did
    not bind itself first (``for n in ...: use(n)`` reads no earlier ``n``)."""
    code = python_source(source) if ipython else source
    try:
        tree = ast.parse(code)
        table = symtable.symtable(code, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Names(parsed=False)
    defines: set[str] = set()
    for sym in table.get_symbols():
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
            defines.add(sym.get_name())
    defines |= _declared_global_assignments(table)
    reads = _Reads()
    try:
        for stmt in tree.body:
            reads.visit(stmt)
    except RecursionError:
        return Names(parsed=False)
    uses: set[str] = reads.free | (reads.deferred - defines)
    imported: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names):
            defines.add(STAR)
        if isinstance(node, ast.Import) and node in tree.body:
            for a in node.names:
                imported.setdefault(a.asname or a.name.split(".")[0], set()).add(a.name if a.asname else
                                                                               a.name.split(".")[0])
        if isinstance(node, ast.ImportFrom) and node in tree.body and node.level == 0:
            for a in node.names:
                imported.setdefault(a.asname or a.name, set()).add(f"{node.module}:{a.name}")
    # A name counts as imported only if every binding of it in the code is that one import.
    assigned_otherwise = {
        t.id for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For,
                                                      ast.With, ast.FunctionDef, ast.ClassDef))
        for t in ast.walk(n) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
    } | {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
    imports = tuple(sorted((name, next(iter(what))) for name, what in imported.items()
                           if len(what) == 1 and name not in assigned_otherwise))
    return Names(frozenset(defines), frozenset(uses), imports=imports)


def closure(candidates: dict[int, Names], roots: set[str], kept: set[int] | None = None) -> set[int]:
    """Indices of the candidate cells needed to define ``roots`` and, transitively, what those cells use.

    Order-insensitive on purpose: a function defined in an early cell may call one defined later.
    Cells with a star import are always kept, and so is ``kept``. A name that a kept cell binds by an
    import is not a reason to keep another cell that imports the same thing (``import torch`` in every
    cell); the earliest such cell is kept.
    """
    kept = set(kept or ()) | {i for i, names in candidates.items() if STAR in names.defines}
    needed = set(roots)
    for i in kept:
        needed |= candidates[i].uses
    changed = True
    while changed:
        changed = False
        provided = {pair for i in kept for pair in candidates[i].imports}
        for i in sorted(candidates):
            names = candidates[i]
            if i in kept:
                continue
            redundant = {name for name, what in names.imports if (name, what) in provided}
            if (names.defines - redundant) & needed:
                kept.add(i)
                needed |= names.uses
                provided |= set(names.imports)
                changed = True
    return kept
