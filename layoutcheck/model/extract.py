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

Why `ast` and not libcst: the facts need no concrete syntax, and CPython's
parser builds its tree about 8x faster than libcst's (measured in the README's
development section), which is what the cold-run targets need.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence

from layoutcheck.model.calls import methods_assigned, read_calls_through
from layoutcheck.model.settings import LintSettings
from layoutcheck.model.summaries import SummaryMixin, write_summary
from layoutcheck.model.facts import (
    Arg,
    Broadcast,
    Call,
    EntryRead,
    FieldWrite,
    FileFacts,
    Function,
    Pad,
    Param,
    Record,
    Rewrite,
    Transform,
    Zip,
)
from layoutcheck.model.flow import (
    BCAST,
    CP,
    FOREIGN,
    JOINED_PATH,
    MASKED,
    MAX,
    NOTHING,
    PACKED,
    PAD,
    SAMPLE,
    SEQ,
    SRC,
    SRCLIST,
    STREAM,
    TOK,
    UNIT,
    Flow,
    Frame,
    Value,
)
from layoutcheck.model.accumulate import extends_collection, sums_sizes
from layoutcheck.model.clashes import ClashesMixin
from layoutcheck.model.counts import short_receives
from layoutcheck.model.floors import token_bounds_on_logit_offsets
from layoutcheck.model.poswidth import wide_positions_by_function
from layoutcheck.model.sidedefault import left_padded_into_head_readers
from layoutcheck.model.spunit import unaligned_packed_cuts
from layoutcheck.model.stacked import unstacked_row_lists
from layoutcheck.model.idioms import (
    Idiom,
    broadcast_count,
    is_init_value,
    library_helper,
    match_agreement,
    match_chunk_pad,
    padded_operand,
)
from layoutcheck.model.literals import LiteralsMixin
from layoutcheck.model.padsides import SIDE_TAGS, SidesMixin
from layoutcheck.model.pieceroll import rolled_pieces
from layoutcheck.model.partners import (
    SPELLINGS,
    Body,
    combined_before_restore,
    unit_switches,
    empty_segment,
    misplaced_positions,
    moving_reference,
    row_count_as_size,
    truncated_apart,
    unmasked_mean,
)
from layoutcheck.model.records import record_cut_apart, window_partners
from layoutcheck.model.reshift import reshifted_fields
from layoutcheck.model.sinkchecks import CHECKS as SINK_CHECKS
from layoutcheck.model.sinks import Sinks
from layoutcheck.model.syntax import (
    Source,
    argument,
    children,
    constant_test,
    expects_error,
    index_of,
    int_value,
    keyword,
    last_name,
    nodes,
    positional,
    root_name,
    same,
    string_key,
    string_value,
    switch_like,
    switches,
    target_name,
    walk,
)
from layoutcheck.model.units import canonical
from layoutcheck.model.uses import Uses, body_uses, field_of
from layoutcheck.model.vocabulary import LAYOUT_KINDS, is_check_name, vocabulary

__all__ = ["extract", "extract_tree"]

_PAD = frozenset({"torch.nn.functional.pad", "numpy.pad"})
_FILLED = frozenset({"torch.full", "numpy.full"})
_SIZED = frozenset({"torch.zeros", "torch.ones", "torch.empty", "numpy.zeros", "numpy.ones", "numpy.empty"})
_NEW = frozenset({"new_zeros", "new_ones", "new_empty"})
_MAXES = frozenset({"max", "numpy.max", "torch.max"})
_FRESH_CALLS = frozenset({
    "dict", "list", "set", "defaultdict", "collections.defaultdict", "OrderedDict", "copy.copy",
    "copy.deepcopy", "torch.zeros", "torch.ones", "torch.empty", "torch.full", "torch.tensor",
    "numpy.zeros", "numpy.ones", "numpy.empty", "numpy.full", "numpy.array",
})
_FRESH_METHODS = frozenset({"copy", "clone", "new_zeros", "new_ones", "new_empty", "new_full", "zeros_like"})
_CONVERSIONS = frozenset({
    "list", "tuple", "torch.tensor", "torch.as_tensor", "torch.LongTensor", "torch.IntTensor",
    "numpy.array", "numpy.asarray", "torch.from_numpy",
})
_CONVERSION_METHODS = frozenset({"tolist", "to", "cuda", "cpu", "long", "int", "clone", "detach", "numpy"})
_BUILTINS = frozenset(dir(builtins))
_EXTERNAL = frozenset({
    "torch", "numpy", "math", "os", "sys", "logging", "re", "json", "itertools", "functools", "collections",
    "typing", "dataclasses", "time", "random", "copy", "pathlib", "shutil", "subprocess", "asyncio",
    "threading", "datetime", "warnings", "inspect", "operator", "contextlib", "abc", "enum", "string",
    "struct", "hashlib", "pickle", "argparse", "traceback", "tempfile", "glob", "io", "socket", "uuid",
    "statistics", "pytest", "unittest", "wandb", "tqdm", "numpy.random",
})
_COMMON_METHODS = frozenset({
    "append", "extend", "insert", "pop", "remove", "clear", "items", "keys", "values", "get", "setdefault",
    "update", "copy", "size", "numel", "dim", "view", "reshape", "to", "cuda", "cpu", "item", "tolist",
    "float", "long", "int", "bool", "half", "bfloat16", "contiguous", "clone", "detach", "unsqueeze",
    "squeeze", "flatten", "sum", "mean", "max", "min", "format", "join", "split", "strip", "startswith",
    "endswith", "replace", "lower", "upper", "add", "discard", "index", "count", "sort", "fill_", "zero_",
    "copy_", "chunk", "narrow", "expand", "permute", "transpose", "masked_fill", "masked_fill_", "new_zeros",
    "new_full", "new_ones", "new_empty", "info", "debug", "warning", "error", "exception", "isoformat",
    "encode", "decode", "read", "write", "close", "cumsum", "diff", "nonzero", "any", "all", "argmax",
    "softmax", "log_softmax", "exp", "log", "gather", "scatter_", "index_select", "repeat", "type_as",
    "numpy", "wait", "synchronize", "register_buffer", "parameters", "named_parameters",
})
"""Methods of containers, tensors and loggers: a call of one is never the project's own function
(`record_call` skips it unless the receiver is `self`/`cls` or an imported module)."""
_SHAPED = SEQ | STREAM | SAMPLE | PAD | PACKED | MAX
_SPACE_WORDS: tuple[tuple[int, str], ...] = (
    (PAD, "padded length P"),
    (MAX, "one length for many samples (a maximum)"),
    (PACKED, "cumulative lengths (packed stream)"),
    (STREAM, "packed stream"),
    (SAMPLE, "one sample's tensor"),
    (TOK, "per-sample tensors"),
    (SEQ, "true length T"),
    (UNIT, "alignment unit"),
    (CP, "CP size or rank"),
)
"""How `layoutcheck model` names a space, most specific first."""
_STATEMENT_LIMIT = 400
"""Deeper statement nesting than this is left unwalked (generated code): the file is still parsed."""
_WINDOW_STORE = re.compile(r":[^\]\n]*\]\s*=[^=]")
"""A store into a window ``buf[a : a + n] = ...`` (or ``buf[a:e] = ...``, the end in a local):
where `window_partners` can find something."""
_RETURNED_SHIFT = re.compile(r"return[^\n]*(?:1:|-1\]|roll\()")
"""A function returning a shift (``return t[:, 1:]``): where `reshifted_fields` can find something."""
_PARTNER_CHECKS = tuple((kind, check, SPELLINGS[kind]) for kind, check in (
    ("misplaced_positions", misplaced_positions),
    ("truncated_apart", truncated_apart),
    ("moving_reference", moving_reference),
    ("empty_segment", empty_segment),
    ("unmasked_mean", unmasked_mean),
    ("combined_before_restore", combined_before_restore),
    ("row_count_as_size", row_count_as_size),
)) + SINK_CHECKS
"""The function-level checks of `layoutcheck.model.partners`, by the clash kind each records, with
the words a function must spell for each to find anything (`partners.SPELLINGS`)."""


def _spells(*words: str) -> Callable[[str], bool]:
    """Does a text spell every word (``a|b``: either spelling, ``zip(`` or ``enumerate(`` for a pairing loop)?"""
    choices = [word.split("|") for word in words]
    return lambda text: all(any(word in text for word in choice) for choice in choices)


_ModuleReader = Callable[[ast.Module], "dict[ast.AST, list[tuple[ast.AST, str]]]"]
_MODULE_READERS: tuple[tuple[str, Callable[[str], object], _ModuleReader], ...] = (
    ("rolled_piece", _spells("roll("), rolled_pieces),
    ("reshifted_field", _RETURNED_SHIFT.search, reshifted_fields),
    ("short_receive", _spells("broadcast_object_list"), short_receives),
    ("token_bound_on_logits", _spells("min(", "max(", "- 1"), token_bounds_on_logit_offsets),
    ("wide_positions", _spells("arange("), wide_positions_by_function),
    ("unstacked_rows", _spells("zip(|enumerate(", "cat("), unstacked_row_lists),
    ("left_into_head", _spells("zip(|enumerate(", "pad(", " if "), left_padded_into_head_readers),
    ("cut_off_tp_unit", _spells("packed_seq_params=", "megatron.core"), unaligned_packed_cuts),
)
"""The module-wide readers, each with the clash kind it records and the text a module must hold for it
to find anything (most modules hold none): each returns its findings by function node."""


def space_word(tags: int) -> str | None:
    """The name `layoutcheck model` gives the most specific space in ``tags``."""
    for tag, word in _SPACE_WORDS:
        if tags & tag:
            return word
    return None


def extract(source: str, settings: LintSettings) -> FileFacts:
    """The facts of one file's text; a file that does not parse gives only its syntax error."""
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
    return extract_tree(tree, source, settings)


_DEEP_STACK = 256 * 1024 * 1024
"""Bytes of stack for the thread that walks a file too deep for the default recursion limit."""
_DEEP_LIMIT = 30_000
"""The recursion limit of that walk: ``ast.parse`` builds trees up to 3x the default limit (1000) deep,
and the walk recurses a few frames per level."""


def extract_tree(tree: ast.Module, source: str, settings: LintSettings) -> FileFacts:
    """The facts of an already parsed file."""
    tree = read_calls_through(tree, source)
    try:
        facts = _walk(tree, source, settings)
    except RecursionError:
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


def _walk(tree: ast.Module, source: str, settings: LintSettings) -> FileFacts:
    extractor = _Extractor(source, settings)
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


