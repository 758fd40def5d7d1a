"""Export and import of one user's memories, entity facts, entities and episodes as JSON lines."""

from memwrite.portability.delivery import INLINE_EXPORT_LIMIT, SpilledExportView, deliver_export
from memwrite.portability.format import EXPORT_FORMAT
from memwrite.portability.guards import ImportGuards, read_lines
from memwrite.portability.transfer import ImportReport, export_lines, import_user, parse_import

__all__ = [
    "EXPORT_FORMAT",
    "INLINE_EXPORT_LIMIT",
    "ImportGuards",
    "ImportReport",
    "SpilledExportView",
    "deliver_export",
    "export_lines",
    "import_user",
    "parse_import",
    "read_lines",
]
