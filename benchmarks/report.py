"""Turn benchmarks/results/*.json into the book's appendix page performance.md and its figures.

    python -m benchmarks.report      # rewrite performance.md and benchmarks/figures/ from benchmarks/results/

`benchmarks.run` calls `write` with its own folders for an unrecorded run (benchmarks/out/).
"""

from __future__ import annotations

import base64
import json
import os
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from utils.plotting import OKABE_ITO, figure_png, label_axes, use_course_style  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
FIGURES = ROOT / "benchmarks" / "figures"
PAGE = ROOT / "performance.md"


def _load(name: str, results: Path | None = None) -> dict | None:
    path = (results or RESULTS) / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


# Where the figures of the page being rendered go, how the page links to them, and what each figure is
# (its figure_png metadata: the width to show it at, its smallest text, what covers what).
_figures: dict = {"folder": FIGURES, "link": "benchmarks/figures", "draw": False, "drawn": {}}


def _save(fig: plt.Figure, name: str, alt: str) -> list[str]:
    """The page's lines that show a figure: drawn as a notebook shows one (figure_png: a PNG at twice the
    width it is shown at, log axes in plain numbers), written only when the page is written (rendering
    alone changes no file), and shown at its drawn width, as the notebooks' figures are."""
    png, meta = figure_png(fig)
    plt.close(fig)
    _figures["drawn"][name] = meta
    if _figures["draw"]:
        _figures["folder"].mkdir(parents=True, exist_ok=True)
        (_figures["folder"] / name).write_bytes(base64.b64decode(png))
    return [f"```{{image}} {_figures['link']}/{name}", f":alt: {alt}", f":width: {meta['width']}px", "```", ""]


def _attention_section(data: dict) -> list[str]:
    rows = data["rows"]
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 4.2))
    for ax, key, title in ((axes[0], "ratio_course_sdpa_to_torch", "course attention / SDPA"),
                           (axes[1], "ratio_course_mha_fused_to_torch", "course MHA (fused) / torch MHA")):
        for (batch, pass_), colour in zip([(1, "forward"), (1, "forward+backward"), (4, "forward"),
                                           (4, "forward+backward")], OKABE_ITO.values()):
            pts = [(r["n"], r[key]) for r in rows if r["batch"] == batch and r["pass"] == pass_]
            if pts:
                ax.semilogx(*zip(*pts), "o-", color=colour, label=f"B={batch}, {pass_}", base=2)
        ax.axhline(1.0, color="grey", lw=1, ls=":")
        label_axes(ax, "sequence length N", "time ratio (median)", title)
    # one legend for both panels, below them: it covers no line
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncols=2)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
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
        *_save(fig, "attention_ratios.png", "Two line charts of time ratios against sequence length. Left: the "
               "course's attention divided by PyTorch's SDPA. Right: the course's fused multi-head attention "
               "divided by nn.MultiheadAttention, which stays close to 1."),
        "Columns: the time of the course's attention over SDPA's; of the course's multi-head attention (fused "
        "path, then teaching path) over nn.MultiheadAttention's; GFLOP/s of the course's attention and of SDPA.",
        "",
        "| B | N | pass | course / SDPA | MHA fused / torch | MHA teaching / torch | GFLOP/s course | GFLOP/s SDPA |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['batch']} | {r['n']} | {r['pass'].replace('+', ' + ')} | {r['ratio_course_sdpa_to_torch']:.2f} | "
                     f"{r['ratio_course_mha_fused_to_torch']:.3f} | {r['ratio_course_mha_teaching_to_torch']:.3f} | "
                     f"{r['gflops']['course_sdpa']:.1f} | {r['gflops']['torch_sdpa']:.1f} |")
    return lines + [""]