class _FunctionState:
    """What one function collects while it is walked (becomes its `Function`)."""

    __slots__ = (
        "calls", "source_ticks", "none_checked", "returns", "guarded", "samples", "iterates", "aliases",
        "pads", "writes_source", "writes_packed", "reads_source", "reads_packed", "layout_params",
        "padded_params", "true_params", "rounds", "spaces", "guard_fields", "candidates", "positional", "reads",
        "returns_calls", "unit_names", "elements", "tuple_returns",
    )

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.source_ticks: list[int] = []
        self.none_checked: set[str] = set()
        self.returns = 0
        self.returns_calls: set[str] = set()
        # Per element of the tuple every `return` gives: (tags, calls); None before the first
        # return, False once a return gives something else (no summary by element).
        self.elements: list[tuple[int, frozenset[str], frozenset[str]]] | bool | None = None
        self.tuple_returns = False
        """A ``return`` gives a tuple as written (a projected one included, `calls.returned_tuple`)."""
        self.guarded: set[str | None] = set()
        self.samples: set[int] = set()
        self.iterates = False
        self.aliases: dict[str, str | None] = {}
        self.pads: list[tuple[Pad, ast.AST]] = []
        """Pads waiting for the function's end, with the node whose fate decides (`Sinks`)."""
        self.writes_source = False
        self.writes_packed = False
        self.reads_source = False
        self.reads_packed = False
        self.layout_params: set[str] = set()
        self.padded_params: set[str] = set()
        self.true_params: set[str] = set()
        self.rounds: tuple[int, int] | None = None
        self.spaces: dict[tuple[str, str], tuple[int, str]] = {}
        """``(subject, space) -> (line, why)``: the first line that showed it."""
        self.guard_fields: set[str] = set()
        self.candidates: list[tuple[int, ast.Call]] = []
        """Calls that may be the project's round-up helpers: their fate is read at the end."""
        self.positional: tuple[str, ...] = ()
        """The positional parameters, in order (for `rounds`)."""
        self.reads: set[str] = set()
        """Fields read by key (``d["k"]``) anywhere in the function."""
        self.unit_names: set[str] = set()
        """Names a pad's unit is read through (``unit`` of ``(unit - n % unit) % unit``)."""

    def note_space(self, subject: str, space: str | None, line: int, why: str) -> None:
        if space is not None and len(self.spaces) < 64:
            self.spaces.setdefault((subject, space), (line, why))


_USE_WHY = {
    TOK: "sized, padded or concatenated per element",
    SEQ: "fed to a cumulative sum, used as a tensor extent or rounded up",
    UNIT: "the multiple of a round-up",
    CP: "indexes the chunks of a zigzag split",
    PACKED: "grown by its own last entry plus a length",
}


_NOTED = TOK | SEQ | UNIT | CP | PACKED
"""The use tags `_note_uses` names (those of `_USE_WHY`)."""


