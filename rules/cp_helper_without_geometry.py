from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from layoutcheck.lint.edits import SAFE, Edit, Fix
from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries

if TYPE_CHECKING:
    import libcst as cst

    from layoutcheck.lint.fixsite import FixSite

_CP_UTILS = '''
def get_logits_and_tokens_offset_with_cp(
    total_length, response_length, qkv_format="thd", max_seq_len=None, cp_rank=None, cp_size=None
):
    length = total_length if qkv_format == "thd" else max_seq_len
    chunk = (length + 2 * cp_size - 1) // (2 * cp_size)
    return chunk, chunk * cp_rank, total_length - response_length


def slice_with_cp(tokens, pad_value, qkv_format="thd", max_seq_len=None, parallel_state=None):
    if qkv_format == "bshd":
        assert max_seq_len is not None
    return tokens
'''
_PACKED_ONLY = '''
def get_logits_and_tokens_offset_with_cp(total_length, response_length):
    # reads the CP rank from global state and only ever serves packed batches
    return total_length, response_length
'''


class CpHelperWithoutGeometry(ModelRule):
    """A CP slicing/offset helper called without its layout arguments.

    ## What it does
    Flags a call to a layout helper that omits its layout kind. A layout
    helper is a function of the tree that takes the layout kind (a parameter
    compared with `"thd"`/`"bshd"` or defaulting to one) and one sample's
    padded length `P` (a parameter used as the length where the layout is
    BSHD, as a pad target, asserted present under BSHD, or passed on to
    another helper's), whatever the helper and its parameters are called;
    helpers defined outside the tree are named in `cp-helpers`. The call
    must pass the layout kind, unless the call sits where the layout is known to be
    packed: `if qkv_format == "thd":`, the `else` of
    `if qkv_format == "bshd":`, `if cp_size > 1 and qkv_format == "thd":`,
    after `assert qkv_format == "thd"` or an early `return` under BSHD. Where
    the layout is BSHD (a branch, or `"bshd"` passed as a literal) it also
    flags a call without the padded length `P` (`max_seq_len`).

    The helper's parameters are read from its own `def`: which parameter is
    the layout kind, which one is `P`, and their positions, so positional
    calls are judged against the real signature. A helper whose `def` has no layout parameters (a packed-only
    helper that reads the CP rank from global state) has nothing to forget,
    and its calls are never flagged. For a helper defined outside the tree,
    the positions configured in `cp-helpers` are used. An argument counts as
    passed by keyword, positionally when the call reaches its position, or
    through a `**kwargs` dict whose keys are known (`**dict(qkv_format=...)`);
    `*args` and a `**kwargs` of unknown keys get the benefit of the doubt.
    Calls inside `with pytest.raises(...)` are meant to fail and are left alone.

    ## Why it matters
    These helpers default to the packed (THD) rule: the zigzag chunk size
    comes from the sample's own length `T` instead of the padded length `P`.
    Under BSHD with CP > 1 the offsets are then wrong for every sample whose
    `P` is not `T` rounded to `2 cp`, and response-space fields (log-probs,
    loss masks, advantages) are sliced at the wrong positions, silently
    (invariants O4 and G4).

    ## Example
    ```python
    _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len)
    ```

    ## How to fix
    Pass the layout and the owner's padded length, even where the layout is
    THD (then `max_seq_len=None`):
    ```python
    max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
    _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(
        total_len, response_len, qkv_format, max_seq_len
    )
    ```

    ## Configuration
    None for helpers in the tree. `cp-helpers` names helpers defined outside
    it (an installed package), with their layout kind's and padded length's
    positions (the lower position is the layout kind); none by default:
    ```toml
    [tool.layoutcheck.cp-helpers.get_logits_and_tokens_offset_with_cp]
    qkv_format = 2
    max_seq_len = 3
    ```

    ## Fix safety
    The fix passes the missing arguments by keyword when their values are
    unambiguous where the call is: a name spelt like the parameter
    (`qkv_format`, `max_seq_len`) that is bound on every path to the call
    (a parameter, an earlier assignment in an enclosing block, a loop or
    comprehension target around it); for the padded length also the
    singular of a source (`max_seq_len` for `max_token_len`); for the layout
    kind also an attribute the function already reads (`args.qkv_format`).
    Two candidates, or none, and there is no fix; a call that lacks both
    arguments is fixed only when both are found. The fix is safe: it passes
    the layout the function already holds, so under THD the helper does
    what it did (`"thd"` is its default) and under BSHD what it should.
    ```python
    def offsets(t, r, qkv_format, max_seq_len):
        return get_logits_and_tokens_offset_with_cp(t, r, qkv_format=qkv_format, max_seq_len=max_seq_len)
    ```
    """

    code = "LC104"
    message = (
        "`get_logits_and_tokens_offset_with_cp(...)` is called without `qkv_format` and "
        "`max_seq_len`, so under BSHD it silently uses the packed rule. Pass both explicitly."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "(" in source  # any call may reach a layout helper found elsewhere in the project

    def check(self, file: FileQueries) -> Iterator[Report]:
        project = file.project
        for found in file.helper_calls():
            missing = file.missing_layout_arguments(found)
            if not missing:
                continue
            signature = found.signature
            names = " and ".join(f"`{name}`" for name in missing)
            if signature.ref is not None:
                where = f" (`{signature.text()}`, {project.where(signature.ref)})"
            else:
                where = " (from `cp-helpers`: its `def` is not in the checked tree)"
            if signature.layout is not None and signature.layout[0] not in missing:
                if found.layout == "bshd":
                    problem = "where the layout is BSHD, so it has no padded length to lay the sample out with"
                elif signature.padded is not None and signature.padded[0] in signature.none_checked:
                    problem = (f"so a BSHD run fails there (the helper requires `{signature.padded[0]}` under "
                               "BSHD)")
                else:
                    problem = "so under BSHD it has no padded length and falls back to the packed rule"
            else:
                problem = "so under BSHD it silently uses the packed rule"
            hint = f"Pass {names} explicitly."
            if signature.padded is not None and signature.padded[0] in missing:
                hint += f" For `{signature.padded[0]}`: {_lower(file.source_hint('bshd'))}."
            yield self.report(
                found.call.span,
                f"`{signature.name}(...)`{where} is called without {names}, {problem}. {hint}",
            )

    def fix(self, site: FixSite) -> Fix | None:
        """The missing layout arguments passed by keyword, when their values are unambiguous in scope."""
        import libcst as cst

        call = site.node(cst.Call)
        if call is None:
            return None
        missing, padded = _missing(site.finding.message)
        if not missing:
            return None
        values = []
        for name in missing:
            value = _value_in_scope(site, call, name, padded=name == padded)
            if value is None:
                return None  # unknown or ambiguous: the user decides
            values.append(f"{name}={value}")
        edit = _append_arguments(site, call, values)
        if edit is None:
            return None
        return Fix((edit,), SAFE, f"pass {', '.join(f'`{v}`' for v in values)}")

    valid = [
        Valid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def local_masks(total_lengths, response_lengths, qkv_format, max_seq_lens):
    for i, (t, r) in enumerate(zip(total_lengths, response_lengths)):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        _, _, _, offsets = get_logits_and_tokens_offset_with_cp(t, r, qkv_format, max_seq_len)
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from miles.backends.training_utils import cp_utils

def offsets(t, r, args, max_seq_len):
    return cp_utils.get_logits_and_tokens_offset_with_cp(t, r, qkv_format=args.qkv_format, max_seq_len=max_seq_len)
"""
        ),
        Valid(
            """
def offsets(t, r, layout):
    return get_logits_and_tokens_offset_with_cp(t, r, **layout)
""",
            settings={"cp_helpers": {"get_logits_and_tokens_offset_with_cp": {"qkv_format": 2, "max_seq_len": 3}}},
        ),
        Valid(
            """
def offsets(t, r, *layout):
    return get_logits_and_tokens_offset_with_cp(t, r, *layout)
""",
            settings={"cp_helpers": {"get_logits_and_tokens_offset_with_cp": {"qkv_format": 2, "max_seq_len": 3}}},
        ),
        Valid(
            """
from cp_utils import slice_with_cp

def get_batch(tokens, qkv_format, pad_token_id):
    if qkv_format == "thd":
        return [slice_with_cp(t, pad_token_id, qkv_format) for t in tokens]
    raise ValueError(qkv_format)
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from cp_utils import slice_with_cp

def pack(tokens, qkv_format, cp_size, pad_token_id):
    if qkv_format == "bshd":
        raise NotImplementedError("BSHD goes through pad_rectangular")
    return [slice_with_cp(t, pad_token_id) for t in tokens]
""",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Valid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def loss_masks(total_lengths, response_lengths, loss_masks):
    # this trainer's helper has no layout arguments: it only ever serves packed batches
    for t, r, mask in zip(total_lengths, response_lengths, loss_masks):
        _, _, _, offsets = get_logits_and_tokens_offset_with_cp(t, r)
""",
            files={"cp_utils.py": _PACKED_ONLY},
        ),
        Valid(
            """
def offsets(t, r, fmt, p):
    return my_offsets(t, r)
""",
            settings={"cp_helpers": {"my_offsets": {}}},
        ),
        Valid(
            """
import pytest

def check_bshd_needs_the_padded_length():
    with pytest.raises(ValueError, match="max_seq_len"):
        get_logits_and_tokens_offset_with_cp(10, 4, "bshd")
""",
            settings={"cp_helpers": {"get_logits_and_tokens_offset_with_cp": {"qkv_format": 2, "max_seq_len": 3}}},
        ),
    ]
    invalid = [
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def gather_kl(kl, total_lengths, response_lengths):
    for total_len, response_len in zip(total_lengths, response_lengths):
        _, _, _, token_offsets = get_logits_and_tokens_offset_with_cp(total_len, response_len)
""",
            line=6,
            column=34,
            message="without `qkv_format` and `max_seq_len`, so under BSHD it silently uses the packed rule",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
def gather_kl(kl, total_len, response_len):
    return get_logits_and_tokens_offset_with_cp(total_len, response_len)
""",
            line=3,
            column=12,
            message="from `cp-helpers`: its `def` is not in the checked tree",
            settings={"cp_helpers": {"get_logits_and_tokens_offset_with_cp": {"qkv_format": 2, "max_seq_len": 3}}},
        ),
        Invalid(
            """
from cp_utils import slice_with_cp

def pad_and_slice(tokens, qkv_format, max_seq_len, pad_token_id):
    if qkv_format == "bshd":
        return [slice_with_cp(t, pad_token_id, qkv_format) for t in tokens]
    return tokens
""",
            line=6,
            column=17,
            message="without `max_seq_len`, where the layout is BSHD",
            files={"cp_utils.py": _CP_UTILS},
            replacement="""
from cp_utils import slice_with_cp

def pad_and_slice(tokens, qkv_format, max_seq_len, pad_token_id):
    if qkv_format == "bshd":
        return [slice_with_cp(t, pad_token_id, qkv_format, max_seq_len=max_seq_len) for t in tokens]
    return tokens
""",
        ),
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def response_offsets(total_lengths, response_lengths, qkv_format, max_seq_lens):
    out = []
    for i, (t, r) in enumerate(zip(total_lengths, response_lengths)):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        out.append(get_logits_and_tokens_offset_with_cp(t, r))  # response tokens of sample i
    return out
