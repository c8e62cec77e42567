"""Old module path, kept for task YAML files copied before the layout by concern.

Their ``class: !function calidist_tasks.reasoned....`` still resolves; the class now lives in
``calidist_tasks.tasks.reasoned``.
"""

from calidist_tasks.tasks.reasoned import ReasonedTask

__all__ = ["ReasonedTask"]
