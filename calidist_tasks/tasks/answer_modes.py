"""What a task's answers are: option letters, or open numbers (GSM8K).

A classification task's answer names one of the document's c options by letter, "(a)" to "(e)",
read from the letters' log-probabilities (``CaliDistTask``) or from a generated reply
(``GenerationTask``). GSM8K's answer is an open number (``open_ended``): no option list, every
document in one class, the gold number in its own field. The task class holds one mode
(``CaliDistTask.answer_mode``) and asks it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from calidist_tasks.data.documents import Source


class OptionLetters:
    """Answers naming one of the document's options by letter."""

    def __init__(self, logits: bool) -> None:
        # whether the answer is read from the letters' log-probabilities, so that an earlier
        # stage's record of it holds them (``two_stage.Stage1Answers``)
        self.logits = logits

    def option_count(self, doc_to_choice: Any, doc: Mapping[str, Any]) -> int:
        """The document's number of options: the YAML's fixed list (``doc_to_choice``), or the
        field naming them; usable before lm-eval has finished building the task."""
        return len(doc_to_choice) if isinstance(doc_to_choice, list) else len(doc[doc_to_choice])

    def source(self, source: Source) -> Source:
        """Where the documents come from, as the YAML says (its labels index the options)."""
        return source


class OpenNumbers:
    """An open number written in a worked answer (GSM8K; docs/gsm8k.md): no options."""

    logits = False  # read from the worked answer's text

    def source(self, source: Source) -> Source:
        """``build_documents`` checks labels against a label space; an open answer has none, so
        every document is in the one class 0 and the gold number is in ``answer_field``."""
        process_row = source.process_row
        return replace(source, label_field="label", n_labels=1, answer_field="target",
                       process_row=lambda row: {**process_row(row), "label": 0})


LETTER_LOGITS = OptionLetters(logits=True)
LETTER_REPLIES = OptionLetters(logits=False)
AnswerMode = OptionLetters | OpenNumbers
