"""Export and import of one user's memories, entity facts, entities and episodes as JSON lines."""

from memwrite.portability.delivery import INLINE_EXPORT_LIMIT, SpilledExportView, deliver_export
from memwrite.portability.records import (
    EXPORT_FORMAT,
    RestoreUnit,
    SpilledExport,
    StoredFactRow,
    StoredMemory,
    UserSnapshot,
)
from memwrite.portability.transfer import ImportReport, export_lines, import_user, parse_import

__all__ = [
    "EXPORT_FORMAT",
    "INLINE_EXPORT_LIMIT",
    "ImportReport",
    "RestoreUnit",
    "SpilledExport",
    "SpilledExportView",
    "StoredFactRow",
    "StoredMemory",
    "UserSnapshot",
    "deliver_export",
    "export_lines",
    "import_user",
    "parse_import",
]