class _Extractor(ClashesMixin, LiteralsMixin, SidesMixin, SummaryMixin, Flow):
    def __init__(self, source: str, settings: LintSettings) -> None:
        super().__init__(vocabulary(settings))
        self.settings = settings
        self.source = Source(source)
        self.facts = FileFacts()
        self.tick = 0
        self.states: list[_FunctionState] = []
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
        """What the module-wide readers (`_MODULE_READERS`) found, by function node: ``(kind, node, detail)``."""
        self.gathered: set[str] = set()
        self.gathering: dict[tuple[int, str], set[str]] = {}
        """``(function index, record)`` -> the fields stored there as shares by an index list (the record
        as its `ast.dump`)."""
        self.whole_copies: list[tuple[int, str, str]] = []
        """``(function index, record, field)`` for each field copied whole from another record
        (`FileFacts.shipped_whole`)."""
        self.in_class_body = 0
        self.attribute_bases: set[int] = set()
        self.pad_context = 0
        self.positive: list[str] = []
        """The tests of the enclosing ``if`` s and the function's asserts, as text: what holds here."""
        self.loops: list[ast.For | ast.AsyncFor] = []
        """The function's ``for`` loops around the node walked, outermost first."""
        """Inside a pad's amount (`F.pad(x, (0, p - x.size(0)))`): ``p - size`` there makes ``p`` a padded length."""
        """Subscripts whose attribute is read (``xs[0].device``): the entry is no length."""

    # ------------------------------------------------------------ driving

    def run(self, tree: ast.Module) -> None:
        module = Function("<module>", (1, 1, 1, 1))
        self.facts.functions.append(module)
        uses = body_uses(tree.body, self.imports)
        frame = Frame(0, None, tree, model=False, cls=None, uses=uses)
        self._absorb(uses)
        self.frames.append(frame)
        self.states.append(_FunctionState())
        # Module-wide readers, each run only where its spelling can occur (most files have none).
        text = self.source.text
        if "len(" in text and _WINDOW_STORE.search(text):
            self.window_partners = window_partners(tree)
        for kind, gate, reader in _MODULE_READERS:
            if gate(text):
                for function, found in reader(tree).items():
                    self.module_clashes.setdefault(function, []).extend((kind, n, d) for n, d in found)
        self.block(tree.body)
        self._finish(frame, tree.body)
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
        facts.gathered = tuple(sorted(self.gathered))
        # Copied whole into a record that the same function fills with shares of several fields: a partition
        # that leaves these out (a message assembled from parts gathers one field, and partitions nothing).
        facts.shipped_whole = tuple(sorted({key for index, record, key in self.whole_copies
                                            if len(self.gathering.get((index, record), ())) >= 2}))

    def _absorb(self, uses: Uses) -> None:
        for key, tags in uses.fields.items():
            self.field_uses[key] = self.field_uses.get(key, 0) | tags
        self.unit_atoms |= uses.unit_atoms

    def next_tick(self) -> int:
        self.tick += 1
        return self.tick

    @property
    def state(self) -> _FunctionState:
        return self.states[-1]

    # ------------------------------------------------------------ statements

    def block(self, body: Sequence[ast.stmt]) -> bool:
        """Walk ``body``; True when it always ends in ``return`` or ``raise``."""
        self.depth += 1
        try:
            if self.depth > _STATEMENT_LIMIT:
                return False
            for stmt in body:
                if self.statement(stmt):
                    return True
            return False
        finally:
            self.depth -= 1

    def statement(self, node: ast.stmt) -> bool:
        kind = type(node)
        if kind is ast.Assign:
            first = node.targets[0]
            self.frame.data["assigning"] = first.id if isinstance(first, ast.Name) else None
            self.scan(node.value)
            self.frame.data["assigning"] = None
            for target in node.targets:
                self.scan_target(target)
            self.assign(node.targets, node.value)
        elif kind is ast.Expr:
            self.scan(node.value)
        elif kind is ast.If:
            return self.if_(node)
        elif kind in (ast.For, ast.AsyncFor):
            self.for_(node)
        elif kind is ast.Return:
            if node.value is not None:
                self.scan(node.value)
                self.summarise_return(node)
                self.returned(node.value)
            else:
                self.state.elements = False
            return True
        elif kind in (ast.FunctionDef, ast.AsyncFunctionDef):
            self.function(node)
        elif kind is ast.AnnAssign:
            if node.value is not None:
                self.scan(node.value)
                self.scan_target(node.target)
                self.assign([node.target], node.value)
        elif kind is ast.AugAssign:
            self.scan(node.value)
            self.scan_target(node.target)
            self.augment(node)
        elif kind in (ast.Import, ast.ImportFrom):
            self.imports.add(node)
        elif kind is ast.ClassDef:
            self.class_(node)
        elif kind in (ast.With, ast.AsyncWith):
            for item in node.items:
                self.scan(item.context_expr)
                if item.optional_vars is not None:
                    self.bind_target(item.optional_vars, NOTHING, None)
            raises = expects_error(node)
            self.expecting_error += raises
            try:
                return self.block(node.body)
            finally:
                self.expecting_error -= raises
        elif kind is ast.While:
            self.in_test += 1
            self.scan(node.test)
            self.in_test -= 1
            self.loop_body(node.body, node.orelse)
        elif kind is ast.Assert:
            self.assert_(node)
        elif kind is ast.Raise:
            if node.exc is not None:
                self.scan(node.exc)
            return True
        elif kind is ast.Try or kind.__name__ == "TryStar":
            self.try_(node)
        elif kind is ast.Match:
            self.scan(node.subject)
            self.branches([case.body for case in node.cases], [None] * len(node.cases), exhaustive=False)
        elif kind is ast.Delete:
            for target in node.targets:
                self.scan(target)
        return False

    # -- branches --

    def branches(self, bodies: list[list[ast.stmt]], layouts: list[str | None], *, exhaustive: bool) -> bool:
        """Walk alternative ``bodies`` from the same state and join what they leave."""
        frame = self.frame
        before, fresh_before, layout_before = frame.env, set(frame.fresh), frame.layout
        exprs_before = frame.exprs
        results: list[tuple[dict[str, Value], bool]] = []
        bound: list[tuple[dict[str, ast.expr], bool]] = []
        rebound: set[str] = set()
        for body, layout in zip(bodies, layouts):
            frame.env = dict(before)
            frame.exprs = dict(exprs_before)
            frame.layout = layout or layout_before
            self.forget()
            self.rebound.append(rebound)
            try:
                ended = self.block(body)
            finally:
                self.rebound.pop()
            results.append((frame.env, ended))
            bound.append((frame.exprs, ended))
        if self.rebound:
            self.rebound[-1] |= rebound
        frame.layout = layout_before
        live = [env for env, ended in results if not ended]
        live_exprs = [exprs for exprs, ended in bound if not ended]
        if not exhaustive:
            live.append(before)
            live_exprs.append(exprs_before)
        frame.env = _join(live, before) if live else _join([env for env, _ in results], before)
        frame.exprs = _join_exprs(live_exprs or [exprs for exprs, _ in bound], rebound, self.synthetic)
        frame.fresh = fresh_before | frame.fresh
        self.forget()
        return exhaustive and not live

    def if_(self, node: ast.If) -> bool:
        raises = any(isinstance(n, ast.Raise) for n in node.body)
        self.in_test += 1
        self.scan(node.test)
        self.in_test -= 1
        test_text = self.source.segment(node.test)
        # The body runs only when the test holds; after an `if ...: raise`, what follows has the
        # test settled too (crudely: a value the test names is taken to be checked).
        self.positive.append(test_text)
        try:
            return self._if(node, raises)
        finally:
            if not raises:
                self.positive.remove(test_text)

    def _if(self, node: ast.If, raises: bool) -> bool:
        decided = constant_test(node.test, self.switches()) if switch_like(node.test) else None
        if decided is not None:
            # `left = True` then `if left: ... else: ...`: one path runs, the other is dead code.
            return self.block(node.body if decided else node.orelse)
        body_layout, else_layout = self.layout_of(node.test)
        if raises:
            self.guard(node.test, negated=True)
            saved = self.frame.layout
            self.frame.layout = else_layout or saved
            self.note_none_check(node.test, negated=True)
            self.frame.layout = saved
        ended = self.branches([node.body, node.orelse], [body_layout, else_layout], exhaustive=True)
        self.narrow_padded(node)
        if not ended:
            # An early `return`/`raise` narrows the layout of what follows.
            body_ends = _ends(node.body)
            else_ends = bool(node.orelse) and _ends(node.orelse)
            if body_ends and not else_ends and else_layout:
                self.frame.layout = else_layout
            elif else_ends and not body_ends and body_layout:
                self.frame.layout = body_layout
        return ended

    def narrow_padded(self, node: ast.If) -> None:
        """``if len(d) < p: d = F.pad(d, ...)`` (no ``else``): on the path that pads, ``d`` is padded; on
        the other, the test says ``d`` was at least ``p`` long already. Either way ``d`` is no longer the
        sample's true tokens alone (it is as long as its padded length), so the join drops that."""
        if node.orelse:
            return
        name = _shorter_than(node.test)
        if name is None or name not in self.frame.env:
            return
        for stmt in node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
                    and stmt.targets[0].id == name and isinstance(stmt.value, ast.Call) \
                    and self.imports.qualify(stmt.value.func) in _GROWS and any(
                        isinstance(n, ast.Name) and n.id == name for a in stmt.value.args for n in walk(a)):
                value = self.frame.env[name]
                if value.tags & MASKED:
                    self.bind(name, value.with_tags(value.tags & ~MASKED), self.bound_expr(name))
                return

    def switches(self) -> dict[str, bool]:
        """The current function's switches: locals set once to ``True``/``False`` (`syntax.switches`)."""
        frame = self.frame
        found = frame.data.get("switches")
        if found is None:
            body = getattr(frame.node, "body", None)
            found = frame.data["switches"] = switches(body) if isinstance(body, list) and len(self.frames) > 1 else {}
        return found

    def loop_body(self, body: list[ast.stmt], orelse: list[ast.stmt]) -> None:
        self.branches([body], [None], exhaustive=False)
        if orelse:
            self.block(orelse)

    def for_(self, node: ast.For | ast.AsyncFor) -> None:
        self.scan(node.iter)
        self.walks(node.iter)
        keys = _string_tuple(node.iter)
        if keys is not None and isinstance(node.target, ast.Name):
            # `for key in ("a", "b"): d[key] = f(d[key])`: each key is a field, treated alike.
            self.frame.data.setdefault("keys", {})[node.target.id] = keys
            self.bind(node.target.id, NOTHING)
            if any(isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id == node.target.id
                   for s in nodes(node) if isinstance(s, (ast.Assign, ast.AugAssign)) for t in _targets(s)):
                self.partners.add(tuple(sorted(keys)))
            self.loop_body(node.body, node.orelse)
            self.frame.data["keys"].pop(node.target.id, None)
            return
        self.bind_target(node.target, self.element(node.iter), None)
        self.bucket_loop(node)
        self.enumerated(node)
        built = self.built_by_loop(node)
        self.loops.append(node)
        self.loop_body(node.body, node.orelse)
        self.loops.pop()
        stepped = _written_in(node.body) if built else set()
        for name, comprehension in built.items():
            if name in self.frame.env:
                # After the loop the list is what the comprehension would have built: checks that read
                # a value's expression (`d["k"] = [f(x) for x in d["k"]]`) read this one.
                self.bind(name, self.frame.env[name], comprehension)
                if not any(isinstance(n, ast.Name) and n.id in stepped for n in walk(comprehension.elt)):
                    # What the comprehension is (`[v for _ in xs]`: one value for every entry) joins what
                    # the appends gave it. An element bound in the body (`n = len(x)`, then `out.append(n)`)
                    # changes every step, whatever the synthetic comprehension's loop variable shows.
                    self.bind(name, self.classify(comprehension) | self.frame.env[name], comprehension)
                self.frame.fresh.add(name)

    def enumerated(self, node: ast.For | ast.AsyncFor) -> None:
        """``for i, a in enumerate(A):`` reading ``B[i]`` in its body walks ``A`` and ``B`` entry for
        entry, as ``for a, b in zip(A, B):`` does (`zipped`)."""
        iterable, target = node.iter, node.target
        if self.in_test or not (isinstance(iterable, ast.Call) and self.imports.qualify(iterable.func) == "enumerate"
                                and len(iterable.args) == 1 and isinstance(target, ast.Tuple)
                                and len(target.elts) == 2 and isinstance(target.elts[0], ast.Name)):
            return
        index = target.elts[0].id
        walked = [iterable.args[0]]
        seen = {ast.dump(walked[0])}
        for stmt in node.body:
            for part in nodes(stmt):
                if isinstance(part, ast.Subscript) and isinstance(part.slice, ast.Name) and part.slice.id == index:
                    text = ast.dump(part.value)
                    if text not in seen:
                        seen.add(text)
                        walked.append(part.value)
        if len(walked) > 1:
            self.zipped(iterable, walked)

    def built_by_loop(self, node: ast.For | ast.AsyncFor) -> dict[str, ast.ListComp]:
        """Lists ``node`` builds as a comprehension would: ``xs = []`` before the loop and one
        ``xs.append(e)`` (or ``xs.extend(e)``) in its body (under ``if c:`` tests at most), ``xs`` written
        nowhere else in it. Each as the comprehension ``[e for <target> in <iter> if c]`` (for ``extend``,
        ``[y for <target> in <iter> if c for y in e]``; `synthetic`: no node of the file)."""
        if isinstance(node, ast.AsyncFor):
            return {}
        found: dict[str, ast.ListComp] = {}
        stack: list[tuple[list[ast.stmt], list[ast.expr]]] = [(node.body, [])]
        while stack:
            body, tests = stack.pop()
            for stmt in body:
                if isinstance(stmt, ast.If) and not stmt.orelse:
                    stack.append((stmt.body, [*tests, stmt.test]))
                    continue
                call = stmt.value if isinstance(stmt, ast.Expr) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                        and call.func.attr in ("append", "extend") and isinstance(call.func.value, ast.Name)
                        and len(call.args) == 1 and not call.keywords):
                    continue
                name = call.func.value.id
                bound = self.bound_expr(name)
                if name in found or not (isinstance(bound, ast.List) and not bound.elts) or name not in self.frame.fresh:
                    found[name] = None  # type: ignore[assignment]
                    continue
                generators = [ast.comprehension(target=node.target, iter=node.iter, ifs=tests, is_async=0)]
                element = call.args[0]
                if call.func.attr == "extend":
                    # `xs.extend(e)` appends each entry of `e`: `[y for <target> in <iter> for y in e]`, and
                    # `xs.extend([e])` (one entry) is `xs.append(e)`.
                    if isinstance(element, (ast.List, ast.Tuple)) and len(element.elts) == 1 \
                            and not isinstance(element.elts[0], ast.Starred):
                        element = element.elts[0]
                    else:
                        entry = ast.copy_location(ast.Name(id=f"{name}·entry", ctx=ast.Store()), element)
                        generators.append(ast.comprehension(target=entry, iter=element, ifs=[], is_async=0))
                        element = ast.copy_location(ast.Name(id=entry.id, ctx=ast.Load()), element)
                comprehension = ast.ListComp(elt=element, generators=generators)
                found[name] = ast.copy_location(comprehension, call)
        if not found:
            return {}
        written = _written_in([node])
        mentions: dict[str, int] = {}
        for n in nodes(node):
            if isinstance(n, ast.Name) and n.id in found:
                mentions[n.id] = mentions.get(n.id, 0) + 1
        out = {name: comp for name, comp in found.items()
               if comp is not None and name not in written and mentions.get(name) == 1}
        self.synthetic.extend(out.values())
        return out

    def try_(self, node: ast.stmt) -> None:
        self.block(node.body)  # type: ignore[attr-defined]
        handlers = [h.body for h in node.handlers]  # type: ignore[attr-defined]
        if handlers:
            self.branches(handlers, [None] * len(handlers), exhaustive=False)
        self.block(node.orelse)  # type: ignore[attr-defined]
        self.block(node.finalbody)  # type: ignore[attr-defined]

    def layout_of(self, test: ast.expr) -> tuple[str | None, str | None]:
        """The layout ``test`` proves in its body and in its ``else``: ``qkv_format == "thd"``."""
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            body, other = self.layout_of(test.operand)
            return other, body
        if isinstance(test, ast.BoolOp):
            found = [self.layout_of(v) for v in test.values]
            if isinstance(test.op, ast.And):
                body = next((b for b, _ in found if b), None)
                others = {o for _, o in found}
                return body, (others.pop() if len(found) == 1 and others else None)
            elses = [o for _, o in found]
            return None, (elses[0] if elses and all(o == elses[0] for o in elses) else None)
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return None, None
        op = test.ops[0]
        sides = (test.left, test.comparators[0])
        for side in sides:
            kind = LAYOUT_KINDS.get(string_value(side) or "")
            if kind is not None:
                self.note_layout_param(sides[1] if side is sides[0] else sides[0], test)
                other = "bshd" if kind == "thd" else "thd"
                if isinstance(op, ast.Eq):
                    return kind, other
                if isinstance(op, ast.NotEq):
                    return other, kind
        if isinstance(op, (ast.In, ast.NotIn)) and isinstance(test.comparators[0], (ast.Tuple, ast.List, ast.Set)):
            kinds = {LAYOUT_KINDS.get(string_value(e) or "") for e in test.comparators[0].elts}
            if len(kinds) == 1 and None not in kinds:
                self.note_layout_param(test.left, test)
                kind = kinds.pop()
                other = "bshd" if kind == "thd" else "thd"
                return (kind, other) if isinstance(op, ast.In) else (other, kind)
        return None, None

    def note_layout_param(self, node: ast.expr, test: ast.AST) -> None:
        """A parameter compared with a layout kind is the function's layout parameter."""
        if isinstance(node, ast.Name) and self.is_parameter(node.id):
            state = self.state
            if node.id not in state.layout_params:
                state.layout_params.add(node.id)
                state.note_space(node.id, "layout kind", test.lineno, "compared with a layout kind")  # type: ignore[attr-defined]

    def assert_(self, node: ast.Assert) -> None:
        self.positive.append(self.source.segment(node.test))
        self.in_test += 1
        self.scan(node.test)
        if node.msg is not None:
            self.scan(node.msg)
        self.in_test -= 1
        self.guard(node.test, negated=False)
        self.note_none_check(node.test, negated=False)
        body, _ = self.layout_of(node.test)
        if body:
            self.frame.layout = body

    def note_none_check(self, test: ast.expr, *, negated: bool) -> None:
        """``assert p is not None`` / ``if p is None: raise``: omitting ``p`` fails loudly. Where
        the layout is BSHD, it also says ``p`` is what BSHD needs: the padded length."""
        for part in (test.values if isinstance(test, ast.BoolOp) else [test]):
            if isinstance(part, ast.Compare) and len(part.ops) == 1 and isinstance(part.left, ast.Name):
                none = isinstance(part.comparators[0], ast.Constant) and part.comparators[0].value is None
                wanted = ast.Is if negated else ast.IsNot
                if none and isinstance(part.ops[0], wanted) and self.is_parameter(part.left.id):
                    self.state.none_checked.add(part.left.id)
                    if self.frame.layout == "bshd":
                        self.note_padded_param(part.left.id, part, "required where the layout is BSHD")

    def note_padded_param(self, name: str, node: ast.AST, why: str) -> None:
        state = self.state
        if name not in state.padded_params:
            state.padded_params.add(name)
            state.note_space(name, "padded length P (parameter)", getattr(node, "lineno", 0), why)

    def note_true_param(self, name: str, node: ast.AST, why: str) -> None:
        state = self.state
        if name not in state.true_params:
            state.true_params.add(name)
            state.note_space(name, "true length T (parameter)", getattr(node, "lineno", 0), why)

    # -- definitions --

    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for decorator in node.decorator_list:
            self.scan(decorator)
        args = node.args
        defaults = [*([None] * (len(args.posonlyargs) + len(args.args) - len(args.defaults))), *args.defaults]
        params: list[Param] = []
        positional_params = [*args.posonlyargs, *args.args]
        layout_params: set[str] = set()
        for i, (param, default) in enumerate(zip(positional_params, defaults)):
            kind = "posonly" if i < len(args.posonlyargs) else "pos"
            params.append(Param(param.arg, kind, None if default is None else self.source.snippet(default, 40)))
            if default is not None:
                self.scan(default)
                self.judge_literal(param.arg, default, binding=True)
                if string_value(default) in LAYOUT_KINDS:
                    layout_params.add(param.arg)
        if args.vararg is not None:
            params.append(Param(args.vararg.arg, "star", None))
        for param, default in zip(args.kwonlyargs, args.kw_defaults):
            params.append(Param(param.arg, "kwonly", None if default is None else self.source.snippet(default, 40)))
            if default is not None:
                self.scan(default)
                self.judge_literal(param.arg, default, binding=True)
                if string_value(default) in LAYOUT_KINDS:
                    layout_params.add(param.arg)
        if args.kwarg is not None:
            params.append(Param(args.kwarg.arg, "dstar", None))
        name = node.name
        self.qual.append(name)
        qualname = ".".join(self.qual)
        parent = self.frame
        cls = self.classes[-1][0] if self.classes and parent.cls != "<inside>" else None
        model = parent.model or bool(self.classes and self.classes[-1][1])
        index = len(self.facts.functions)
        line, col, _, _ = self.source.span(node)
        name_col = col + (6 if isinstance(node, ast.AsyncFunctionDef) else 0) + 4
        facts = Function(
            qualname, (line, name_col, line, name_col + len(name)), tuple(params), parent.index, cls, model,
            named_for_source=self.vocab.mentions_source(name) and not is_check_name(name),
        )
        self.facts.functions.append(facts)
        uses = body_uses(node.body, self.imports)
        self._absorb(uses)
        frame = Frame(index, parent, node, model=model, cls="<inside>", uses=uses)
        self.frames.append(frame)
        state = _FunctionState()
        state.layout_params |= layout_params
        for param in layout_params:
            state.note_space(param, "layout kind", line, "defaults to a layout kind")
        state.positional = tuple(p.arg for p in positional_params)
        self.states.append(state)
        for param in params:
            frame.env[param.name] = Value(self.vocab.tags(param.name), None, frozenset((param.name,)))
        self.forget()
        saved_classes, self.classes = self.classes, []
        saved_positive, self.positive = self.positive, []
        saved_loops, self.loops = self.loops, []
        self.block(node.body)
        self.classes = saved_classes
        self.positive = saved_positive
        self.loops = saved_loops
        self._finish(frame, node.body)
        self.frames.pop()
        self.qual.pop()
        self.bind(name, NOTHING)

    def class_(self, node: ast.ClassDef) -> None:
        for decorator in node.decorator_list:
            self.scan(decorator)
        bases = tuple(last_name(b) or "" for b in node.bases)
        for base in node.bases:
            self.scan(base)
        model = any(self.vocab.is_model_base(b) for b in bases)
        self.class_facts.append((".".join([*self.qual, node.name]), bases))
        self.qual.append(node.name)
        self.classes.append((node.name, model))
        frame = self.frame
        saved_env, saved_cls = frame.env, frame.cls
        frame.env = dict(saved_env)  # class attributes are not the enclosing scope's locals
        frame.cls = None
        self.forget()
        self.in_class_body += 1
        self.block(node.body)
        self.in_class_body -= 1
        frame.env, frame.cls = saved_env, saved_cls
        self.forget()
        self.classes.pop()
        self.qual.pop()
        self.bind(node.name, NOTHING)

    def _finish(self, frame: Frame, body: Sequence[ast.stmt]) -> None:
        """The function has been walked: fix the fates of its pads and write its facts."""
        shared = Body(body)
        node = frame.node
        first, last = (node.lineno, node.end_lineno) if frame.index else (1, None)  # type: ignore[attr-defined]
        spells = self.source.spells(first, last)
        for kind, check, words in _PARTNER_CHECKS:
            if all(spells(word) for word in words):
                for found, detail in check(shared):
                    self.add_clash(kind, found, detail)
        for node, detail in record_cut_apart(body, self.window_partners):
            self.add_clash("record_cut_apart", node, detail)
        for kind, found, detail in self.module_clashes.get(frame.node, ()):
            self.add_clash(kind, found, detail)
        state = self.states.pop()
        facts = self.facts.functions[frame.index]
        if (state.pads or state.candidates) and not frame.model:
            sinks = Sinks(body, self.imports, lambda n: self.classify(n).has(TOK | SAMPLE | STREAM))
            for pad, carrier in state.pads:
                pad.fate = sinks.fate(carrier)
            calls = state.calls
            for i, node in state.candidates:
                calls[i] = calls[i]._replace(fate=sinks.fate(node))
        for pad, _ in state.pads:
            self.facts.pads.append(pad)
        # Only uses that show a space are noted (most names' show none): sorted after that filter.
        for key, tags in sorted((k, t) for k, t in frame.uses.names.items() if t & _NOTED):
            self._note_uses(state, frame.uses, "name", key, key, tags)
        for key, tags in sorted((k, t) for k, t in frame.uses.fields.items() if t & _NOTED):
            self._note_uses(state, frame.uses, "field", key, f'field "{key}"', tags)
        facts.writes_source = state.writes_source or facts.named_for_source
        facts.writes_packed = state.writes_packed
        facts.reads_source = state.reads_source
        facts.reads_packed = state.reads_packed
        facts.source_ticks = tuple(state.source_ticks)
        facts.none_checked = tuple(sorted(state.none_checked))
        write_summary(state, node, facts)
        facts.calls = tuple(state.calls)
        facts.guarded = tuple(sorted(g for g in state.guarded if g is not None)) + (
            ("",) if None in state.guarded else ()
        )
        facts.sample_indices = tuple(sorted(state.samples))
        facts.iterates = state.iterates
        facts.layout_params = tuple(sorted(state.layout_params))
        facts.padded_params = tuple(sorted(state.padded_params))
        facts.true_params = tuple(sorted(state.true_params - state.padded_params))
        facts.rounds = state.rounds
        facts.guard_fields = tuple(sorted(state.guard_fields))
        facts.reads = tuple(sorted(state.reads))
        names = frame.uses.names
        facts.param_uses = tuple((p.name, names[p.name]) for p in facts.params if names.get(p.name))
        facts.spaces = tuple(sorted((subject, space, line, why) for (subject, space), (line, why) in state.spaces.items()))
        if frame.index:
            mentions = frame.uses.mentions
            facts.unused_params = tuple(p.name for p in facts.params if p.kind not in ("star", "dstar")
                                        and p.name not in ("self", "cls") and not mentions(p.name))
            facts.unit_switches = unit_switches(shared, state.unit_names, {p.name for p in facts.params})
        facts.end_tick = self.next_tick()

    @staticmethod
    def _note_uses(state: _FunctionState, uses: Uses, kind: str, key: str, subject: str, tags: int) -> None:
        for tag in (TOK, SEQ, UNIT, CP, PACKED):
            if tags & tag:
                line = uses.lines.get((kind, key, tag), 0)
                state.note_space(subject, space_word(tag), line, uses.hows.get((kind, key, tag)) or _USE_WHY[tag])

    # -- stores --

    def scan_target(self, target: ast.expr) -> None:
        """The index and key expressions of a store target (``x[f(i)] = ...``)."""
        if isinstance(target, ast.Subscript):
            self.scan(target.slice)
            self.scan_target(target.value) if isinstance(target.value, ast.Subscript) else self.scan(target.value)
        elif isinstance(target, ast.Attribute):
            self.scan(target.value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self.scan_target(element)

    def is_fresh(self, value: ast.expr) -> bool:
        """Is ``value`` a container built here (``{}``, ``[0] * n``, ``torch.zeros(n)``, a copy)?"""
        if isinstance(value, (ast.Dict, ast.List, ast.DictComp, ast.ListComp, ast.Tuple)):
            return True
        if isinstance(value, ast.BinOp):
            return self.is_fresh(value.left) or self.is_fresh(value.right)
        if isinstance(value, ast.Call):
            return self.imports.qualify(value.func) in _FRESH_CALLS or last_name(value.func) in _FRESH_METHODS
        return False

    def store_keys(self, target: ast.expr) -> tuple[tuple[str, ...], bool]:
        """The fields a store target writes (``d["k"]``, ``obj.k``, ``d[key]`` in a loop over keys)
        and whether it writes one entry of them (``d["k"][i] = ...``)."""
        if isinstance(target, ast.Subscript):
            key = string_key(target)
            if key is not None:
                return (key,), False
            keys = self.loop_keys(target.slice)
            if keys:
                return keys, False
            inner, _ = self.store_keys(target.value)  # type: ignore[arg-type]
            return inner, True
        if isinstance(target, ast.Attribute):
            found = field_of(target)
            return ((found,), False) if found is not None else ((), False)
        return (), False

    def note_write(self, name: str | None, value: ast.expr | None = None, *, node: ast.AST | None = None,
                   entry: bool = False, fresh: bool = True, record: int = 0) -> None:
        """A store of ``value`` into field ``name`` here: a `FieldWrite`, and for a configured source
        or packed name (hints) a write of it.

        Storing what was read from the field (``max_seq_lens = batch["max_seq_lens"]``) is a read
        under another name, not a write.
        """
        if name is None:
            return
        vocab = self.vocab
        found = self.classify(value) if value is not None else NOTHING
        if value is not None:
            if target_name(value) == (name, False) and not isinstance(value, ast.Name):
                return
            if isinstance(value, ast.Call) and last_name(value.func) in ("get", "pop"):
                first = positional(value)[:1]
                if first and string_value(first[0]) == name:
                    return
        where = node if node is not None else value
        if where is not None:
            self.facts.field_writes.append(FieldWrite(
                self.frame.index, name, self.source.span(where), found.tags, tuple(sorted(found.fields)),
                tuple(sorted(found.params)), entry, self.next_tick(),
                self.source.snippet(value, 60) if value is not None else "",
                entry or (value is not None and self.built_per_sample(value)),
                fresh, tuple(sorted(found.calls)), record,
            ))
            word = space_word(found.tags & ~(UNIT | CP))
            if word is not None and value is not None:
                self.state.note_space(f'field "{name}"', word, where.lineno, f"stores {self.source.snippet(value, 40)}")  # type: ignore[attr-defined]
        if name not in vocab.sources and name not in vocab.packed:
            return
        if found.has(SRC):
            return
        if name in vocab.sources:
            self.state.writes_source = True
            self.state.source_ticks.append(self.next_tick())
        else:
            self.state.writes_packed = True

    def assign(self, targets: Sequence[ast.expr], value: ast.expr) -> None:
        found = self.classify(value)
        for target in targets:
            if isinstance(target, ast.Subscript):
                self.stored_side(target, value, self._rebind_side)
            keys, entry = self.store_keys(target)
            for key in keys:
                self.note_write(key, value, node=target, entry=entry, fresh=self.fresh_root(target))
                if not entry:
                    self.check_broadcast(value, key, "field")
                self.transform(target, key, value)
            if isinstance(target, ast.Subscript) and _gathers(value):
                self.gathered |= set(keys) if keys else {"*"} if isinstance(target.slice, ast.Name) else set()
                if keys and isinstance(value.generators[0].iter, ast.Name):  # type: ignore[attr-defined]
                    # `out[k] = [d[k][i] for i in part]`: a share of the record by an index list
                    self.gathering.setdefault((self.frame.index, ast.dump(target.value)), set()).update(keys)
            elif keys and isinstance(target, ast.Subscript) and isinstance(value, ast.Subscript) \
                    and ast.dump(value.slice) == ast.dump(target.slice) and ast.dump(value.value) != ast.dump(target.value):
                # `out[key] = data[key]`: the field copied whole from another record
                self.whole_copies.extend((self.frame.index, ast.dump(target.value), key) for key in keys)
            if isinstance(target, ast.Name):
                self.check_broadcast(value, target.id, "name")
            self.rewrite(target, value)
            self.record(target, found, value)
            if not isinstance(target, (ast.Tuple, ast.List)):
                field_name = (target.id if isinstance(target, ast.Name) else keys[0] if keys and not entry else None)
                self.judge_literal(field_name, value, binding=not isinstance(target, ast.Name) or self.at_top())
            if isinstance(target, ast.Name):
                if found.tags & (SRCLIST | TOK) or (found.fields and root_name(value) is not None):
                    self.state.aliases[target.id] = self.container(value)
                unit = None
                if _unit_shaped(value):
                    unit = canonical(value, self.unit_of, self.vocab.is_pad_multiplier)
                self.bind(target.id, found, value)
                word = space_word(found.tags & _SHAPED)
                if word is not None:
                    self.state.note_space(target.id, word, target.lineno, f"= {self.source.snippet(value, 40)}")
                if unit is not None:
                    self.frame.units[target.id] = unit
                else:
                    self.frame.units.pop(target.id, None)
                if self.is_fresh(value):
                    self.frame.fresh.add(target.id)
                else:
                    self.frame.fresh.discard(target.id)
            elif isinstance(target, (ast.Tuple, ast.List)):
                elements = target.elts
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(elements):
                    for element, part in zip(elements, value.elts):
                        self.assign([element], part)
                else:
                    unpacked = self.frame.data.setdefault("unpacked", {})
                    # `a, b = f(x)`: each an element of what `f` returns (`*f`: the project reads only the
                    # side its elements are padded on, which the elements share or it is no side).
                    element_of = Value(0, None, calls=frozenset({"*" + c for c in found.calls}))
                    starred = False
                    for i, element in enumerate(elements):
                        if isinstance(element, ast.Name):
                            if not found.calls:
                                self.bind(element.id, NOTHING)
                            elif starred or not isinstance(value, ast.Call):
                                self.bind(element.id, element_of)
                            else:
                                # Element `i` of what the callee returns: its summary there (`*i:f`).
                                self.bind(element.id, Value(0, None, calls=frozenset(f"*{i}:{c}" for c in found.calls
                                                                                      if not c.startswith("*"))))
                            unpacked[element.id] = value  # what `a` was unpacked from
                            if not starred:
                                self.frame.data.setdefault("unpacked_at", {})[element.id] = i
                        elif isinstance(element, ast.Starred):
                            starred = True
                            if isinstance(element.value, ast.Name):
                                self.bind(element.value.id, NOTHING)

    def _rebind_side(self, name: str, tag: int) -> None:
        """A buffer written on one side of its rows is padded on that side from now on."""
        current = self.frame.env.get(name)
        if current is not None:
            self.bind(name, current.with_tags((current.tags & ~SIDE_TAGS) | tag), self.bound_expr(name))

    def built_per_sample(self, value: ast.expr) -> bool:
        """Is ``value`` a list built entry by entry: a comprehension, a broadcast, ``torch.full((n,), v)``,
        a list literal of several entries, or a local bound to one or grown by appends?"""
        for _ in range(3):
            if isinstance(value, ast.Name):
                if value.id in self.frame.data.get("grown", {}):
                    return True
                bound = self.bound_expr(value.id)
                if bound is None:
                    return False
                value = bound
                continue
            if isinstance(value, ast.Call) and self.imports.qualify(value.func) in _CONVERSIONS and value.args:
                value = value.args[0]
                continue
            break
        if isinstance(value, (ast.ListComp, ast.GeneratorExp)):
            return True
        if isinstance(value, ast.List) and len(value.elts) > 1:
            return True
        return self.idiom("broadcast", value) is not None

    def at_top(self) -> bool:
        """Module or class level: a binding there is configuration, not a local."""
        return len(self.frames) == 1 or self.in_class_body > 0 and self.frame.cls is None

    def augment(self, node: ast.AugAssign) -> None:
        target = node.target
        keys, _ = self.store_keys(target)
        self.rewrite(target, None)
        if isinstance(target, ast.Name):
            added = self.classify(node.value)
            if sums_sizes(node, bool(self.loops), lambda v: bool(added.tags & SEQ) and not added.tags & (PAD | PACKED)):
                added = added.with_tags(added.tags | STREAM)  # a running total of sizes: a stream's length
            self.bind(target.id, self.lookup(target.id) | added, None)
        entry = extends_collection(node.value, self.bound_expr)  # `d["k"] += pad` rounds a number up
        for key in keys:
            self.note_write(key, node.value, node=target, entry=entry, fresh=self.fresh_root(target))

    def record(self, target: ast.expr, value: Value, stored: ast.expr) -> None:
        """A padded length stored into a field: later padding leaves it stale (LC105)."""
        if isinstance(target, ast.Name) or not value.tags & PAD or value.tags & SRC:
            return
        name, entry = target_name(target)
        if name is None or entry:
            return
        local = stored.id if isinstance(stored, ast.Name) else ""
        self.facts.records.append(Record(self.frame.index, self.source.span(target), name, self.next_tick(), local))

    # -- per-sample transforms of fields (partner fields left out) --

    def transform(self, target: ast.expr, key: str, value: ast.expr) -> None:
        """``d["k"] = [f(x, ...) for x in d["k"]]`` (or through ``zip``): ``f`` transforms field ``k``; the
        list may be a local built so (by the comprehension, or by a loop's appends: `built_by_loop`)."""
        value = self.resolved(value) or value
        if not isinstance(value, (ast.ListComp, ast.GeneratorExp)) or not value.generators:
            return
        walked = self.classify(value.generators[0].iter)
        if key not in walked.fields and not _reads_key(value.generators[0].iter, key, self):
            return
        for part in walk(value.elt):
            if isinstance(part, ast.Call):
                name = self.imports.qualify(part.func) or ""
                tail = last_name(part.func) or ""
                root = name.split(".", 1)[0]
                if not tail or root in _EXTERNAL or name.startswith("torch.") or (
                    isinstance(part.func, ast.Name) and tail in _BUILTINS and tail not in self.imports.aliases
                ) or (isinstance(part.func, ast.Attribute) and tail in _COMMON_METHODS):
                    continue
                self.facts.transforms.append(Transform(
                    self.frame.index, key, name or tail, self.source.span(target), self.next_tick(),
                ))

    # -- rewrites of per-sample fields (LC105) --

    def fresh_root(self, container: ast.expr) -> bool:
        root = root_name(container)
        return root is not None and root in self.frame.fresh

    def converted(self, value: ast.expr | None, target: ast.expr) -> bool:
        """Is ``value`` the field ``target`` itself, converted (``torch.tensor(d["total_lengths"])``)?"""
        while isinstance(value, ast.Call):
            func = value.func
            if isinstance(func, ast.Attribute) and func.attr in _CONVERSION_METHODS:
                value = func.value
            elif self.imports.qualify(func) in _CONVERSIONS and value.args:
                value = value.args[0]
            else:
                return False
        return value is not None and same(value, target)

    def rewrite(self, target: ast.expr, value: ast.expr | None) -> None:
        if not isinstance(target, ast.Subscript):
            return
        key = string_key(target)
        if key is not None:
            # A whole per-sample list replaced: a rewrite of its lengths when the new list holds
            # lengths (a token list is replaced by conversions too, `.cuda()` per sample); never
            # the same field converted, nor a field of a container built here.
            if self.fresh_root(target.value) or self.converted(value, target):
                return
            tags = self.classify(value).tags if value is not None else 0
            if not tags & (TOK | SAMPLE | STREAM):
                self.add_rewrite(target, key, entry=False, tags=tags)
            return
        base = target.value
        if isinstance(base, ast.Attribute) and root_name(base) == "self":
            return  # an object's own cache (`self.total_lengths[i] = n`), not the rollout's
        inner = string_key(base) if isinstance(base, ast.Subscript) else None
        if inner is None or self.fresh_root(base):
            return
        tags = self.classify(value).tags if value is not None else 0
        self.add_rewrite(target, inner, entry=True, tags=tags)

    def add_rewrite(self, node: ast.AST, name: str, *, entry: bool, tags: int) -> None:
        self.facts.rewrites.append(Rewrite(
            self.frame.index, self.source.span(node), self.source.snippet(node), name, self.next_tick(), entry, tags,
        ))

    # -- broadcasts (LC101) --

    def check_broadcast(self, value: ast.expr, target: str | None, kind: str) -> None:
        """A list giving every entry one value, stored as ``target``; the project judges it."""
        if target is None:
            return
        found = self.classify(value)
        origin = found.origin
        if not found.tags & BCAST or origin is None:
            return
        known = self.broadcasts.get(id(origin))
        if known is not None:
            if kind in ("field", "keyword") and known.target_kind == "name":
                known.target, known.target_kind = target, kind  # stored on: judged as what it becomes
            return
        repeated = self.idiom("broadcast", origin)
        placeholder = is_init_value(repeated)
        if kind == "name" and not found.tags & (MAX | PAD):
            return  # a local list of one value: judged if it is stored into a field later
        if placeholder and kind == "name":
            return
        self.broadcasts[id(origin)] = Broadcast(
            self.frame.index, self.source.span(origin), self.source.snippet(origin), target, found.tags,
            self.per_sample(broadcast_count(origin, self.imports), shape=_sized_by_shape(origin)), placeholder, kind,
            tuple(sorted(found.fields)), tuple(sorted(found.params)), tuple(sorted(found.calls)),
        )

    def per_sample(self, count: ast.expr | None, *, shape: bool = False) -> bool:
        """Does ``count`` (a broadcast's entry count) count samples: the length of a collection
        (``len(xs)``, ``xs.size(0)``, ``xs.shape[0]``) or a walk over one, directly or through a
        local bound to one? ``xs.size()`` with no argument is a tensor's only where a shape is
        taken (``shape``: ``torch.full(xs.size(), m)``); where an integer is (``range(g.size())``,
        ``[m] * n``), it is a process group's or a container's count, not the samples."""
        for _ in range(3):
            if count is None:
                return False
            if isinstance(count, (ast.Tuple, ast.List)) and count.elts:
                count, shape = count.elts[0], False
                continue
            if isinstance(count, ast.Name):
                bound = self.bound_expr(count.id)
                if bound is None:
                    return False
                count = bound
                continue
            break
        if isinstance(count, ast.Call):
            func = count.func
            if isinstance(func, ast.Name) and func.id == "len" and count.args:
                # `len(cu_seqlens)`: the boundaries (or packed rows) of cumulative lengths, not samples
                return not isinstance(count.args[0], ast.Constant) and not self.classify(count.args[0]).tags & PACKED
            if isinstance(func, ast.Name) and func.id == "range":
                args = positional(count)
                return len(args) == 1 and self.per_sample(args[0])
            if isinstance(func, ast.Attribute) and func.attr == "size":
                return int_value(count.args[0]) == 0 if count.args else shape
            return isinstance(func, ast.Attribute) and func.attr == "numel"
        if isinstance(count, ast.Subscript) and isinstance(count.value, ast.Attribute) and count.value.attr == "shape":
            return int_value(count.slice) == 0
        # A comprehension's iterable: a walk over a collection.
        return isinstance(count, (ast.Name, ast.Subscript, ast.Attribute, ast.Call, ast.ListComp))

    def returned(self, value: ast.expr) -> None:
        """A returned broadcast, and a function returning its parameter rounded up (a round-up helper)."""
        frame = self.frame
        if frame.parent is None:
            return
        name = self.facts.functions[frame.index].qualname.rsplit(".", 1)[-1]
        if self.vocab.mentions_source(name):
            # `def uniform_max_seq_lens(...): return [P] * n` names a configured source it produces (a hint).
            self.check_broadcast(value, self.vocab.source_in(name), "field")
        self.check_broadcast(value, "", "return")
        idiom = self.idiom("round_up", value)
        state = self.state
        if frame.layout == "bshd" and isinstance(value, ast.Name) and self.is_parameter(value.id):
            self.note_padded_param(value.id, value, "returned as the length where the layout is BSHD")
        if idiom is not None and len(idiom.values) == 1:
            n, m = idiom.values[0], idiom.unit
            if isinstance(n, ast.Name) and isinstance(m, ast.Name) and n.id in state.positional and m.id in state.positional:
                state.rounds = (state.positional.index(n.id), state.positional.index(m.id))

    # -- per-sample entries as batch lengths (LC103) --

    def container(self, node: ast.expr) -> str | None:
        """The container a per-sample list was read from, through local aliases."""
        root = root_name(node)
        if root is None:
            return None
        return self.state.aliases.get(root, root)

    def guard(self, test: ast.expr, *, negated: bool) -> None:
        state = self.state
        for kind, collection in match_agreement(test, self.imports, negated=negated):
            found = self.classify(collection)
            container = self.container(collection)
            if kind == "single" or not found.fields:
                state.guarded.add(container)  # one sample per micro-batch: nothing in it can disagree
            for key in found.fields:
                state.guard_fields.add(f"{container}:{key}")
            for param in found.params:
                state.guard_fields.add(f"param:{param}")

    def walks(self, iterable: ast.expr) -> None:
        state = self.state
        if not state.iterates:
            per_sample = SEQ | TOK | SRCLIST
            state.iterates = any(
                self.classify(n).tags & per_sample or self.classify(n).fields for n in walk(iterable)
            )

    # ------------------------------------------------------------ expressions

    def scan(self, node: ast.AST) -> None:
        """Record what ``node`` and its parts do (calls, pads, reads), in source order."""
        kind = type(node)
        if kind is ast.Name:
            if node.id in self.vocab.sources:  # type: ignore[attr-defined]
                self.state.reads_source = True
                self.mentions_source = True
            elif node.id in self.vocab.packed:  # type: ignore[attr-defined]
                self.state.reads_packed = True
            return
        if kind is ast.Constant:
            value = node.value  # type: ignore[attr-defined]
            if type(value) is str and value in self.vocab.sources:
                self.mentions_source = True
            return
        if kind is ast.Call:
            self.call(node)  # type: ignore[arg-type]
            return
        if kind is ast.BinOp:
            if id(node) not in self.claimed:
                idiom = self.idiom("round_up", node)
                label = "round_up"
                if idiom is None:
                    idiom, label = self.idiom("pad_amount", node), "pad_amount"
                if idiom is None and isinstance(node.op, ast.Sub):  # type: ignore[attr-defined]
                    idiom, label = match_chunk_pad(node, self.chunk_of), "chunk_pad"
                if idiom is not None:
                    self.pad(idiom, label)
            self.length_roles(node)  # type: ignore[arg-type]
            self.shift_mismatch(node)  # type: ignore[arg-type]
            self.scan(node.left)  # type: ignore[attr-defined]
            self.scan(node.right)  # type: ignore[attr-defined]
            return
        if kind is ast.Subscript:
            self.subscript(node)  # type: ignore[arg-type]
            return
        if kind is ast.Attribute:
            attr = node.attr  # type: ignore[attr-defined]
            if attr in self.vocab.sources:
                self.state.reads_source = True
                self.mentions_source = True
            elif attr in self.vocab.packed:
                self.state.reads_packed = True
            if isinstance(node.value, ast.Subscript):  # type: ignore[attr-defined]
                self.attribute_bases.add(id(node.value))  # type: ignore[attr-defined]
            self.scan(node.value)  # type: ignore[attr-defined]
            return
        if kind in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            for gen in node.generators:  # type: ignore[attr-defined]
                self.scan(gen.iter)
                self.walks(gen.iter)
            if kind is not ast.DictComp:
                self.bucket_search(node)  # type: ignore[arg-type]
            self.push_comprehension(node)  # type: ignore[arg-type]
            try:
                for gen in node.generators:  # type: ignore[attr-defined]
                    for test in gen.ifs:
                        self.scan(test)
                if kind is ast.DictComp:
                    self.scan(node.key)  # type: ignore[attr-defined]
                    self.scan(node.value)  # type: ignore[attr-defined]
                else:
                    self.scan(node.elt)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            return
        if kind is ast.Dict:
            record = self.next_tick()  # the fields of one literal are one record's
            for key, value in zip(node.keys, node.values):  # type: ignore[attr-defined]
                if key is not None:
                    self.scan(key)
                self.scan(value)
                name = string_value(key)
                if name is not None:
                    self.note_write(name, value, record=record)
                    self.check_broadcast(value, name, "field")
                    self.judge_literal(name, value, binding=True)
            return
        if kind is ast.Lambda:
            args = node.args  # type: ignore[attr-defined]
            self.push_scope([a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)])
            try:
                self.scan(node.body)  # type: ignore[attr-defined]
            finally:
                self.pop_scope()
            return
        if kind is ast.NamedExpr:
            self.scan(node.value)  # type: ignore[attr-defined]
            if isinstance(node.target, ast.Name):  # type: ignore[attr-defined]
                self.bind(node.target.id, self.classify(node.value), node.value)  # type: ignore[attr-defined]
            return
        if kind is ast.IfExp:
            self.in_test += 1
            self.scan(node.test)  # type: ignore[attr-defined]
            self.in_test -= 1
            body, other = self.layout_arms_of(node)  # type: ignore[arg-type]
            frame = self.frame
            saved = frame.layout
            frame.layout = body or saved
            self.positive.append(self.source.segment(node.test))  # type: ignore[attr-defined]
            self.scan(node.body)  # type: ignore[attr-defined]
            self.positive.pop()
            frame.layout = other or saved
            self.scan(node.orelse)  # type: ignore[attr-defined]
            frame.layout = saved
            return
        for child in children(node):
            if isinstance(child, ast.expr):
                self.scan(child)
            elif isinstance(child, ast.keyword):
                self.scan(child.value)
            elif isinstance(child, ast.comprehension):
                self.scan(child.iter)

    def length_roles(self, node: ast.BinOp) -> None:
        """Which parameters this arithmetic shows to be a padded or a true length.

        ``p - x.size(0)`` (a padded length less a sample's size) is a pad amount: ``p`` is a padded
        length. A parameter rounded up, or divided into CP chunks, is the layout's length: the
        padded one where the layout is BSHD, the true one where it is packed.
        """
        if isinstance(node.op, ast.Sub) and self.pad_context:
            left, right = node.left, node.right
            if isinstance(left, ast.Name) and self.is_parameter(left.id) and self.classify(right).tags & SEQ and (
                not self.classify(left).tags & (SEQ | PAD | MAX)
            ) and left.id not in {n.id for n in walk(right) if isinstance(n, ast.Name)}:
                self.note_padded_param(left.id, node, f"`{self.source.snippet(node, 40)}` is a pad amount")
        layout = self.frame.layout
        if layout is None:
            return
        idiom = self.idiom("ceil_div", node) or self.idiom("round_up", node)
        if idiom is None:
            return
        for value in idiom.values:
            if isinstance(value, ast.Name) and self.is_parameter(value.id):
                why = f"divided into chunks where the layout is {layout.upper()}"
                if layout == "bshd":
                    self.note_padded_param(value.id, node, why)
                else:
                    self.note_true_param(value.id, node, why)

    def layout_arms_of(self, node: ast.IfExp) -> tuple[str | None, str | None]:
        body, other = self.layout_of(node.test)
        self.layout_arms(node, body, other)
        return body, other

    def layout_arms(self, node: ast.IfExp, body: str | None, other: str | None) -> None:
        """``max_seq_len if qkv_format == "bshd" else tokens.size(0)``: the parameter the BSHD arm
        picks where the packed arm takes a sample's size is the padded length; a parameter the packed
        arm picks is the true length."""
        for arm, layout, rest in ((node.body, body, node.orelse), (node.orelse, other, node.body)):
            if layout is None or not isinstance(arm, ast.Name) or not self.is_parameter(arm.id):
                continue
            why = f"the {layout.upper()} arm of `{self.source.snippet(node, 40)}`"
            if layout == "bshd":
                self.note_padded_param(arm.id, node, why)
            elif isinstance(rest, ast.Name) and self.is_parameter(rest.id) or self.classify(rest).tags & SEQ:
                self.note_true_param(arm.id, node, why)

    def subscript(self, node: ast.Subscript) -> None:
        key = string_key(node)
        if key is not None:
            self.state.reads.add(key)
            if key in self.vocab.sources:
                self.state.reads_source = True
                self.mentions_source = True
            elif key in self.vocab.packed:
                self.state.reads_packed = True
        self.scan(node.value)
        self.scan(node.slice)
        if not self.in_test:
            self.clashes_at(node)
            self.read_side(node)
        index = int_value(index_of(node))
        if self.in_test or index is None or id(node) in self.attribute_bases:
            return  # a check, a key, or an entry whose attribute is read (`xs[0].device`): no length used
        found = self.classify(node.value)
        if found.tags & (SAMPLE | STREAM):
            return
        if found.tags & SEQ and not found.tags & SRCLIST:
            self.state.samples.add(index)
        params = found.params if isinstance(node.value, ast.Name) else frozenset()
        if not (found.tags & SRCLIST or found.fields or params):
            return
        self.facts.entry_reads.append(EntryRead(
            self.frame.index, self.source.span(node), self.source.snippet(node), self.container(node.value), index,
            tuple(sorted(found.fields)), tuple(sorted(params)), bool(found.tags & SRCLIST),
        ))

    # -- pads (LC102, LC107) --

    def pad(self, idiom: Idiom, kind: str) -> None:
        node = idiom.node
        for part in walk(node):
            self.claimed.add(id(part))
        value = NOTHING
        for part in idiom.values:
            value = value | self.classify(part)
        unit = self.classify(idiom.unit)
        unit_foreign = unit.tags & FOREIGN and not unit.tags & (CP | UNIT)
        if value.tags & SRC or unit_foreign or (value.tags & FOREIGN and not value.tags & (SEQ | TOK)):
            return  # a consumer of a configured source, or a configured kernel/quantisation multiple
        if not self.in_test:
            self.unit_picked(idiom.unit, node)
        self.add_pad(kind, node, value, unit, node, unit_node=idiom.unit,
                     rounding="next" if kind == "pad_amount" and isinstance(node.op, ast.Sub) else "ceil",  # type: ignore[attr-defined]
                     operand=padded_operand(idiom.values, self.imports))

    def add_pad(self, kind: str, node: ast.AST, value: Value, unit: Value, carrier: ast.AST, *,
                unit_node: ast.expr | None = None, rounding: str = "ceil", operand: str = "") -> None:
        text = canonical(unit_node, self.unit_of, self.vocab.is_pad_multiplier) if unit_node is not None else ""
        decided = unit_node
        if isinstance(unit_node, ast.Name):
            decided = self.bound_expr(unit_node.id) or unit_node
        pad = Pad(
            self.frame.index, kind, self.source.span(node), self.source.snippet(node), value.tags, unit.tags,
            text, rounding, self.frame.layout, "local", self.next_tick(), tuple(sorted(value.params)),
            tuple(sorted(value.fields)), tuple(sorted(unit.params)),
            self.source.span(decided) if decided is not None else None, operand,
        )
        self.state.pads.append((pad, carrier))
        if unit_node is not None:
            self.state.unit_names |= {n.id for n in walk(unit_node) if isinstance(n, ast.Name)}
        if kind in ("round_up", "pad_amount", "chunk_pad"):
            self.state.note_space(self.source.snippet(node, 40), "padded length P", node.lineno,  # type: ignore[attr-defined]
                                  f"rounded up to a multiple of `{text}`" if text else "rounded up")

    def pad_target(self, expr: ast.expr, carrier: ast.AST) -> None:
        """``expr`` sizes a pad or a new tensor (``carrier``, whose fate decides)."""
        found = self.classify(expr)
        if found.tags & MAX and not found.tags & (PAD | SRC | BCAST | FOREIGN):
            origin = found.origin or expr
            if not self.in_test:
                self.wide_max(origin)
            self.add_pad("pad_target", origin, found, NOTHING, carrier)
            self.state.note_space(self.source.snippet(origin, 40), "one length for many samples (a maximum)",
                                  origin.lineno, "a maximum over lengths sizes a tensor")  # type: ignore[attr-defined]

    # -- calls --

    def call(self, node: ast.Call) -> None:
        func = node.func
        imports = self.imports
        claimed = id(node) in self.claimed
        if not claimed:
            idiom = self.idiom("round_up", node)
            if idiom is not None:
                self.pad(idiom, "round_up")
        if isinstance(func, ast.Attribute):
            self.scan(func.value)
        for arg in node.args:
            self.scan(arg)
        for kw in node.keywords:
            self.scan(kw.value)
        name = imports.qualify(func) or ""
        tail = last_name(func) or ""
        args = positional(node)
        state = self.state
        vocab = self.vocab
        if not claimed:
            if name in _PAD:
                amount = argument(node, "pad", 1)
                if amount is not None:
                    self.pad_target(amount, node)
                    self.pad_context += 1
                    for part in walk(amount):
                        if isinstance(part, ast.BinOp):
                            self.length_roles(part)
                    if not self.in_test:
                        # A width hoisted into a local (`w = m - n` then `pad(x, (0, w))`) is the same width.
                        for part in self.through_locals(amount):
                            if isinstance(part, ast.BinOp):
                                self.stream_width(part)
                    self.pad_context -= 1
            elif name in _FILLED or tail == "new_full":
                size = argument(node, "size", 0)
                if size is not None:
                    self.pad_target(size, node)
            elif name in _SIZED or (tail in _NEW and isinstance(func, ast.Attribute)):
                for size in (*args, keyword(node, "size")):
                    if size is not None:
                        self.pad_target(size, node)
            if (name in _PAD or tail == "pad_sequence") and not self.in_test:
                self.pad_call_placed(node, name or tail)
            elif name in ("torch.cat", "torch.concat", "torch.concatenate"):
                self.row_segments(node)
            if tail == "pad_sequence":
                sequences = argument(node, "sequences", 0)
                if sequences is not None and self.classify(sequences).has(TOK):
                    self.add_pad("pad_sequence", node, self.classify(sequences), NOTHING, node)
        if name in _MAXES:
            self.max_of_units(node, args)
        if name == "zip" and len(args) > 1 and not self.in_test:
            self.zipped(node, args)
        if tail in ("bisect", "bisect_left", "bisect_right") and args and name.split(".", 1)[0] in ("bisect", ""):
            self.bisect_search(args)
        # Writes through calls: `d.update(k=...)`, `dict(k=...)`, `.append`.
        if tail == "update" or name == "dict":
            for kw in node.keywords:
                if kw.arg is not None:
                    self.note_write(kw.arg, kw.value, node=kw.value)
                    self.check_broadcast(kw.value, kw.arg, "field")
            if tail == "update" and isinstance(func, ast.Attribute) and not self.fresh_root(func.value):
                for kw in node.keywords:
                    if kw.arg is not None:
                        self.note_write(kw.arg, kw.value, node=kw.value, fresh=False)
                self.update_rewrite(node)
        elif tail in ("append", "extend", "insert") and isinstance(func, ast.Attribute):
            keys, _ = self.store_keys(func.value) if isinstance(func.value, (ast.Subscript, ast.Attribute)) else ((), False)
            for key in keys:
                self.note_write(key, args[-1] if args else None, node=node, entry=True,
                                fresh=self.fresh_root(func.value))
            if isinstance(func.value, ast.Name) and args:
                self.frame.data.setdefault("grown", {}).setdefault(func.value.id, []).append(args[-1])
            if isinstance(func.value, ast.Name) and args and func.value.id in self.frame.env:
                # A list grown here carries what it is grown with (lengths appended: a list of lengths).
                grown = self.classify(args[-1])
                if tail != "extend" and grown.tags & SAMPLE:
                    grown = grown.with_tags((grown.tags & ~SAMPLE) | TOK)
                current = self.frame.env[func.value.id]
                self.frame.env[func.value.id] = current | Value(grown.tags & ~BCAST, None, grown.params, grown.fields)
                self.forget()
        elif tail in ("get", "pop") and args and string_value(args[0]) is not None:
            state.reads.add(string_value(args[0]))  # type: ignore[arg-type]
            if string_value(args[0]) in vocab.sources:
                state.reads_source = True
                self.mentions_source = True
        else:
            for kw in node.keywords:  # `Batch(max_seq_lens=[m] * n)`: a record's field
                if kw.arg is not None:
                    self.check_broadcast(kw.value, kw.arg, "keyword")
                    if self.classify(kw.value).tags & PACKED and tail[:1].isupper():
                        # `PackedSeqParams(cu_seqlens_q=cu)`: a record built with the packed batch's
                        # description (a class is called by its CapWords name).
                        self.note_write(kw.arg, kw.value, node=kw.value)
        check = is_check_name(tail)
        if tail and tail != "update" and not check and (
            vocab.mentions_source(tail) or tail in vocab.owner_names
        ):
            # Calling a configured owner (or a `recompute_max_seq_lens`) rewrites the source.
            state.source_ticks.append(self.next_tick())
            self.mentions_source = True
        if check and (library_helper(func, imports) is not None or tail in vocab.owner_names):
            for value in (*node.args, *(k.value for k in node.keywords)):
                state.guarded.add(self.container(value))
        self.bucket_call(node, tail, args)
        self.record_call(node, name, tail)

    def zipped(self, node: ast.Call, args: Sequence[ast.expr]) -> None:
        """``zip(d["a"], d["b"], ...)``: fields of one record walked entry for entry (`Zip`); a field read
        into a local first (``a = d["a"]`` then ``zip(a, d["b"])``) is that field."""
        by_record: dict[str, list[str]] = {}
        for arg in args:
            arg = self.resolved(arg) or arg
            key = string_key(arg) if isinstance(arg, ast.Subscript) else None
            if key is not None:
                by_record.setdefault(ast.dump(arg.value), []).append(key)  # type: ignore[attr-defined]
        for keys in by_record.values():
            if len(set(keys)) > 1:
                self.facts.zips.append(Zip(self.frame.index, self.source.span(node), self.source.snippet(node, 60),
                                           tuple(keys)))

    def record_call(self, node: ast.Call, name: str, tail: str) -> None:
        func = node.func
        if not tail:
            return
        if isinstance(func, ast.Name):
            if tail in _BUILTINS and tail not in self.imports.aliases:
                return
        else:
            root = name.split(".", 1)[0]
            if root in _EXTERNAL or name.startswith("torch.") or (
                tail in _COMMON_METHODS and tail not in self.vocab.helpers and root not in ("self", "cls")
                and root not in self.imports.aliases
            ):
                return
        if name.split(".", 1)[0] in _EXTERNAL:
            return
        arguments: list[Arg] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                arguments.append(self.arg("*", arg.value))
            else:
                arguments.append(self.arg(None, arg))
        for kw in node.keywords:
            arguments.append(self.arg(kw.arg or "**", kw.value))
            if kw.arg is None:
                # `f(t, **layout)` with `layout = dict(qkv_format="bshd", max_seq_len=n)`:
                # each key is passed as if by keyword.
                arguments.extend(self.arg(key, value) for key, value in self.splat_items(kw.value))
        callee = name if name else tail
        state = self.state
        unit = ""
        if len(node.args) == 2 and not node.keywords and library_helper(func, self.imports) is None:
            state.candidates.append((len(state.calls), node))  # maybe the project's round-up helper
            unit = canonical(node.args[1], self.unit_of, self.vocab.is_pad_multiplier)
        state.calls.append(Call(
            callee, self.source.span(node), self.next_tick(), self.frame.layout, tuple(arguments),
            bool(self.expecting_error), self.source.snippet(node, 60), "", unit,
        ))

    def arg(self, keyword_name: str | None, value: ast.expr) -> Arg:
        found = self.classify(value)
        tags = found.tags
        text = ""
        span = None
        keys = None
        if tags & (SEQ | MAX | TOK | SRC | PAD | PACKED | STREAM | SAMPLE) or found.fields or found.params or found.calls or (
            isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value in LAYOUT_KINDS
        ):
            text = self.source.snippet(value, 40)
            span = self.source.span(value)
        if keyword_name == "**":
            keys = self.splat_keys(value)
        params = tuple(sorted(found.params)) if found.params else ()
        bare = False
        if isinstance(value, ast.Name) and self.is_parameter(value.id):
            params = (value.id,)
            bare = True
        return Arg(keyword_name, tags, params, text, span, keys, tuple(sorted(found.fields)), bare,
                   tuple(sorted(found.calls)))

    def splat_items(self, value: ast.expr) -> list[tuple[str, ast.expr]]:
        """The keys and values of ``**kw`` when ``kw`` is a dict literal or ``dict(...)`` here."""
        if isinstance(value, ast.Name):
            bound = self.bound_expr(value.id)
            if bound is None:
                return []
            value = bound
        if isinstance(value, ast.Dict) and all(string_value(k) is not None for k in value.keys):
            return [(string_value(k), v) for k, v in zip(value.keys, value.values)]  # type: ignore[misc]
        if isinstance(value, ast.Call) and self.imports.qualify(value.func) == "dict" and not value.args:
            if all(k.arg is not None for k in value.keywords):
                return [(k.arg, k.value) for k in value.keywords]  # type: ignore[misc]
        return []

    def splat_keys(self, value: ast.expr) -> tuple[str, ...] | None:
        """The keys of ``**kw`` when known (see `splat_items`); None when they are not."""
        items = self.splat_items(value)
        if items:
            return tuple(key for key, _ in items)
        if isinstance(value, (ast.Dict, ast.Call)) or (isinstance(value, ast.Name) and self.bound_expr(value.id)):
            bound = value if not isinstance(value, ast.Name) else self.bound_expr(value.id)
            if isinstance(bound, ast.Dict) and not bound.keys:
                return ()
        return None

    def update_rewrite(self, node: ast.Call) -> None:
        for kw in node.keywords:
            if kw.arg is not None:
                tags = self.classify(kw.value).tags
                if not tags & (TOK | SAMPLE | STREAM):
                    self.add_rewrite(node, kw.arg, entry=False, tags=tags)
        for arg in node.args:
            if isinstance(arg, ast.Dict):
                for key, value in zip(arg.keys, arg.values):
                    name = string_value(key)
                    tags = self.classify(value).tags
                    if name is not None and not tags & (TOK | SAMPLE | STREAM):
                        self.add_rewrite(node, name, entry=False, tags=tags)