""",
            line=8,
            column=20,
            message="without `qkv_format` and `max_seq_len`",
            files={"cp_utils.py": _CP_UTILS},
            replacement="""
from cp_utils import get_logits_and_tokens_offset_with_cp

def response_offsets(total_lengths, response_lengths, qkv_format, max_seq_lens):
    out = []
    for i, (t, r) in enumerate(zip(total_lengths, response_lengths)):
        max_seq_len = max_seq_lens[i] if max_seq_lens is not None else None
        out.append(get_logits_and_tokens_offset_with_cp(t, r, qkv_format=qkv_format, max_seq_len=max_seq_len))  # response tokens of sample i
    return out
""",
        ),
        Invalid(
            """
from cp_utils import slice_with_cp

def shard_tokens(args, tokens, pad_token_id, max_seq_len):
    if args.context_parallel_size > 1 and args.qkv_format != "thd":
        tokens = [slice_with_cp(t, pad_token_id) for t in tokens]
    return tokens
""",
            line=6,
            column=19,
            message="without `qkv_format` and `max_seq_len`",
            files={"cp_utils.py": _CP_UTILS},
            replacement="""
from cp_utils import slice_with_cp

def shard_tokens(args, tokens, pad_token_id, max_seq_len):
    if args.context_parallel_size > 1 and args.qkv_format != "thd":
        tokens = [slice_with_cp(t, pad_token_id, qkv_format=args.qkv_format, max_seq_len=max_seq_len) for t in tokens]
    return tokens
