"""The model budget (docs/budget.md): token buckets shared by every worker, per model and per
tenant, that every model call is charged to before it is sent."""

from memwrite.budget.budget import (
    Admission,
    Caller,
    Grant,
    Lane,
    ModelBudget,
    caller_of,
    calling_for,
    current_caller,
)
from memwrite.budget.ports import BucketRecord, BudgetStore

__all__ = [
    "Admission",
    "BucketRecord",
    "BudgetStore",
    "Caller",
    "Grant",
    "Lane",
    "ModelBudget",
    "caller_of",
    "calling_for",
    "current_caller",
]
