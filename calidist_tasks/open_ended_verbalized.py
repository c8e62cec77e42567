"""Old module path, kept for task YAML files copied before the layout by concern.

Their ``class: !function calidist_tasks.open_ended_verbalized....`` still resolves; the classes
now live in ``calidist_tasks.tasks.gsm8k_verbalized``.
"""

from calidist_tasks.tasks.gsm8k_verbalized import (
    ConsistencyOpenEndedTask,
    VerbalizedOpenEndedTask,
)

__all__ = ["VerbalizedOpenEndedTask", "ConsistencyOpenEndedTask"]
