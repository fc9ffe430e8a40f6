from __future__ import annotations

from collections.abc import Iterator

from layoutcheck.lint.rule import Invalid, ModelRule, Report, Valid
from layoutcheck.lint.settings import LintSettings
from layoutcheck.model.queries import FileQueries


class PrefixLengthFromAnotherEncoding(ModelRule):
    """A prompt's length from `tok(prompt, add_special_tokens=False)` bounding a slice of `tok(prompt + answer)`.

    ## What it does
    Flags the encoding of a prefix alone with `add_special_tokens=False`
    whose length (`len(...)`, inline or through a local) bounds a slice in
    the same function, while the same encoder (the same callee) encodes
    the joined text `prefix + rest` with its special tokens (the keyword
    left out or true).

    ## Why it matters
    The joined encoding's `T` tokens start with the special tokens the prefix's
    encoding left out (a BOS token, a chat header), so `labels[:, :n]`
    with `n` the prefix's own length stops that many tokens short of the
    prefix/answer boundary: the prompt's last tokens are trained as if
    they were the answer. When the joined encoding is also truncated
    (`truncation=True, max_length=...`) and the prefix is not, a long
    prompt leaves no answer in the row and the bound masks all of it: the
    example trains on nothing, with no error
    (docs/design.md#layout-spaces-and-bug-classes, class 7;
    allenai/open-instruct dba329424 masked the prompt of a truncated joined
    encoding by the prompt's length measured without special tokens).

    ## Example
    ```python
    enc = tokenizer(prompt + answer, return_tensors="pt", truncation=True, max_length=2048)
    prompt_len = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    labels[0, :prompt_len] = -100
    ```

    ## How to fix
    Encode the parts apart with the same settings and build the row from
    them (`ids = prompt_ids + answer_ids`, the prompt cut to its own
    budget), so the bound is the kept prompt's length; or measure the
    prefix exactly as the joined text is encoded.

    ## Known problems
    Only the joined text built with `+` in the function, and the same
    callee for both encodings, are read.

    ## Fix safety
    No autofix: how the row should be truncated is the author's choice.
    """

    code = "LC131"
    message = (
        "`len(tok(prompt, add_special_tokens=False))` bounds a slice of `tok(prompt + answer)`, which adds special "
        "tokens (and may truncate): the bound misses the prompt/answer boundary. Encode the parts apart."
    )

    @classmethod
    def could_match(cls, source: str, settings: LintSettings) -> bool:
        return "add_special_tokens" in source

    def check(self, file: FileQueries) -> Iterator[Report]:
        for found in file.facts.clashes:
            if found.kind == "prefix_length_apart":
                cut = (" and truncates it where the prefix alone is not, so a long prefix leaves no rest in the "
                       "row and the bound covers all of it" if found.detail == "truncated" else "")
                yield self.report(
                    found.span,
                    f"`{found.text}` measures a prefix without special tokens, and its length bounds a slice, but "
                    f"the same encoder encodes the joined text `prefix + ...` with its special tokens{cut}: the "
                    "bound is off the prefix/rest boundary by the special tokens' count. Encode the parts apart "
                    "with the same settings and build the row from them (the bound is then the kept prefix's "
                    "length).",
                )

    valid = [
        Valid(
            """
import torch

def masked_row(tokenizer, prompt, answer, budget):
    prompt_ids = tokenizer(prompt, add_special_tokens=False).input_ids[-budget:]
    answer_ids = tokenizer(answer, add_special_tokens=False).input_ids
    ids = torch.tensor([prompt_ids + answer_ids])
    labels = ids.clone()
    labels[0, : len(prompt_ids)] = -100
    return ids, labels
"""
        ),
        Valid(
            """
def masked_row(tokenizer, prompt, answer):
    enc = tokenizer(prompt + answer, return_tensors="pt")
    prompt_len = len(tokenizer(prompt).input_ids)
    labels = enc.input_ids.clone()
    labels[0, :prompt_len] = -100
    return enc.input_ids, labels
"""
        ),
        Valid(
            """
def masked_row(tokenizer, prompt, answer):
    enc = tokenizer(prompt + answer, add_special_tokens=False)
    prompt_len = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    labels = list(enc.input_ids)
    labels[:prompt_len] = [-100] * prompt_len
    return labels
"""
        ),
        Valid(
            """
def lengths(tokenizer, prompt, answer):
    enc = tokenizer(prompt + answer)
    return len(enc.input_ids), len(tokenizer(prompt, add_special_tokens=False).input_ids)
"""
        ),
        Valid(
            """
def masked_row(tokenizer, other, prompt, answer):
    enc = other(prompt + answer)
    prompt_len = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    return enc.input_ids[prompt_len:]
"""
        ),
    ]
    invalid = [
        Invalid(
            """
def masked_row(tokenizer, prompt, answer):
    joined = prompt + answer
    enc = tokenizer(joined, return_tensors="pt", truncation=True, max_length=2048)
    prompt_len = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    labels = enc.input_ids.clone()
    labels[0, :prompt_len] = -100
    return enc.input_ids, labels
""",
            line=5,
            column=22,
            message="and truncates it where the prefix alone is not",
        ),
        Invalid(
            """
def masked_row(encode, prompt, answer):
    ids = encode(prompt + answer)
    return ids[len(encode(prompt, add_special_tokens=False)):]
""",
            line=4,
            column=20,
        ),
            Invalid(
            """
def masked_row(tokenizer, prompt, answer):
    ids = tokenizer.encode(prompt + answer + tokenizer.eos_token)
    n = len(tokenizer.encode(prompt, add_special_tokens=False))
    labels = list(ids)
    labels[:n] = [-100] * n
    return ids, labels
""",
            line=4,
            column=13,
        ),
        Invalid(
            """
import torch

def masked_rows(tokenizer, prompts, answers):
    out = []
    for prompt, answer in zip(prompts, answers):
        enc = tokenizer(prompt + answer, truncation=True, max_length=512, return_tensors="pt")
        keep = len(tokenizer(prompt, add_special_tokens=False)["input_ids"])
        labels = enc["input_ids"].clone()
        labels[:, :keep] = -100
        out.append(labels)
    return out
""",
            line=8,
            column=20,
        ),
    ]
