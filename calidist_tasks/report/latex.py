"""LaTeX (booktabs) versions of the report's tables, to paste into a paper.

``\\usepackage{booktabs}`` is all they need. Marked cells are bold, missing ones "--"; the
caption carries the legend (scale, documents, what bold means, where the intervals are).
"""

from __future__ import annotations

from calidist_tasks.report.tables import Table

# characters of names and titles that LaTeX would read as markup, and symbols of the tables
LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#",
           "_": r"\_", "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}",
           "^": r"\textasciicircum{}", "↓": r"$\downarrow$", "↑": r"$\uparrow$",
           "†": r"$^\dagger$", "⚠": r"$^{!}$", "×": r"$\times$", "Δ": r"$\Delta$",
           "–": "--", "−": "--", "μ": r"$\mu$", "≥": r"$\geq$", "<": r"$<$", ">": r"$>$"}


def latex_escape(text: str) -> str:
    """``text`` as LaTeX source that prints it (names from files cannot add markup)."""
    return "".join(LATEX_ESCAPES.get(char, char) for char in " ".join(text.split()))


def latex_table(table: Table, caption: str, label: str) -> str:
    """A ``table`` float with a booktabs ``tabular`` of ``table`` (numbers at its digits)."""
    def cell(i: int, j: int, value) -> str:
        text = table.shown(value, latex_escape, "--")
        return rf"\textbf{{{text}}}" if (i, j) in table.marks else text

    numeric = table.numeric()
    lines = [r"\begin{table*}[t]", r"\centering", r"\small",
             r"\begin{tabular}{" + "".join("r" if n else "l" for n in numeric) + "}",
             r"\toprule",
             " & ".join(latex_escape(c) for c in table.columns) + r" \\",
             r"\midrule"]
    previous = None
    for i, row in enumerate(table.rows):
        if previous is not None and row[0] != previous:  # a rule between the blocks
            lines.append(r"\midrule")
        previous = row[0]
        lines.append(" & ".join(cell(i, j, v) for j, v in enumerate(row)) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_escape(caption)}}}",
              rf"\label{{{label}}}", r"\end{table*}"]
    return "\n".join(lines) + "\n"
