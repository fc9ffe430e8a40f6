"""layoutcheck's interpreter-start hook: activates the debug mode when ``LAYOUTCHECK`` is set.

Installed at the top of site-packages with ``a0_layoutcheck.pth`` (its one
line calls `main` only when the variable is set, so a process without it
imports nothing) and ``a0_layoutcheck.start`` (PEP 829, Python 3.15+, which
calls `main` always: hence this module imports nothing at the top). The
names sort after editable-install path files (``__editable__...``), so the
package is importable when this runs.
"""

import os

OFF = ("", "0", "off", "false", "no")
"""Values of ``LAYOUTCHECK`` that mean off; as in ``layoutcheck.runtime.hooks.settings`` (a test keeps them equal)."""


_started = False


def main() -> None:
    """Activate the configured hooks if ``LAYOUTCHECK`` asks for it; never raise; once per process.

    Once: in a virtual environment on Linux, ``site`` can process the same
    site-packages twice (``lib64`` is a link to ``lib``), running this twice.
    """
    global _started
    if _started or os.environ.get("LAYOUTCHECK", "").strip().lower() in OFF:
        return
    _started = True
    try:
        from layoutcheck.runtime.activation.session import activate_from_environment
    except Exception as err:  # a broken install must not break every Python process
        import sys

        print(f"layoutcheck: LAYOUTCHECK is set but layoutcheck cannot be imported: {err}", file=sys.stderr)
        return
    activate_from_environment()
