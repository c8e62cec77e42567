"""Figures: reliability diagrams, risk-coverage curves and the paper's Figure 1.

Every figure is written twice, as ``<name>.png`` and as the vector ``<name>.pdf``. Each figure
function returns the numbers it drew, so that tests can pin them and ``figures.json`` can carry
them beside the files. matplotlib runs on the Agg backend (no display needed).

Reliability diagrams are drawn as calibration papers draw them (scikit-learn's
``CalibrationDisplay``, relplot): one marker per non-empty bin at (mean confidence, accuracy),
joined by a line, the diagonal, the gap to it shaded, a 95% Wilson interval per bin and the bin
counts in a small panel below; one panel per method of a task, side by side.
"""

from __future__ import annotations

import multiprocessing
import os
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from calidist_metrics import (
    accuracy_at_coverage,
    aurc,
    expected_calibration_error,
    maximum_calibration_error,
    reliability_bins,
    risk_coverage_curve,
    smooth_ece,
    smooth_ece_bandwidth,
)
from calidist_tasks.registry import SCORE_ENTRIES

CONFIDENCE_BINS = 10  # as the ECE
MU_BINS = 5  # Figure 1: mu in [0, 0.2), ..., [0.8, 1.0]
Z_95 = 1.959963984540054  # two-sided 95% normal quantile, for the Wilson interval
VANILLA_COLOR, CALIBRATED_COLOR, GAP_COLOR = "#616161", "#1f77b4", "#d62728"
CURVE_COLORS = ("#616161", "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2")
LINE_STYLES = ("-", "--", "-.", (0, (5, 1, 1, 1)), (0, (2, 1)))  # ":" is the oracle
FORMATS = (".png", ".pdf")  # raster and vector
PANEL_COLUMNS = 5  # reliability panels per row
COVERAGE_POINTS = np.round(np.linspace(0.1, 1.0, 10), 2)  # risk kept in figures.json
SCORE_TITLES = {s.name: f"{s.title} {s.arrow}" for s in SCORE_ENTRIES}
FEW_DOCUMENTS = 5  # a bin with fewer documents is drawn light: its accuracy says little
SMOOTH_POINTS = 101  # where the smooth reliability curve is evaluated

Series = tuple[str, np.ndarray, np.ndarray]  # (label, confidence, correct) per document


def slug(text: str) -> str:
    """A file-name-safe version of a model, task or method name."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_.") or "x"


def require_matplotlib() -> None:
    """Raise ImportError, saying what to do, when matplotlib is missing: called before any work."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ImportError("calidist report draws its figures with matplotlib, which is not "
                          "installed: pip install 'calidist[report]' (or pip install matplotlib),"
                          " or write the tables only with --no_figures (figures=False)"
                          ) from None


def _pyplot():
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _margins(fig, left: float, right: float, top: float, bottom: float) -> tuple[float, ...]:
    """Figure fractions (left, bottom, right, top) of margins given in inches."""
    width, height = fig.get_size_inches()
    return left / width, bottom / height, 1.0 - right / width, 1.0 - top / height


def _fixed_layout(fig, left: float = 0.7, right: float = 0.2, top: float = 0.6,
                  bottom: float = 0.55) -> None:
    """A one-axes figure's margins in inches (room for the tick labels, axis labels and a
    two-line title): fixed instead of matplotlib's constrained layout, which measures every
    text of the figure twice and was a third of the report's drawing time."""
    low_left, low, high_right, high = _margins(fig, left, right, top, bottom)
    fig.subplots_adjust(left=low_left, bottom=low, right=high_right, top=high)