""",
        ),
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def offsets(t, r, max_seq_len):
    return get_logits_and_tokens_offset_with_cp(t, r, max_seq_len=max_seq_len)
""",
            line=5,
            column=12,
            message="without `qkv_format`, so",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
from cp_utils import get_logits_and_tokens_offset_with_cp

def offsets(t, r, qkv_format):
    if qkv_format == "thd":
        return None
    return get_logits_and_tokens_offset_with_cp(t, r)
""",
            line=7,
            column=12,
            message="(`get_logits_and_tokens_offset_with_cp(total_length, response_length, qkv_format=\"thd\"",
            files={"cp_utils.py": _CP_UTILS},
        ),
        Invalid(
            """
def slice_rows(self, t, r, layout):
    return self.slicer.offsets(t, r, layout)
""",
            line=3,
            column=12,
            settings={"cp_helpers": {"offsets": {"layout": 2, "padded_length": 3}}},
            message="without `padded_length`",
        ),
    ]


def _lower(sentence: str) -> str:
    return sentence[:1].lower() + sentence[1:]


_MISSING = re.compile(r"is called without ((?:`[^`]+`(?:, | and )?)+)")
_PADDED = re.compile(r"For `([^`]+)`:")


def _missing(message: str) -> tuple[list[str], str | None]:
    """The parameters a finding says the call omits, and which of them is the padded length.

    The fix reads them from the finding (its message is this module's own
    wording), not from the project model: the parameter names come from the
    helper's `def`, which may be in another file.
    """
    found = _MISSING.search(message)
    if found is None:
        return [], None
    names = re.findall(r"`([^`]+)`", found.group(1))
    padded = _PADDED.search(message)
    return names, padded.group(1) if padded else None


def _value_in_scope(site: FixSite, call: cst.Call, name: str, *, padded: bool) -> str | None:
    """The one expression in scope at ``call`` that holds parameter ``name``'s value, or None."""
    import libcst as cst

    from layoutcheck.lint.fixscope import scope_of
    from layoutcheck.lint.walk import visit

    tree = site.tree
    statement = tree.statement_of(call)
    if statement is None:
        return None
    spellings = [name]
    if padded:
        spellings += [s[:-1] for s in site.settings.sources if s.endswith("s") and s[:-1] != name]
    bound = [spelling for spelling in spellings if _bound(site, call, statement, spelling)]
    if len(bound) == 1:
        return bound[0]
    if bound or padded:
        return None  # two candidates; or a padded length, which only a local can hold for one sample
    # The layout kind also lives in configuration the function reads: `args.qkv_format`.
    scope = scope_of(tree, call)
    reads: set[str] = set()

    class _Reads(cst.CSTVisitor):
        def visit_Attribute(self, node: cst.Attribute) -> None:
            if node.attr.value == name and isinstance(node.value, cst.Name) and \
                    scope.reaching(node.value.value, statement) is not None:
                reads.add(f"{node.value.value}.{name}")

    visit(scope.owner, _Reads())
    return reads.pop() if len(reads) == 1 else None


