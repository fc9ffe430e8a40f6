"""`FlowRule`: the base of the rules that read `layoutcheck.lint.flow`.

libcst finds a visitor's methods by name, so every rule built on the shared
flow state forwards the walk's events to it through these methods; the
first rule to see an event does the work (`Flow.first`).
"""

from __future__ import annotations

import libcst as cst

from layoutcheck.lint.flow import Flow, Frame
from layoutcheck.lint.rule import LintContext, LintRule

__all__ = ["FlowRule"]


class FlowRule(LintRule):
    """Base of the rules that use `Flow`: forwards the walk's events to it.

    A subclass that defines one of these visitor methods must call
    ``super()`` first, so the flow state is current when it looks.
    `on_frame_exit` runs when a function (or the module) has been walked,
    once its owner status is known.
    """

    def __init__(self, context: LintContext) -> None:
        super().__init__(context)
        self.flow = Flow.for_context(context)
        self.flow.subscribers.append(self)
        self.vocab = self.flow.vocab

    def on_frame_exit(self, frame: Frame) -> None:
        """Called once per function and for the module, innermost first."""

    def visit_Module(self, node: cst.Module) -> None:
        if self.flow.first("visit_Module", node):
            self.flow.enter_module(node)

    def leave_Module(self, node: cst.Module) -> None:
        if self.flow.first("leave_Module", node):
            self.flow.leave_module(node)

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if self.flow.first("visit_ClassDef", node):
            self.flow.enter_class(node)

    def leave_ClassDef(self, node: cst.ClassDef) -> None:
        if self.flow.first("leave_ClassDef", node):
            self.flow.leave_class(node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.flow.first("visit_FunctionDef", node):
            self.flow.enter_function(node)

    def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
        if self.flow.first("leave_FunctionDef", node):
            self.flow.leave_function(node)

    def visit_Import(self, node: cst.Import) -> None:
        if self.flow.first("visit_Import", node):
            self.flow.imports.add_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if self.flow.first("visit_ImportFrom", node):
            self.flow.imports.add_import_from(node)

    def leave_Assign(self, node: cst.Assign) -> None:
        if self.flow.first("leave_Assign", node):
            self.flow.assign([t.target for t in node.targets], node.value)

    def leave_AnnAssign(self, node: cst.AnnAssign) -> None:
        if self.flow.first("leave_AnnAssign", node) and node.value is not None:
            self.flow.assign([node.target], node.value)

    def leave_AugAssign(self, node: cst.AugAssign) -> None:
        if self.flow.first("leave_AugAssign", node):
            self.flow.augment(node.target, node.value)

    def visit_For(self, node: cst.For) -> None:
        if self.flow.first("visit_For", node):
            self.flow.bind_target(node.target, self.flow.element(node.iter), None)

    def visit_Call(self, node: cst.Call) -> None:
        if self.flow.first("visit_Call", node):
            self.flow.call(node)

    def visit_Dict(self, node: cst.Dict) -> None:
        if self.flow.first("visit_Dict", node):
            self.flow.dict_literal(node)

    def _enter_comp(self, node: cst.BaseComp | cst.DictComp) -> None:
        if self.flow.first("visit_Comp", node):
            self.flow.push_comprehension(node)

    def _leave_comp(self, node: cst.BaseComp | cst.DictComp) -> None:
        if self.flow.first("leave_Comp", node):
            self.flow.pop_comprehension()

    # Named methods, not aliases: libcst finds visitors by their function name.
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._enter_comp(node)

    def leave_ListComp(self, node: cst.ListComp) -> None:
        self._leave_comp(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._enter_comp(node)

    def leave_SetComp(self, node: cst.SetComp) -> None:
        self._leave_comp(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._enter_comp(node)

    def leave_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._leave_comp(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._enter_comp(node)

    def leave_DictComp(self, node: cst.DictComp) -> None:
        self._leave_comp(node)