def _grid(ax, axis: str = "both", alpha: float = 0.3) -> None:
    """``ax.grid(axis=axis, alpha=alpha)`` as one line collection per direction at the major
    ticks, which are fixed now (the automatic ones of the limits set): matplotlib's grid is a
    line per tick, redrawn with every tick at every draw, a quarter of a reliability figure's
    drawing time. Call it once the axes' limits are set."""
    from matplotlib import rcParams
    from matplotlib.ticker import FixedLocator

    style = {"colors": rcParams["grid.color"], "linewidths": rcParams["grid.linewidth"],
             "alpha": alpha, "zorder": 1.5}  # where matplotlib draws the grid (axisbelow "line")
    for name, drawn, across in (("x", ax.xaxis, ax.vlines), ("y", ax.yaxis, ax.hlines)):
        low, high = sorted(drawn.get_view_interval())
        ticks = [t for t in drawn.get_majorticklocs() if low - 1e-9 <= t <= high + 1e-9]
        drawn.set_major_locator(FixedLocator(ticks))
        if axis in (name, "both"):
            transform = ax.get_xaxis_transform() if name == "x" else ax.get_yaxis_transform()
            across(ticks, 0, 1, transform=transform, **style)


def _save(fig, base: Path, tight: bool = False) -> list[Path]:
    """``base``.png and ``base``.pdf (no creation date in the PDF: reruns give the same file);
    ``tight``: a legend wider than the figure grows the image instead of being cut off."""
    paths = [base.with_name(base.name + suffix) for suffix in FORMATS]
    if fig.get_layout_engine() is not None:  # a constrained layout: once for both formats
        fig.draw_without_rendering()
        fig.set_layout_engine("none")
    for path in paths:
        fig.savefig(path, dpi=110, bbox_inches="tight" if tight else None,
                    metadata={"CreationDate": None} if path.suffix == ".pdf" else None)
    fig.clf()
    return paths


class Drawing:
    """Figures being drawn (``start_drawing``): each job's figure function called on its
    arguments, in one forked process per CPU where there are two or more (drawing is CPU-bound:
    matplotlib's text layout), while the caller goes on (the report computes its tables
    meanwhile); ``results`` waits for the functions' returns, in the jobs' order."""

    def __init__(self, jobs: Sequence[tuple[Callable[..., dict[str, Any]], tuple]]) -> None:
        self.jobs = list(jobs)
        self.pool: ProcessPoolExecutor | None = None
        self.futures: list = []
        workers = min(len(self.jobs), os.cpu_count() or 1)
        if workers >= 2:
            self.pool = ProcessPoolExecutor(workers,
                                            mp_context=multiprocessing.get_context("fork"))
            self.futures = [self.pool.submit(function, *args) for function, args in self.jobs]

    def results(self) -> list[dict[str, Any]]:
        if self.pool is None:
            return [function(*args) for function, args in self.jobs]
        try:
            return [future.result() for future in self.futures]
        finally:
            self.close()

    def close(self) -> None:
        """Stop drawing (figures not started are dropped); nothing once ``results`` returned."""
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


def start_drawing(jobs: Sequence[tuple[Callable[..., dict[str, Any]], tuple]]) -> Drawing:
    """The figures of ``jobs`` drawn in the background where there are two or more CPUs
    (``Drawing``)."""
    return Drawing(jobs)


def draw_all(jobs: Sequence[tuple[Callable[..., dict[str, Any]], tuple]]) -> list[dict[str, Any]]:
    """Each job's figure function called on its arguments; their returns in the jobs' order
    (``Drawing``, waited for)."""
    return start_drawing(jobs).results()