def _memory_section(data: dict) -> list[str]:
    rows = data["rows"]
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for (impl, mode), colour in zip([(i, m) for i in ("naive", "tiled", "sdpa") for m in ("forward", "training")],
                                    OKABE_ITO.values()):
        pts = [(r["n"], max(r["peak_mib"], 0.01)) for r in rows if r["impl"] == impl and r["mode"] == mode]
        ax.loglog(*zip(*pts), "o-" if mode == "training" else "s--", color=colour, label=f"{impl}, {mode}", base=2)
    label_axes(ax, "sequence length N", "peak memory growth (MiB)", "Peak memory of one attention call")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0))  # beside the axes: it covers no line
    fig.tight_layout()
    lines = ["## Peak memory: naive, tiled (chapter 8) and SDPA attention", "",
             f"Method: {data['method']}.", "",
             *_save(fig, "attention_memory.png", "Log-log chart of peak memory against sequence length: naive "
                    "attention grows with N squared, tiled and SDPA attention grow roughly linearly."),
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
    missing = [f"{folder}/{path.name}" for folder in ("solutions", "chapters")
               for path in sorted((ROOT / folder).glob("[0-9][0-9]_*.ipynb"))
               if f"{folder}/{path.name}" not in data["notebook_seconds"]]
    if missing:
        lines += ["", "Not in this record (no time measured on a quiet machine yet; `python -m benchmarks.run` adds them): "
                  + ", ".join(f"`{name}`" for name in missing) + "."]
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


def quick(results: Path | None = None) -> bool:
    """Whether any of the results comes from a quick run (`--quick`: sizes below the targets' own)."""
    return any((_load(name, results) or {}).get("quick") for name in ("attention", "tiled", "memory"))


def missed_targets(results: Path | None = None) -> list[str]:
    """The targets the results in ``results`` miss, one line each (empty: all met, not measured, or a
    quick run, whose sizes are not those the targets are defined at)."""
    if quick(results):
        return []
    return [f"{name}: {value} (bound {bound})" for name, bound, value, ok in _target_rows(results) if not ok]


def _targets(results: Path | None = None) -> list[str]:
    rows = _target_rows(results)
    if not rows:
        return []
    lines = ["## Targets", ""]
    if quick(results):
        lines += ["A quick run (`--quick`): its sizes are smaller than those the targets are defined at, so "
                  "the targets are not judged here.", ""]
    lines += ["| target | bound | measured | met |", "|---|---|---|---|"]
    lines += [f"| {name} | {bound} | {value} | "
              f"{'not judged (quick run)' if quick(results) else 'yes' if ok else 'no'} |"
              for name, bound, value, ok in rows]
    return lines + [""]


def _gpu_section(results: Path | None = None) -> list[str]:
    """The GPU results of `python -m benchmarks.gpu_check` (benchmarks/results/gpu.json), when there are some."""
    data = _load("gpu", results)
    lines = ["## On a GPU", ""]
    if data is None:
        return lines + [
            "Not measured in this build: no GPU was available. `python -m benchmarks.gpu_check` on a CUDA machine "
            "(`bash benchmarks/gpu_check.sh` where the Jupyter stack is missing) writes `benchmarks/results/gpu.json`, "
            "which this section then shows: chapter 11's Triton kernel against SDPA with its targets (bfloat16, "
            "causal, B = 4, H = 8, d = 64: forward + backward ≤ 1.5 × SDPA's time, forward ≤ 1.3 ×, peak memory "
            "≤ 1.2 ×) and TFLOP/s beside the chip's bfloat16 peak; naive, tiled, Triton and SDPA attention with "
            "CUDA peak memory up to N = 16384; the course's modules against PyTorch's; and every notebook executed "
            "on CUDA. The H200 figures recorded so far are quoted in chapter 11.", ""]
    run = data.get("run") or data.get("notebooks_run") or {}
    lines += [f"*Measured {run.get('date', '?')} on {run.get('device', '?')} with PyTorch {run.get('torch', '?')}.*", ""]
    flash = data.get("flash") or {}
    rows = [r for r in flash.get("versus_sdpa", []) if "ratios" in r]
    if rows:
        lines += ["### Chapter 11's Triton kernel against SDPA (bfloat16, causal, B = 4, H = 8, d = 64)", "",
                  f"bfloat16 peak: {flash.get('vendor_bf16_dense_tflops') or '?'} TFLOP/s (vendor, dense); "
                  f"a large matrix product measured {flash.get('measured_bf16_matmul_tflops', float('nan')):.0f} TFLOP/s.",
                  "", "| N | forward / SDPA (≤ 1.3) | forward+backward / SDPA (≤ 1.5) | peak memory / SDPA (≤ 1.2) "
                  "| TFLOP/s fwd+bwd Triton | TFLOP/s fwd+bwd SDPA | all targets met |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            ratios, tflops = r["ratios"], r["forward_backward_tflops"]
            lines.append(f"| {r['n']} | {ratios['forward_time']:.2f} | {ratios['forward_backward_time']:.2f} | "
                         f"{ratios['peak_memory']:.2f} | {tflops['triton']:.0f} | {tflops['sdpa']:.0f} | "
                         f"{'yes' if all(r['targets_met'].values()) else 'no'} |")
        ok = sum(bool(r.get("ok")) for r in flash.get("correctness", []))
        lines += ["", f"Compiled kernels equal to SDPA within the tolerance policy: {ok} of "
                      f"{len(flash.get('correctness', []))} cases.", ""]
    table = data.get("attention_table", [])
    if table:
        lines += ["### Attention, forward + backward, causal, B = 4, H = 8, d = 64", "",
                  "| N | dtype | method | ms | peak GB | TFLOP/s |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['n']} | {r['dtype'].removeprefix('torch.')} | {r['method']} | " + (
            f"{r['seconds'] * 1e3:.2f} | {r['peak_bytes'] / 1e9:.2f} | {r['tflops']:.1f} |" if "error" not in r
            else f"{r['error']} | | |") for r in table]
        lines.append("")
    modules = [r for r in data.get("modules", []) if "time_ratio" in r]
    if modules:
        lines += ["### The course's modules against PyTorch's, forward + backward, float32", "",
                  "| case | d_model | N | B | time ratio | peak-memory ratio |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['case']} | {r['d_model']} | {r['n']} | {r['batch']} | {r['time_ratio']:.2f} | "
                  f"{r['memory_ratio']:.2f} |" for r in modules]
        lines.append("")
    notebooks = data.get("notebooks", [])
    if notebooks:
        passed = sum(r["ok"] for r in notebooks)
        lines += [f"### Notebooks on CUDA: {passed} of {len(notebooks)} pass", "", "| notebook | result | seconds |",
                  "|---|---|---|"]
        lines += [f"| {r['notebook']} | {'pass' if r['ok'] else 'fail'} | {r['seconds']:.1f} |" for r in notebooks]
        lines.append("")
    return lines


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
    parts += _gpu_section(results)
    return "\n".join(parts)


README = ROOT / "README.md"
_CHAPTER_ROW = re.compile(r"^\| (\d\d) \| `\d\d_[a-z0-9_]+` \|.*\| ([^|]*) \|$")


def readme_with_run_times(text: str, results: Path | None = None) -> str:
    """README ``text`` with each chapter row's "runs in" cell set from the recorded notebook times: the
    learner notebook's seconds, rounded (``—`` where none is recorded)."""
    seconds = (_load("notebooks", results) or {}).get("notebook_seconds", {})
    by_chapter = {Path(name).name[:2]: value for name, value in seconds.items() if name.startswith("chapters/")}
    lines = []
    for line in text.split("\n"):
        row = _CHAPTER_ROW.match(line)
        if row:
            figure = f"{by_chapter[row[1]]:.0f} s" if row[1] in by_chapter else "—"
            line = line[: row.start(2)] + figure + " |"
        lines.append(line)
    return "\n".join(lines)


GRADING_BEGIN = ("<!-- the grading-time table and plan: written by `python -m benchmarks.report` from "
                 "benchmarks/results/grading_throughput.json; do not edit by hand -->")
GRADING_END = "<!-- end of the grading-time table and plan -->"


def readme_with_grading_plan(text: str, results: Path | None = None) -> str:
    """README ``text`` with the instructor's grading-time table and "a class of N takes about ..." sentence
    (between GRADING_BEGIN and GRADING_END) written from the recorded grading throughput."""
    from benchmarks import grading_throughput

    data = _load("grading_throughput", results)
    if data is None or GRADING_BEGIN not in text or GRADING_END not in text:
        return text
    head, rest = text.split(GRADING_BEGIN, 1)
    _, tail = rest.split(GRADING_END, 1)
    block = f"{grading_throughput.table(data)}\n\n{grading_throughput.plan(data)}"
    return f"{head}{GRADING_BEGIN}\n{block}\n\n{GRADING_END}{tail}"


def write_readme(results: Path = RESULTS, readme: Path = README) -> None:
    """Rewrite README's "runs in" column and its grading-time table and plan from ``results``."""
    readme.write_text(readme_with_grading_plan(readme_with_run_times(readme.read_text(), results), results))
    print(f"wrote {readme} (run times, grading times)")


if __name__ == "__main__":
    write()
    write_readme()