def _sized_by_shape(broadcast: ast.AST) -> bool:
    """Does ``broadcast`` take its entry count as a shape (``torch.full(shape, m)``,
    ``torch.ones(shape) * m``), not as an integer (``[m] * n``) or an iterable (a comprehension)?"""
    if isinstance(broadcast, ast.Call):
        return (last_name(broadcast.func) or "").endswith("full")
    return isinstance(broadcast, ast.BinOp) and not any(isinstance(s, ast.List) for s in (broadcast.left, broadcast.right))


def _gathers(value: ast.expr) -> bool:
    """``[xs[i] for i in order]``: entries picked by an index list (reordered, or a share of them)."""
    if not isinstance(value, ast.ListComp) or len(value.generators) != 1:
        return False
    target, elt = value.generators[0].target, value.elt
    return (isinstance(target, ast.Name) and isinstance(elt, ast.Subscript) and isinstance(elt.slice, ast.Name)
            and elt.slice.id == target.id and not value.generators[0].ifs)


def _unit_shaped(value: ast.expr) -> bool:
    """Could ``value`` be an alignment unit: a literal, a name, an attribute, a product, ``lcm``/``max``?"""
    if isinstance(value, (ast.Constant, ast.Name, ast.Attribute)):
        return True
    if isinstance(value, ast.BinOp):
        return isinstance(value.op, (ast.Mult, ast.LShift)) and _unit_shaped(value.left) and _unit_shaped(value.right)
    if isinstance(value, ast.Call):
        return (last_name(value.func) or "") in ("lcm", "max", "int", "get_world_size") or not value.args
    return False


