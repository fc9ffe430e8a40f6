"""Everything is configured in pyproject.toml; this file only ships the debug-mode start-up files.

``startup/a0_layoutcheck.pth``, ``startup/a0_layoutcheck.start`` (PEP 829)
and ``startup/_layoutcheck_startup.py`` go to the top of site-packages, in
wheels and in editable installs alike: that is what makes ``LAYOUTCHECK=raise``
activate the hooks in any Python process with no code change
(`layoutcheck.runtime.activation.session`). A wheel gets them from ``build_py``; an
editable install (PEP 660) builds its wheel through another path, which
copies nothing but the package mapping, so ``editable_wheel`` adds them too.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

HERE = Path(__file__).parent
STARTUP_FILES = ("a0_layoutcheck.pth", "a0_layoutcheck.start", "_layoutcheck_startup.py")


class BuildWithStartupFiles(build_py):
    """``build_py``, plus the start-up files at the root of the build (the wheel's purelib)."""

    def run(self) -> None:
        super().run()
        if not self.editable_mode:
            for name in STARTUP_FILES:
                self.copy_file(str(HERE / "startup" / name), str(Path(self.build_lib, name)), preserve_mode=False)


class _WithStartupFiles:
    """An editable-install strategy that also writes the start-up files into the editable wheel."""

    def __init__(self, strategy):
        self._strategy = strategy

    def __enter__(self):
        self._strategy.__enter__()
        return self

    def __exit__(self, *exc):
        return self._strategy.__exit__(*exc)

    def __call__(self, wheel, files, mapping):
        self._strategy(wheel, files, mapping)
        for name in STARTUP_FILES:
            wheel.writestr(name, (HERE / "startup" / name).read_bytes())


class EditableWithStartupFiles(editable_wheel):
    def _select_strategy(self, name, tag, build_lib):
        return _WithStartupFiles(super()._select_strategy(name, tag, build_lib))


setup(cmdclass={"build_py": BuildWithStartupFiles, "editable_wheel": EditableWithStartupFiles})
