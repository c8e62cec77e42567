"""Old module path, kept for task YAML files copied before the layout by concern.

Their ``class: !function calidist_tasks.task....`` still resolves; the class now lives in
``calidist_tasks.tasks.base``.
"""

from calidist_tasks.tasks.base import CaliDistTask

__all__ = ["CaliDistTask"]
