"""The per-file phase: one traversal of one file's `ast` into its `FileFacts`.

`extract` parses with the standard library's `ast` (positions included) and
walks the tree once, statement by statement, keeping the flow state of
`layoutcheck.model.flow` (locals, branch joins, what each value derives
from, which layout a branch serves). Before each function is walked,
`layoutcheck.model.uses` reads what its body does with each name and field;
after it, the function-level checks of `layoutcheck.model.partners` read
its statements, each only where the function's text spells what the check
matches (`partners.SPELLINGS`).
On the way it records what the file says about padded layouts
(`layoutcheck.model.facts`): definitions and their signatures, which
parameters a function uses as a layout kind, a padded length or a true
length, calls with what each argument derives from, stores into fields,
pads and round-ups with their units and where their values go, broadcasts,
per-sample entries read as batch lengths, rewrites of per-sample fields,
per-sample transforms of fields, and the literals the bucket rule judges.

What a value *is* comes from how it is computed and used, never from its
name: the names the settings configure are hints that add a recognition.
What a field holds is the project's question (several files write and read
it): the facts keep the field names, and `layoutcheck.model.spaces` answers.

This module holds the entry points (`extract`, `extract_tree`), the drivers
of the walk (a deep file is walked again in a thread with a large stack) and
the extractor that composes the walk's stages, each a mixin in its own module
named for what it visits: `statements` (blocks, branches, loops, ``try``,
``assert``), `definitions` (``def``/``class``, and the checks run when a
function's walk ends), `stores` (assignments, field writes, rewrites,
broadcasts), `expressions` (``scan``, subscripts, pads), `callsites` (calls
and returns), with `clashes`, `literals`, `padsides` and `summaries`; what
they share is `walkstate` (a function's state), `joins` (branch joins),
`predicates` (small syntax predicates), `callnames` and `modulereaders`.

Why `ast` and not libcst: the facts need no concrete syntax, and CPython's
parser builds its tree about 8x faster than libcst's (measured in the README's
development section), which is what the cold-run targets need.
"""

from __future__ import annotations

import ast
import sys
import warnings
from typing import Any

from layoutcheck.model.callbackroll import callback_summaries
from layoutcheck.model.calls import methods_assigned, rewrite_calls
from layoutcheck.model.callsites import CallSitesMixin
from layoutcheck.model.clashes import ClashesMixin
from layoutcheck.model.definitions import DefinitionsMixin
from layoutcheck.model.expressions import ExpressionsMixin
from layoutcheck.model.facts import Broadcast, FileFacts, Function
from layoutcheck.model.flow import Flow, Frame
from layoutcheck.model.literals import LiteralsMixin
from layoutcheck.model.modulereaders import read_module, shifters_of_module
from layoutcheck.model.objectcalls import assigned_onto_classes
from layoutcheck.model.origins import origins_and_instances
from layoutcheck.model.sidedefault import side_summaries
from layoutcheck.model.packedrows import packed_rows
from layoutcheck.model.pieceroll import piece_summaries
from layoutcheck.model.padsides import SidesMixin
from layoutcheck.model.reuse import FunctionMemo
from layoutcheck.model.settings import LintSettings
from layoutcheck.model.statements import StatementsMixin
from layoutcheck.model.stores import StoresMixin
from layoutcheck.model.summaries import SummaryMixin
from layoutcheck.model.syntax import Source
from layoutcheck.model.uses import body_uses
from layoutcheck.model.vocabulary import vocabulary
from layoutcheck.model.walkstate import FunctionState

__all__ = ["extract", "extract_tree"]


