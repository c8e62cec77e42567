"""Figures: reliability diagrams (vanilla and calibrated overlaid) and the paper's Figure 1.

Each figure function returns the data it drew (bins, counts, scores) so that tests can pin it
and ``figures.json`` can carry it beside the PNGs. matplotlib runs on the Agg backend (no
display needed).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from calidist_metrics import expected_calibration_error, reliability_bins

CONFIDENCE_BINS = 10  # as the ECE
MU_BINS = 5  # Figure 1: mu in [0, 0.2), ..., [0.8, 1.0]
VANILLA_COLOR, CALIBRATED_COLOR = "#9e9e9e", "#1f77b4"


def slug(text: str) -> str:
    """A file-name-safe version of a model, task or method name."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text).strip("_.") or "x"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ImportError("calidist report draws its figures with matplotlib, which is not "
                          "installed: pip install 'calidist[report]' (or pip install matplotlib)"
                          ) from None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bins_data(confidence: np.ndarray, correct: np.ndarray, n_bins: int) -> dict[str, list]:
    bins = reliability_bins(confidence, correct, n_bins=n_bins, strategy="uniform")
    return {"counts": bins.counts.astype(int).tolist(),
            "accuracy": bins.accuracy.round(6).tolist(),
            "mean": bins.mean_confidence.round(6).tolist(),
            "edges": bins.edges.round(6).tolist()}


def reliability_diagram(
    path: Path,
    title: str,
    method: str,
    confidence: np.ndarray,
    correct: np.ndarray,
    vanilla: np.ndarray | None = None,
    vanilla_correct: np.ndarray | None = None,
) -> dict[str, Any]:
    """Accuracy per confidence bin (10 equal-width bins), the method beside vanilla, counts below.

    ``vanilla_correct`` differs from ``correct`` only for a method that changes predictions
    (vector scaling).
    """
    plt = _pyplot()
    series = [(method, confidence, correct, CALIBRATED_COLOR)]
    if vanilla is not None:
        vc = correct if vanilla_correct is None else vanilla_correct
        series.insert(0, ("Vanilla", vanilla, vc, VANILLA_COLOR))
    data = {"n": int(correct.size), "series": {}}
    width = 1.0 / CONFIDENCE_BINS
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1.2]})
    top.plot([0, 1], [0, 1], ls="--", color="black", lw=1, label="perfect calibration")
    bar = width / len(series)
    for k, (label, conf, corr, color) in enumerate(series):
        bins = _bins_data(conf, corr, CONFIDENCE_BINS)
        ece = expected_calibration_error(conf, corr, n_bins=CONFIDENCE_BINS)
        data["series"][label] = {**bins, "ece": round(float(ece), 6)}
        left = np.asarray(bins["edges"][:-1]) + k * bar
        counts = np.asarray(bins["counts"])
        shown = counts > 0
        accuracy = np.asarray(bins["accuracy"])[shown]
        top.bar(left[shown], accuracy, width=bar, align="edge", color=color, alpha=0.85,
                edgecolor="black", lw=0.5, label=f"{label} (ECE {100 * ece:.2f})")
        # a dot on every non-empty bin, so that a bin with accuracy 0 is still seen
        top.scatter(left[shown] + bar / 2, accuracy, color=color, edgecolor="black", s=18,
                    zorder=3, clip_on=False)
        drawn = bottom.bar(left, counts, width=bar, align="edge", color=color, alpha=0.85,
                           edgecolor="black", lw=0.5)
        bottom.bar_label(drawn, labels=[str(c) if c else "" for c in counts], fontsize=7,
                         padding=1)
    top.set(xlim=(0, 1), ylim=(0, 1.05), ylabel="accuracy in bin")
    top.set_title(title, fontsize=10)
    top.legend(loc="upper left", fontsize=8)
    top.grid(alpha=0.3)
    bottom.set(xlabel="confidence (10 equal-width bins)", ylabel="documents")
    bottom.set_ylim(0, max(1, max(max(s["counts"]) for s in data["series"].values())) * 1.3)
    bottom.set_xticks(np.linspace(0, 1, CONFIDENCE_BINS + 1))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return data


def instability_figure(path: Path, title: str, mu: np.ndarray,
                       correct: np.ndarray) -> dict[str, Any]:
    """Figure 1 of the paper: accuracy of documents binned by prediction instability mu."""
    plt = _pyplot()
    bins = _bins_data(mu, correct, MU_BINS)
    counts = np.asarray(bins["counts"])
    edges = bins["edges"]
    labels = [f"[{edges[i]:.1f}, {edges[i + 1]:.1f}{']' if i == MU_BINS - 1 else ')'}"
              for i in range(MU_BINS)]
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    accuracy = np.where(counts > 0, bins["accuracy"], 0.0)
    drawn = ax.bar(range(MU_BINS), accuracy, color=CALIBRATED_COLOR, alpha=0.85,
                   edgecolor="black", lw=0.5)
    ax.bar_label(drawn, labels=[f"{a:.2f}\nn={c}" if c else "n=0"
                                for a, c in zip(accuracy, counts, strict=True)], fontsize=8)
    ax.set_xticks(range(MU_BINS), labels)
    ax.set(ylim=(0, 1.2), xlabel="prediction instability μ", ylabel="accuracy (original prompt)")
    ax.set_title(title, fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return {"n": int(correct.size), **bins}


def figure_title(model: str, task: str, parts: Sequence[str]) -> str:
    return f"{model} · {task}\n" + " · ".join(parts)
