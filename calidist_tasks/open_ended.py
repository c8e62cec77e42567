"""Old module path, kept for task YAML files copied before the layout by concern.

Their ``class: !function calidist_tasks.open_ended....`` still resolves; the class now lives in
``calidist_tasks.tasks.gsm8k``.
"""

from calidist_tasks.tasks.gsm8k import OpenEndedTask

__all__ = ["OpenEndedTask"]
