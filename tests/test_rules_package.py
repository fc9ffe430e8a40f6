"""The rules a checkout lints with are its own `rules/`, whatever another install maps `layoutcheck.rules` to.

An editable install of another checkout maps ``layoutcheck.rules`` to that
checkout's ``rules/`` with a finder on ``sys.meta_path``; a checkout put first
on ``sys.path`` (``PYTHONPATH``) got its own ``layoutcheck`` and the other's
rules, so its rule tests and its generated rules page ran the other's code.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_OTHER_INSTALL = '''
import importlib.util, sys
from importlib.abc import MetaPathFinder

class OtherCheckout(MetaPathFinder):  # what an editable install of another checkout puts on sys.meta_path
    def find_spec(self, fullname, path=None, target=None):
        if fullname == "layoutcheck.rules":
            return importlib.util.spec_from_file_location(
                fullname, OTHER + "/__init__.py", submodule_search_locations=[OTHER])
        return None

sys.meta_path.insert(0, OtherCheckout())
sys.path.insert(0, ROOT)
import inspect
from layoutcheck.lint.registry import all_rules, rules_folder
print(sorted({str(__import__("pathlib").Path(inspect.getfile(r)).parent) for r in all_rules()}))
print(rules_folder())  # the folder the cache's signature stats
'''


def test_a_checkout_lints_with_its_own_rules_when_another_install_maps_them(tmp_path):
    other = tmp_path / "other" / "rules"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "stale_rule.py").write_text("raise RuntimeError('the other checkout rules were imported')\n")
    code = f"ROOT = {str(ROOT)!r}\nOTHER = {str(other)!r}\n" + textwrap.dedent(_OTHER_INSTALL)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [repr([str(ROOT / "rules")]), str(ROOT / "rules")], proc.stdout
    assert str(other) not in proc.stdout