def extract(source: str, settings: LintSettings, memo: FunctionMemo | None = None) -> FileFacts:
    """The facts of one file's text; a file that does not parse gives only its syntax error. ``memo``
    holds the records of the file's previous extraction, whose unchanged leading functions are not
    walked again (`layoutcheck.model.reuse`), and gets this one's."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes etc. are not ours to report
            tree = ast.parse(source)
    except SyntaxError as exc:
        return FileFacts(syntax_error=(exc.lineno, exc.offset, exc.msg))
    except (ValueError, MemoryError) as exc:  # a null byte, and the like
        return FileFacts(syntax_error=(None, None, str(exc)))
    except RecursionError:
        return FileFacts(syntax_error=(None, None, "code is nested too deeply to parse"))
    return extract_tree(tree, source, settings, memo)


_DEEP_STACK = 256 * 1024 * 1024
"""Bytes of stack for the thread that walks a file too deep for the default recursion limit."""
_DEEP_LIMIT = 30_000
"""The recursion limit of that walk: ``ast.parse`` builds trees up to 3x the default limit (1000) deep,
and the walk recurses a few frames per level."""


def extract_tree(tree: ast.Module, source: str, settings: LintSettings,
                 memo: FunctionMemo | None = None) -> FileFacts:
    """The facts of an already parsed file."""
    tree, rewritten = rewrite_calls(tree, source)
    if rewritten:
        memo = None  # a rewrite reads the whole module: no function's facts stand on its text alone
    try:
        facts = _walk(tree, source, settings, memo)
        if memo is not None:
            memo.seal()
    except RecursionError:
        if memo is not None:
            memo.abandon()  # the records of a walk cut short: none kept
        # Python parses deeper than the walk recurses (a chain of several hundred `+` already): walk
        # again where it may recurse deeper, which costs only such files.
        try:
            facts = _walk_deep(tree, source, settings)
        except (RecursionError, MemoryError, RuntimeError):
            return FileFacts(syntax_error=(None, None, "code is nested too deeply to walk: not checked (split "
                                                       "its deepest expression, or leave the file out with "
                                                       "`exclude`)"))
    facts.extracted = True
    facts.assigned_methods = methods_assigned(tree, source)
    return facts


def _walk(tree: ast.Module, source: str, settings: LintSettings, memo: FunctionMemo | None = None) -> FileFacts:
    extractor = _Extractor(source, settings, memo)
    extractor.run(tree)
    return extractor.facts


def _walk_deep(tree: ast.Module, source: str, settings: LintSettings) -> FileFacts:
    """`_walk` in a thread with a large stack and a raised recursion limit, both restored after.

    The limit is the interpreter's, not the thread's: raised only while this thread walks (the
    caller waits for it), and the large stack keeps the C recursion beneath it from overflowing.
    """
    import threading

    outcome: list[FileFacts | BaseException] = []

    def work() -> None:
        try:
            outcome.append(_walk(tree, source, settings))
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    limit = sys.getrecursionlimit()
    try:
        size = threading.stack_size(_DEEP_STACK)
    except (ValueError, RuntimeError):  # a platform whose threads take no stack size
        raise RecursionError("no thread with a large stack here") from None
    try:
        thread = threading.Thread(target=work, name="layoutcheck-deep-walk")
        sys.setrecursionlimit(max(limit, _DEEP_LIMIT))
        thread.start()
        thread.join()
    finally:
        threading.stack_size(size)
        sys.setrecursionlimit(limit)
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result


class _Extractor(StatementsMixin, DefinitionsMixin, StoresMixin, ExpressionsMixin, CallSitesMixin,
                 ClashesMixin, LiteralsMixin, SidesMixin, SummaryMixin, Flow):
    """One file's walk: the stages' mixins over the flow state (`Flow`), and the state they share.

    The stages, each a mixin in its own module: statements (`layoutcheck.model.statements`),
    ``def``/``class`` and the function-end checks (`definitions`), stores (`stores`),
    expressions (`expressions`), calls and returns (`callsites`), clashes (`clashes`),
    literals (`literals`), pad sides (`padsides`) and return summaries (`summaries`).
    """

    def __init__(self, source: str, settings: LintSettings, memo: FunctionMemo | None = None) -> None:
        super().__init__(vocabulary(settings))
        self.memo = memo
        """The records of the file's previous extraction, and this one's (`layoutcheck.model.reuse`)."""
        self.settings = settings
        self.source = Source(source)
        self.facts = FileFacts()
        self.tick = 0
        self.states: list[FunctionState] = []
        self.qual: list[str] = []
        self.classes: list[tuple[str, bool]] = []
        self.class_facts: list[tuple[str, tuple[str, ...]]] = []
        self.in_test = 0
        """Inside an ``assert`` or an ``if`` test: reading an entry there is a check, not a use."""
        self.expecting_error = 0
        self.claimed: set[int] = set()
        """Nodes inside an idiom already recorded: their parts are not judged again."""
        self.synthetic: list[ast.AST] = []
        """Comprehensions standing for lists built by loops (`built_by_loop`), kept alive while the walk
        may read them (classifications are cached by node id)."""
        self.broadcasts: dict[int, Broadcast] = {}
        """Broadcasts by their origin node: a later store into a field retargets the one recorded."""
        self.mentions_source = False
        self.depth = 0
        self.field_uses: dict[str, int] = {}
        self.unit_atoms: set[str] = set()
        self.bucket_names: set[str] = set()
        self.partners: set[tuple[str, ...]] = set()
        self.window_partners: dict[str, frozenset[str]] = {}
        """Fields placed into windows their partners' lengths size (`layoutcheck.model.records`)."""
        self.module_clashes: dict[ast.AST, list[tuple[str, ast.AST, str]]] = {}
        """What the module-wide readers (`layoutcheck.model.modulereaders`) found, by function node: ``(kind, node, detail)``."""
        self.gathered: set[str] = set()
        self.gathering: dict[tuple[int, str], set[str]] = {}
        """``(function index, record)`` -> the fields stored there as shares by an index list (the record
        as its `ast.dump`)."""
        self.whole_copies: list[tuple[int, str, str]] = []
        """``(function index, record, field)`` for each field copied whole from another record
        (`FileFacts.shipped_whole`)."""
        self.in_class_body = 0
        self.attribute_bases: set[int] = set()
        """Subscripts whose attribute is read (``xs[0].device``): the entry is no length."""
        self.pad_context = 0
        """Inside a pad's amount (`F.pad(x, (0, p - x.size(0)))`): ``p - size`` there makes ``p`` a padded length."""
        self.positive: list[str] = []
        """The tests of the enclosing ``if`` s and the function's asserts, as text: what holds here."""
        self.loops: list[ast.For | ast.AsyncFor] = []
        """The function's ``for`` loops around the node walked, outermost first."""
        self.live_checks: tuple[tuple[tuple[str, Any, frozenset[str]], ...], tuple[str, ...]] | None = None
        """The function-end checks whose words the file spells anywhere (`Source.spelled`), once asked,
        with all their words."""

    # ------------------------------------------------------------ driving

    def run(self, tree: ast.Module) -> None:
        """Walk the module ``tree`` (the module's own statements as function 0) and fill `facts`."""
        module = Function("<module>", (1, 1, 1, 1))
        self.facts.functions.append(module)
        uses = body_uses(tree.body, self.imports)
        frame = Frame(0, None, tree, model=False, cls=None, uses=uses)
        self.absorb(uses)
        self.frames.append(frame)
        self.states.append(FunctionState())
        # Module-wide readers, each run only where its spelling can occur (most files have none).
        partners, self.module_clashes = read_module(tree, self.source.text)
        if partners is not None:
            self.window_partners = partners
        if self.memo is not None:
            # Not the function-end checks the file's text lets run (`function_checks`): a check runs on a
            # function only where the function's own text spells its words, which the whole file then does.
            self.memo.begin(self, tree, (
                tuple(sorted(uses.names.items())),
                tuple(sorted((k, tuple(sorted(v))) for k, v in self.window_partners.items())),
            ))
        self.block(tree.body)
        self.finish(frame, tree.body)
        self.frames.pop()
        facts = self.facts
        facts.imports = tuple(sorted(self.imports.aliases.items()))
        facts.imported = tuple(sorted(self.imports.modules))
        facts.classes = tuple(self.class_facts)
        kernel = self.vocab.kernel_modules
        facts.kernel = any(m.lstrip(".").split(".")[0] in kernel for m in self.imports.modules)
        facts.mentions_source = self.mentions_source or any(
            f.reads_source or f.writes_source or f.source_ticks for f in facts.functions
        )
        facts.broadcasts = list(self.broadcasts.values())
        facts.field_uses = tuple(sorted(self.field_uses.items()))
        facts.unit_atoms = tuple(sorted(self.unit_atoms))
        facts.bucket_names = tuple(sorted(self.bucket_names))
        facts.partners = tuple(sorted(self.partners))
        facts.shifters = shifters_of_module(tree, self.source.text)
        facts.packed_rows = packed_rows(tree, self.source.text)
        text = self.source.text
        facts.pieces = piece_summaries(tree, text)
        facts.callbacks = callback_summaries(tree, text)
        facts.origins, facts.instances = origins_and_instances(tree)
        facts.side_summaries = side_summaries(tree, text)
        facts.assigned_onto = assigned_onto_classes(tree, text)
        facts.gathered = tuple(sorted(self.gathered))
        # Copied whole into a record that the same function fills with shares of several fields: a partition
        # that leaves these out (a message assembled from parts gathers one field, and partitions nothing).
        facts.shipped_whole = tuple(sorted({key for index, record, key in self.whole_copies
                                            if len(self.gathering.get((index, record), ())) >= 2}))

    def next_tick(self) -> int:
        """The next tick of the walk's clock (facts are ordered by it)."""
        self.tick += 1
        return self.tick

    @property
    def state(self) -> FunctionState:
        """What the function being walked has collected so far."""
        return self.states[-1]
