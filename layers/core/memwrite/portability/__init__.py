"""Export and import of one user's memories, entity facts, entities and episodes as JSON lines."""

from memwrite.portability.records import (
    EXPORT_FORMAT,
    RestoreUnit,
    StoredFactRow,
    StoredMemory,
    UserSnapshot,
)
from memwrite.portability.transfer import ImportReport, export_lines, import_user, parse_import

__all__ = [
    "EXPORT_FORMAT",
    "ImportReport",
    "RestoreUnit",
    "StoredFactRow",
    "StoredMemory",
    "UserSnapshot",
    "export_lines",
    "import_user",
    "parse_import",
]
