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


def analyse(source: str, ipython: bool = True) -> Names:
    """The global names ``source`` (a cell or a few statements) defines and uses."""
    code = python_source(source) if ipython else source
    try:
        tree = ast.parse(code)
        table = symtable.symtable(code, "<cell>", "exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return Names(parsed=False)
    defines: set[str] = set()
    uses: set[str] = set()
    for sym in table.get_symbols():
        name = sym.get_name()
        if sym.is_assigned() or sym.is_imported() or sym.is_namespace():
            defines.add(name)
        if sym.is_referenced():
            uses.add(name)
    uses |= _nested_globals(table)
    defines |= _declared_global_assignments(table)
    imported: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            uses.add(node.target.id)  # x += 1 reads x
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
