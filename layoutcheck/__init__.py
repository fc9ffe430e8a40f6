"""layoutcheck: keeps padded-sequence layouts honest in LLM training code.

The public names are re-exported here explicitly. Importing layoutcheck
never imports torch: the runtime imports it lazily, and the lint path
(``layoutcheck check``, the pre-commit hook) never does.
"""

from layoutcheck.errors import ConfigError, LayoutcheckError, LayoutError, LayoutSpecError, Violation
from layoutcheck.geometry import PaddedGeometry, alignment_unit

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "LayoutError",
    "LayoutSpecError",
    "LayoutcheckError",
    "PaddedGeometry",
    "Violation",
    "__version__",
    "alignment_unit",
]