def _string_tuple(node: ast.AST) -> tuple[str, ...] | None:
    """``("a", "b")``: the strings of a literal tuple or list of two or more string constants."""
    if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) >= 2:
        found = [string_value(e) for e in node.elts]
        if all(f is not None for f in found):
            return tuple(found)  # type: ignore[arg-type]
    return None


def _targets(node: ast.Assign | ast.AugAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _targets_of(node: ast.Assign | ast.AugAssign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _reads_key(node: ast.AST, key: str, flow: Flow) -> bool:
    """Does ``node`` read field ``key`` (directly, or through a local bound to a read of it)?"""
    for part in walk(node):
        if isinstance(part, ast.Name):
            bound = flow.bound_expr(part.id)
            if bound is not None and key in flow.classify(bound).fields:
                return True
    return False


_GROWS = frozenset({"torch.nn.functional.pad", "numpy.pad", "torch.cat", "torch.concat", "torch.concatenate",
                    "numpy.concatenate"})
"""Calls that make a tensor longer: a pad, or a concatenation with more entries."""


def _shorter_than(test: ast.expr) -> str | None:
    """``d`` of a test that ``d`` is shorter than something: ``len(d) < p``, ``p > d.shape[0]``,
    ``d.size(0) < p``, ``d.numel() != p``."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    op, left, right = test.ops[0], test.left, test.comparators[0]
    if isinstance(op, (ast.Gt, ast.GtE)):
        left, right = right, left
    elif not isinstance(op, (ast.Lt, ast.LtE, ast.NotEq)):
        return None
    del right
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Name) and left.func.id == "len" \
            and len(left.args) == 1 and isinstance(left.args[0], ast.Name):
        return left.args[0].id
    if isinstance(left, ast.Call) and isinstance(left.func, ast.Attribute) and left.func.attr in ("size", "numel") \
            and isinstance(left.func.value, ast.Name):
        return left.func.value.id
    if isinstance(left, ast.Subscript) and isinstance(left.value, ast.Attribute) and left.value.attr == "shape" \
            and isinstance(left.value.value, ast.Name):
        return left.value.value.id
    return None


def _ends(body: Iterable[ast.stmt]) -> bool:
    """Does ``body`` always end in ``return`` or ``raise`` (its last statement)?"""
    last = None
    for last in body:
        pass
    if last is None:
        return False
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    if isinstance(last, ast.If):
        return _ends(last.body) and _ends(last.orelse)
    return False


def _join(envs: list[dict[str, Value]], before: dict[str, Value]) -> dict[str, Value]:
    """The locals after alternative branches: each name carries what any branch gave it."""
    if len(envs) == 1:
        return envs[0]
    out = dict(envs[0])
    for env in envs[1:]:
        for name, value in env.items():
            mine = out.get(name)
            if mine is None:
                previous = before.get(name)
                out[name] = value if previous is None else previous | value
            elif mine is not value:
                out[name] = mine | value
        for name in out.keys() - env.keys():
            previous = before.get(name)
            if previous is not None and out[name] is not previous:
                out[name] = out[name] | previous
    return out


def _join_exprs(alternatives: list[dict[str, ast.expr]], rebound: set[str],
                synthetic: list[ast.AST]) -> dict[str, ast.expr]:
    """The expressions locals are bound to after alternative branches: a local bound to another
    expression on each path is bound to both, as ``a if <path> else b`` (an `ast.IfExp` whose test is
    no node of the file, kept in ``synthetic``), so a check that reads the local through its
    expression reads every path. A path where the local has no expression (a parameter, a name bound
    by a loop) leaves the last walked path's expression, as before."""
    if len(alternatives) == 1:
        return alternatives[0]
    out = dict(alternatives[-1])
    for name in rebound:  # the names bound on some path (the others are bound as before on all)
        found = [exprs.get(name) for exprs in alternatives]
        if any(e is None for e in found):
            latest = next((e for e in reversed(found) if e is not None), None)
            if latest is not None:
                out[name] = latest
            continue
        distinct: list[ast.expr] = []
        for expr in found:
            if all(expr is not d for d in distinct):
                distinct.append(expr)  # type: ignore[arg-type]
        if len(distinct) == 1:
            out[name] = distinct[0]
            continue
        joined = distinct[-1]
        for expr in reversed(distinct[:-1]):
            test = ast.copy_location(ast.Name(id=JOINED_PATH, ctx=ast.Load()), expr)
            joined = ast.copy_location(ast.IfExp(test=test, body=expr, orelse=joined), expr)
            synthetic.append(joined)
        out[name] = joined
    return out


def _written_in(body: list[ast.stmt]) -> set[str]:
    """The names an assignment anywhere in ``body`` (nested blocks included) writes."""
    return {n.id for stmt in body for s in (stmt, *nodes(stmt))
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for t in _targets_of(s) for n in walk(t) if isinstance(n, ast.Name)}