def _bound(site: FixSite, call: cst.Call, statement: cst.BaseStatement, name: str) -> bool:
    """Is ``name`` bound, on every path, where ``call`` runs?"""
    import libcst as cst

    from layoutcheck.lint.fixscope import scope_of

    tree = site.tree
    for parent in tree.ancestors(call):
        if isinstance(parent, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
            comp: cst.CompFor | None = parent.for_in
            while comp is not None:
                if name in _target_names(comp.target):
                    return True
                comp = comp.inner_for_in
        elif isinstance(parent, cst.Lambda):
            if any(p.name.value == name for p in parent.params.params):
                return True
        elif isinstance(parent, (cst.FunctionDef, cst.Module)):
            break
    scope = scope_of(tree, call)
    if scope.reaching(name, statement) is not None:
        return True
    if scope.of(name) or not isinstance(scope.owner, cst.FunctionDef):
        return False
    # A closure: the enclosing function's parameter, never rebound here. (The enclosing scope is
    # read only when it is a function: the module's bindings cost the positions of every statement.)
    if not isinstance(tree.scope_node(scope.owner), cst.FunctionDef):
        return False
    return any(b.kind == "param" for b in scope_of(tree, scope.owner).of(name))


def _target_names(target: cst.BaseExpression) -> set[str]:
    from layoutcheck.lint.fixscope import names_in

    return names_in(target)


def _append_arguments(site: FixSite, call: cst.Call, arguments: list[str]) -> Edit | None:
    """An edit that adds ``arguments`` (``a=x``...) as the call's last ones, in the call's style."""
    import libcst as cst

    tree = site.tree
    source = tree.source
    text = ", ".join(arguments)
    if not call.args:
        opening = source.find("(", tree.span(call.func)[1])
        return Edit(opening + 1, opening + 1, text) if opening >= 0 else None
    last = call.args[-1]
    end = tree.span(last.value)[1]
    if not isinstance(last.comma, cst.Comma):
        return Edit(end, end, f", {text}")
    comma = source.find(",", end)
    if comma < 0:
        return None
    after = comma + 1
    closing = source[after:tree.span(call)[1] - 1]  # what lies between the trailing comma and `)`
    indent = tree.indent_at(last.value)
    if ("\n" in closing or "\r" in closing) and indent is not None:
        # One argument per line, with a trailing comma: one more line each, indented like the last one,
        # after the last one's line (and its comment).
        line_end = tree.line_end(after)
        return Edit(line_end, line_end, "".join(f"{indent}{argument},{tree.newline()}" for argument in arguments))
    return Edit(after, after, f" {text},")
