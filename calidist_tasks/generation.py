"""Old module path, kept for task YAML files copied before the layout by concern.

Their ``class: !function calidist_tasks.generation....`` still resolves; the class now lives in
``calidist_tasks.tasks.generation``.
"""

from calidist_tasks.tasks.generation import GenerationTask

__all__ = ["GenerationTask"]