def wilson_interval(successes: np.ndarray, counts: np.ndarray,
                    z: float = Z_95) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval of a binomial share, per bin (nan where the count is 0)."""
    successes, counts = np.asarray(successes, float), np.asarray(counts, float)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = successes / counts
        denominator = 1.0 + z * z / counts
        centre = (share + z * z / (2.0 * counts)) / denominator
        half = z * np.sqrt(share * (1.0 - share) / counts + z * z / (4.0 * counts ** 2)) \
            / denominator
    return np.clip(centre - half, 0.0, 1.0), np.clip(centre + half, 0.0, 1.0)


def _bins_data(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> dict[str, list]:
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy="uniform")
    return {"counts": bins.counts.astype(int).tolist(),
            "accuracy": bins.accuracy.round(6).tolist(),
            "mean": bins.mean_confidence.round(6).tolist(),
            "edges": bins.edges.round(6).tolist()}


def smooth_reliability(confidence: np.ndarray, correct: np.ndarray,
                       points: np.ndarray) -> dict[str, list[float]]:
    """relplot's smooth reliability curve: at each point t, the accuracy of the documents
    weighted by a Gaussian kernel around t (reflected at 0 and 1, smECE's kernel) of smECE's
    bandwidth sigma*, with a 95% band of a binomial share over the kernel's effective number
    of documents ((sum w)^2 / sum w^2). None where the kernel weights of all documents sum to
    less than one document at the point: no curve where no documents speak for it."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, float)
    sigma = smooth_ece_bandwidth(confidence, correct)
    weights = sum(np.exp(-0.5 * ((points[:, None] - mirror) / sigma) ** 2)
                  for mirror in (confidence, -confidence, 2.0 - confidence))
    total = weights.sum(axis=1)
    accuracy = weights @ correct / np.maximum(total, 1e-300)
    effective = total ** 2 / np.maximum((weights ** 2).sum(axis=1), 1e-300)
    half = Z_95 * np.sqrt(accuracy * (1.0 - accuracy) / np.maximum(effective, 1.0))

    def shown(values: np.ndarray) -> list[float | None]:
        return [round(float(v), 6) if weight >= 1.0 else None
                for v, weight in zip(values, total, strict=True)]

    return {"t": points.round(4).tolist(), "accuracy": shown(accuracy),
            "low": shown(np.clip(accuracy - half, 0, 1)),
            "high": shown(np.clip(accuracy + half, 0, 1)), "bandwidth": round(sigma, 6)}


def reliability_data(confidence: np.ndarray, correct: np.ndarray,
                     lower: float = 0.0) -> dict[str, Any]:
    """The numbers of one reliability panel: bins, Wilson interval per bin, ECE, smECE, MCE,
    and the smooth reliability curve on [``lower``, 1]."""
    data = _bins_data(confidence, correct, CONFIDENCE_BINS)
    counts = np.asarray(data["counts"])
    low, high = wilson_interval(np.asarray(data["accuracy"]) * counts, counts)

    def shown(values: np.ndarray) -> list[float | None]:
        return [None if c == 0 else round(float(v), 6) for c, v in zip(counts, values, strict=True)]

    return {**data, "wilson_low": shown(low), "wilson_high": shown(high),
            "ece": round(expected_calibration_error(confidence, correct, CONFIDENCE_BINS), 6),
            "smece": round(smooth_ece(confidence, correct), 6),
            "mce": round(maximum_calibration_error(confidence, correct, CONFIDENCE_BINS), 6),
            "smooth": smooth_reliability(confidence, correct,
                                         np.linspace(lower, 1.0, SMOOTH_POINTS))}


def confidence_floor(series: Sequence[Series]) -> float:
    """The left end of the confidence axis: the lowest confidence, down to a tenth (a top-label
    confidence is at least 1/c, so a binary task's diagrams start at 0.5)."""
    lowest = min(float(np.min(c)) for _, c, _ in series if np.size(c))
    return max(0.0, np.floor(10 * lowest + 1e-9) / 10)


def _reliability_panel(top, bottom, label: str, data: dict[str, Any], color: str,
                       lower: float = 0.0) -> None:
    counts = np.asarray(data["counts"])
    full = counts > 0
    mean, accuracy = np.asarray(data["mean"])[full], np.asarray(data["accuracy"])[full]
    low = np.asarray(data["wilson_low"], dtype=float)[full]
    high = np.asarray(data["wilson_high"], dtype=float)[full]
    few = counts[full] < FEW_DOCUMENTS
    smooth = {key: np.asarray(value, dtype=float) for key, value in data["smooth"].items()
              if key != "bandwidth"}
    top.plot([0, 1], [0, 1], ls="--", color="black", lw=0.8, label="perfect calibration")
    top.fill_between(smooth["t"], smooth["low"], smooth["high"], color=color, alpha=0.12, lw=0)
    top.plot(smooth["t"], smooth["accuracy"], color=color, lw=1.0, alpha=0.7,
             label="smooth (smECE kernel), 95% band")
    top.vlines(mean, np.minimum(mean, accuracy), np.maximum(mean, accuracy), color=GAP_COLOR,
               lw=5, alpha=0.3, label="gap to the diagonal")
    top.plot(mean, accuracy, ls=":", color=color, lw=0.9)
    for shown, alpha, text in ((~few, 1.0, "accuracy, 95% Wilson"),
                               (few, 0.3, f"bin of < {FEW_DOCUMENTS} documents")):
        if shown.any():
            top.errorbar(mean[shown], accuracy[shown], fmt="o", color=color, alpha=alpha,
                         yerr=[accuracy[shown] - low[shown], high[shown] - accuracy[shown]],
                         ms=4.5, elinewidth=0.9, capsize=2.5, label=text)
    top.set(xlim=(lower - 0.02, 1.02), ylim=(-0.02, 1.02))
    top.set_title(f"{label}\nECE {100 * data['ece']:.2f} · smECE {100 * data['smece']:.2f} · "
                  f"MCE {100 * data['mce']:.2f}", fontsize=9)
    top.tick_params(labelbottom=False, labelsize=8)
    _grid(top)  # after the tick labels' size: it decides how many ticks fit
    edges = np.asarray(data["edges"])
    drawn = bottom.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color=color,
                       alpha=0.6, edgecolor="black", lw=0.4)
    bottom.bar_label(drawn, labels=[str(c) if c else "" for c in counts], fontsize=6, padding=1)
    bottom.set_ylim(0, max(1, counts.max()) * 1.35)
    bottom.set_xlim(lower - 0.02, 1.02)
    bottom.set_xlabel("confidence", fontsize=8)
    bottom.tick_params(labelsize=7)


