"""Turn benchmarks/results/*.json into the book's appendix page performance.md and its figures.

    python -m benchmarks.report      # rewrite performance.md and benchmarks/figures/ from benchmarks/results/

`benchmarks.run` calls `write` with its own folders for an unrecorded run (benchmarks/out/).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from utils.plotting import OKABE_ITO, label_axes, use_course_style  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
FIGURES = ROOT / "benchmarks" / "figures"
PAGE = ROOT / "performance.md"


def _load(name: str, results: Path | None = None) -> dict | None:
    path = (results or RESULTS) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


# Where the figures of the page being rendered go, and how the page links to them.
_figures: dict = {"folder": FIGURES, "link": "benchmarks/figures", "draw": False}


def _save(fig: plt.Figure, name: str) -> None:
    """Write a figure of the page (only when the page is written: rendering alone changes no file)."""
    if _figures["draw"]:
        _figures["folder"].mkdir(parents=True, exist_ok=True)
        fig.savefig(_figures["folder"] / name)
    plt.close(fig)


def _attention_section(data: dict) -> list[str]:
    rows = data["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, key, title in ((axes[0], "ratio_course_sdpa_to_torch", "course attention / torch SDPA"),
                           (axes[1], "ratio_course_mha_fused_to_torch", "course MHA (fused) / nn.MultiheadAttention")):
        for (batch, pass_), colour in zip([(1, "forward"), (1, "forward+backward"), (4, "forward"),
                                           (4, "forward+backward")], OKABE_ITO.values()):
            pts = [(r["n"], r[key]) for r in rows if r["batch"] == batch and r["pass"] == pass_]
            if pts:
                ax.semilogx(*zip(*pts), "o-", color=colour, label=f"B={batch}, {pass_}", base=2)
        ax.axhline(1.0, color="grey", lw=1, ls=":")
        label_axes(ax, "sequence length N", "time ratio (median, interleaved)", title)
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, "attention_ratios.png")
    lines = [
        "## Attention and multi-head attention against PyTorch",
        "",
        f"float32, h = {data['heads']}, d_k = {data['d_k']}, one thread; machine float32 matmul rate measured "
        f"in the same run: **{data['matmul_gflops']:.1f} GFLOP/s**. Ratios are medians of interleaved "
        "repetitions (1.00 = as fast as PyTorch); GFLOP/s use the fastest repetition. The teaching path of "
        f"the course's multi-head attention gives the same numbers as the fused path: "
        f"**{data['teaching_equals_fused']}**. The course's `scaled_dot_product_attention` is the teaching "
        "version: it builds the full N×N weight matrix (and returns it), so it falls further behind PyTorch's "
        "fused kernel as N grows; chapter 8 shows why and builds the tiled alternative measured below.",
        "",
        "![Two line charts of time ratios against sequence length. Left: the course's attention divided by "
        "PyTorch's SDPA. Right: the course's fused multi-head attention divided by nn.MultiheadAttention, "
        f"which stays close to 1.]({_figures['link']}/attention_ratios.png)",
        "",
        "| B | N | pass | course/torch SDPA | course MHA fused/torch | teaching/torch | GFLOP/s course SDPA | GFLOP/s torch SDPA |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['n']} | {r['pass']} | {r['ratio_course_sdpa_to_torch']:.2f} | "
                     f"{r['ratio_course_mha_fused_to_torch']:.3f} | {r['ratio_course_mha_teaching_to_torch']:.3f} | "
                     f"{r['gflops']['course_sdpa']:.1f} | {r['gflops']['torch_sdpa']:.1f} |")
    return lines + [""]


def _memory_section(data: dict) -> list[str]:
    rows = data["rows"]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for (impl, mode), colour in zip([(i, m) for i in ("naive", "tiled", "sdpa") for m in ("forward", "training")],
                                    OKABE_ITO.values()):
        pts = [(r["n"], max(r["peak_mib"], 0.01)) for r in rows if r["impl"] == impl and r["mode"] == mode]
        ax.loglog(*zip(*pts), "o-" if mode == "training" else "s--", color=colour, label=f"{impl}, {mode}", base=2)
    label_axes(ax, "sequence length N", "peak memory growth (MiB)", "Peak memory of one attention call")
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, "attention_memory.png")
    lines = ["## Peak memory: naive, tiled (chapter 8) and SDPA attention", "",
             f"Method: {data['method']}.", "",
             "![Log-log chart of peak memory against sequence length: naive attention grows with N squared, "
             f"tiled and SDPA attention grow roughly linearly.]({_figures['link']}/attention_memory.png)", "",
             "| N | mode | naive (MiB) | tiled (MiB) | SDPA (MiB) | one N×N float32 (MiB) |", "|---|---|---|---|---|---|"]
    for n in sorted({r["n"] for r in rows}):
        for mode in ("forward", "training"):
            get = {r["impl"]: r for r in rows if r["n"] == n and r["mode"] == mode}
            lines.append(f"| {n} | {mode} | {get['naive']['peak_mib']:.1f} | {get['tiled']['peak_mib']:.1f} | "
                         f"{get['sdpa']['peak_mib']:.1f} | {get['naive']['one_nxn_mib']:.1f} |")
    return lines + [""]


def _tiled_section(data: dict) -> list[str]:
    lines = ["## Forward time of the tiled attention (chapter 8)", "",
             "B = 1, h = 8, d_k = 64, float32, one thread; medians of interleaved repetitions.", "",
             "| N | tiled / SDPA | tiled / naive |", "|---|---|---|"]
    lines += [f"| {r['n']} | {r['ratio_tiled_to_sdpa']:.2f} | {r['ratio_tiled_to_naive']:.2f} |" for r in data["rows"]]
    return lines + [""]


def _notebook_section(data: dict) -> list[str]:
    lines = ["## Notebook execution times", "",
             f"Each notebook run on a fresh kernel with nbclient, one after the other (budget {data['budget_seconds']} s "
             f"each on 2 cores). Book build: **{data['book_build_seconds']:.1f} s**."]
    if "test_suite_seconds" in data:
        lines.append(f" Whole test suite: **{data['test_suite_seconds'] / 60:.1f} min**.")
    lines += ["", "| notebook | seconds |", "|---|---|"]
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in sorted(data["notebook_seconds"].items())]
    return lines + [""]


def _target_rows(results: Path | None = None) -> list[tuple[str, str, str, bool]]:
    """The performance targets of the course: (target, bound, measured, met), from ``results``."""
    attention, tiled, memory = _load("attention", results), _load("tiled", results), _load("memory", results)
    if not (attention and tiled and memory):
        return []
    mha = max(r["ratio_course_mha_fused_to_torch"] for r in attention["rows"] if r["pass"] == "forward+backward")
    n_max = max(r["n"] for r in memory["rows"])
    peak = {r["impl"]: r["peak_mib"] for r in memory["rows"] if r["n"] == n_max and r["mode"] == "training"}
    fwd = next(r["ratio_tiled_to_sdpa"] for r in tiled["rows"] if r["n"] == max(x["n"] for x in tiled["rows"]))
    n_fwd = max(x["n"] for x in tiled["rows"])
    rows = [
        ("course MHA, fused path, forward+backward / nn.MultiheadAttention (worst N, B)", "≤ 1.05", f"{mha:.3f}", mha <= 1.05),
        (f"tiled training peak / SDPA's at N = {n_max}", "≤ 2", f"{peak['tiled'] / peak['sdpa']:.2f}",
         peak["tiled"] <= 2 * peak["sdpa"]),
        (f"tiled training peak / naive's at N = {n_max}", "≤ 0.10", f"{peak['tiled'] / peak['naive']:.3f}",
         peak["tiled"] <= 0.1 * peak["naive"]),
        (f"tiled forward time / SDPA's at N = {n_fwd}", "≤ 1.5", f"{fwd:.2f}", fwd <= 1.5),
    ]
    return rows


def missed_targets(results: Path | None = None) -> list[str]:
    """The targets the results in ``results`` miss, one line each (empty: all met or not measured)."""
    return [f"{name}: {value} (bound {bound})" for name, bound, value, ok in _target_rows(results) if not ok]


def _targets(results: Path | None = None) -> list[str]:
    rows = _target_rows(results)
    if not rows:
        return []
    lines = ["## Targets", "", "| target | bound | measured | met |", "|---|---|---|---|"]
    lines += [f"| {name} | {bound} | {value} | {'yes' if ok else 'no'} |" for name, bound, value, ok in rows]
    return lines + [""]


def write(results: Path = RESULTS, figures: Path = FIGURES, page: Path = PAGE) -> Path:
    """Render the results in ``results`` to ``page``, with its figures in ``figures``; return ``page``."""
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(render(results, figures, page, draw=True))
    print(f"wrote {page}")
    return page


def render(results: Path = RESULTS, figures: Path = FIGURES, page: Path = PAGE, draw: bool = False) -> str:
    """The appendix page's text; with ``draw``, its figures are written to ``figures`` on the way."""
    _figures["draw"] = draw
    _figures["folder"] = figures
    _figures["link"] = Path(os.path.relpath(figures, page.parent)).as_posix()
    use_course_style()
    parts = ["# Performance", "",
             "Measured by `python -m benchmarks.run` on the machine named in each results file "
             "(`benchmarks/results/*.json`). Absolute times depend on the machine; the ratios, measured side "
             "by side in one run, are what to compare.", ""]
    parts += _targets(results)
    for name, section in (("attention", _attention_section), ("tiled", _tiled_section),
                          ("memory", _memory_section), ("notebooks", _notebook_section)):
        data = _load(name, results)
        if data is None:
            parts += [f"## {name.capitalize()}", "", "Not measured yet: run `python -m benchmarks.run`.", ""]
        else:
            parts += [f"*Measured {data['when']} with PyTorch {data['torch']}, Python {data['python']}.*", ""]
            parts += section(data)
    return "\n".join(parts)


if __name__ == "__main__":
    write()