# the reliability figure's fixed layout, in inches: margins for the suptitle and the panel
# titles above (two lines each), the axis labels left and below; between a panel's diagram and
# its counts (no tick labels there); between the panels of a row and between rows
PANEL_MARGINS = {"left": 0.62, "right": 0.12, "top": 1.02, "bottom": 0.5}
PANEL_GAPS = {"counts": 0.08, "across": 0.42, "down": 1.0}


def _panel_places(fig, rows: int, columns: int) -> list[list[tuple[list[float], list[float]]]]:
    """Per row and column: the [left, bottom, width, height] of the diagram and of its counts
    below, in figure fractions (a fixed layout: see ``_fixed_layout``)."""
    width, height = fig.get_size_inches()
    m, gap = PANEL_MARGINS, PANEL_GAPS
    cell = (width - m["left"] - m["right"] - (columns - 1) * gap["across"]) / columns
    tall = (height - m["top"] - m["bottom"] - (rows - 1) * gap["down"]) / rows
    diagram, counts = (tall - gap["counts"]) * 3.2 / 4.2, (tall - gap["counts"]) / 4.2
    places = []
    for row in range(rows):
        ceiling = height - m["top"] - row * (tall + gap["down"])  # the diagram's top, inches
        places.append([
            ([(x := m["left"] + col * (cell + gap["across"])) / width,
              (ceiling - diagram) / height, cell / width, diagram / height],
             [x / width, (ceiling - diagram - gap["counts"] - counts) / height, cell / width,
              counts / height])
            for col in range(columns)])
    return places


def reliability_figure(base: Path, title: str, series: Sequence[Series],
                       first_is_vanilla: bool = False) -> dict[str, Any]:
    """One figure per task: a reliability panel per method, counts below each; the first panel
    is drawn grey when it is the model's own (uncalibrated) confidence.

    Writes ``base``.png and ``base``.pdf; returns ``{"panels": {label: reliability_data}}``.
    """
    plt = _pyplot()
    columns = min(len(series), PANEL_COLUMNS)
    rows = -(-len(series) // columns)
    fig = plt.figure(figsize=(3.1 * columns + 0.4, 4.3 * rows + 0.7))
    places = _panel_places(fig, rows, columns)
    panels: dict[str, Any] = {}
    lower = confidence_floor(series)
    for k, (label, confidence, correct) in enumerate(series):
        row, col = divmod(k, columns)
        top = fig.add_axes(places[row][col][0])
        bottom = fig.add_axes(places[row][col][1], sharex=top)
        panels[label] = reliability_data(confidence, correct, lower)
        color = VANILLA_COLOR if k == 0 and first_is_vanilla else CALIBRATED_COLOR
        _reliability_panel(top, bottom, label, panels[label], color, lower)
        if col == 0:
            top.set_ylabel("accuracy in bin", fontsize=8)
            bottom.set_ylabel("documents", fontsize=8)
        if k == 0:
            top.legend(loc="upper left", fontsize=6.5, framealpha=0.85)
    fig.suptitle(title, fontsize=10, y=1.0 - 0.1 / fig.get_figheight(), va="top")
    _save(fig, base)
    plt.close(fig)
    return {"panels": panels}


def risk_coverage_figure(base: Path, title: str, series: Sequence[Series]) -> dict[str, Any]:
    """Selective prediction: error rate of the most confident documents against their share.

    One curve per method (AURC and accuracy at 80% coverage in the legend), the oracle (wrong
    documents last) dashed; ``base``.png and ``base``.pdf. Returns per method its AURC,
    accuracy at 80% coverage and the risk at coverage 0.1, ..., 1.0.
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    _fixed_layout(fig)
    curves: dict[str, Any] = {}
    for k, (label, confidence, correct) in enumerate(series):
        coverage, risk = risk_coverage_curve(confidence, correct)
        area, at_80 = aurc(confidence, correct), accuracy_at_coverage(confidence, correct, 0.8)
        kept = np.maximum(1, np.ceil(COVERAGE_POINTS * risk.size - 1e-9).astype(int))
        curves[label] = {"aurc": round(area, 6), "acc_at_80_coverage": round(at_80, 6),
                         "coverage": COVERAGE_POINTS.tolist(),
                         "risk": risk[kept - 1].round(6).tolist()}
        # methods that keep the ranking (a monotone map) draw the same curve: each later one
        # is thinner and dashed differently, so that all stay visible on top of each other
        ax.plot(coverage, risk, lw=max(0.9, 2.6 - 0.45 * k), ls=LINE_STYLES[k % len(LINE_STYLES)],
                color=CURVE_COLORS[k % len(CURVE_COLORS)],
                label=f"{label} (AURC {100 * area:.2f}, acc@80% {100 * at_80:.2f})")
    correct = np.asarray(series[0][2], float)
    oracle = np.maximum(0.0, np.arange(1, correct.size + 1) - correct.sum()) \
        / np.arange(1, correct.size + 1)
    ax.plot(np.arange(1, correct.size + 1) / correct.size, oracle, ls=":", color="black",
            lw=1.1, label=f"oracle for {series[0][0]} (wrong last)")
    ax.axvline(0.8, ls="-", color="gray", lw=0.6, alpha=0.6)
    top = max(float(risk_coverage_curve(c, y)[1].max()) for _, c, y in series)
    ax.set(xlim=(0, 1), ylim=(0, min(1.02, max(0.05, 1.1 * top))),
           xlabel="coverage (share of documents kept, most confident first)",
           ylabel="risk (error rate of the kept documents)")
    ax.set_title(title, fontsize=10)
    _grid(ax)
    ax.legend(fontsize=7, loc="upper left")
    _save(fig, base)
    plt.close(fig)
    return {"curves": curves}


def instability_figure(base: Path, title: str, mu: np.ndarray,
                       correct: np.ndarray) -> dict[str, Any]:
    """Figure 1 of the paper: accuracy of documents binned by prediction instability mu."""
    plt = _pyplot()
    bins = _bins_data(mu, correct, MU_BINS)
    counts = np.asarray(bins["counts"])
    edges = bins["edges"]
    labels = [f"[{edges[i]:.1f}, {edges[i + 1]:.1f}{']' if i == MU_BINS - 1 else ')'}"
              for i in range(MU_BINS)]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    _fixed_layout(fig)
    accuracy = np.where(counts > 0, bins["accuracy"], 0.0)
    drawn = ax.bar(range(MU_BINS), accuracy, color=CALIBRATED_COLOR, alpha=0.85,
                   edgecolor="black", lw=0.5)
    ax.bar_label(drawn, labels=[f"{a:.2f}\nn={c}" if c else "n=0"
                                for a, c in zip(accuracy, counts, strict=True)], fontsize=8)
    ax.set_xticks(range(MU_BINS), labels)
    ax.set(ylim=(0, 1.2), xlabel="prediction instability μ", ylabel="accuracy (original prompt)")
    ax.set_title(title, fontsize=10)
    _grid(ax, "y")
    _save(fig, base)
    plt.close(fig)
    return {"n": int(correct.size), **bins}


def figure_title(model: str, task: str, parts: Sequence[str]) -> str:
    return f"{model} · {task}\n" + " · ".join(parts)


def models_figure(base: Path, title: str,
                  values: dict[str, dict[str, dict[str, tuple[float, float, float]]]]
                  ) -> dict[str, Any]:
    """Models side by side on one benchmark: a panel per score (ECE, Brier, AUROC), a group of
    bars per method, one bar per model (block) with its 95% bootstrap interval.

    ``values[score][method][model]`` = (value, low, high), x100. Writes ``base``.png and .pdf
    and returns the values drawn."""
    plt = _pyplot()
    scores = list(values)
    methods = list(dict.fromkeys(m for s in scores for m in values[s]))
    models = list(dict.fromkeys(b for s in scores for m in values[s] for b in values[s][m]))
    fig, axes = plt.subplots(1, len(scores), figsize=(4.2 * len(scores), 3.2 + 0.2 * len(methods)),
                             layout="constrained", squeeze=False)
    width = 0.8 / max(1, len(models))
    for ax, score in zip(axes[0], scores, strict=True):
        for k, model in enumerate(models):
            shown = [(i, values[score][m][model]) for i, m in enumerate(methods)
                     if model in values[score].get(m, {})]
            if not shown:
                continue
            y = np.array([i for i, _ in shown]) - 0.4 + width * (k + 0.5)
            value = np.array([v[0] for _, v in shown])
            # a biased score's interval need not contain its estimate: no negative whisker
            error = np.maximum(0.0, [value - [v[1] for _, v in shown],
                                     [v[2] for _, v in shown] - value])
            ax.barh(y, value, height=width, xerr=error, capsize=2,
                    color=CURVE_COLORS[k % len(CURVE_COLORS)], alpha=0.85, label=model,
                    error_kw={"elinewidth": 0.8})
        ax.set_yticks(range(len(methods)), methods, fontsize=8)
        ax.invert_yaxis()
        ax.set_xlabel(f"{SCORE_TITLES.get(score, score)} ×100 (95% bootstrap interval)",
                      fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    # as many columns as the labels fit across the figure (~13 characters per inch at size 7)
    across = int(13 * fig.get_figwidth()) // (max(map(len, labels), default=1) + 6)
    fig.legend(handles, labels, fontsize=7, loc="outside lower center",
               ncols=max(1, min(3, len(models), across)))
    fig.suptitle(title, fontsize=10)
    _save(fig, base, tight=True)  # the legend names the blocks: it can be the widest part
    plt.close(fig)
    return {"values": {s: {m: {b: [round(x, 4) for x in v] for b, v in values[s][m].items()}
                           for m in values[s]} for s in scores}}
