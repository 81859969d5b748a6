"""Reading a task file that may be hostile: bounded in size, nesting and alias expansion.

Plain ``yaml.safe_load`` trusts its input: "billion laughs" anchors expand into hundreds of
millions of values (the parse is quick, but anything that walks the result hangs), deep nesting
exhausts Python's recursion, and a binary file raises ``UnicodeDecodeError``. Here the file is
size-checked before it is read, decoded strictly, composed into YAML's node graph (which shares
aliased nodes rather than copying them), and that graph is measured as if expanded before any
Python value is built from it. Every refusal is a ``SpecError`` naming the file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from skyhop.spec.errors import SpecError
from skyhop.spec.limits import MAX_TASK_FILE_BYTES, MAX_YAML_DEPTH, MAX_YAML_VALUES

__all__ = ["read_yaml_documents"]

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when present: fast, and it bounds nesting itself instead of recursing."""


def read_yaml_documents(entrypoint: str) -> list[Any]:
    """The non-empty documents of the YAML file ``entrypoint``, within the bounds of ``spec.limits``."""
    text = _read_text(entrypoint)
    loader = _Loader(text)
    documents = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            _check_expanded_size(node, entrypoint)
            document = loader.construct_document(node)
            if document is not None:
                documents.append(document)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" line {where.line + 1}" if where is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SpecError("", f"{entrypoint}{line}: not valid YAML ({problem})") from None
    except RecursionError:
        raise SpecError("", f"{entrypoint}: nested too deeply (at most {MAX_YAML_DEPTH} levels)") from None
    finally:
        loader.dispose()
    return documents


def _read_text(entrypoint: str) -> str:
    path = Path(entrypoint).expanduser()
    try:
        with path.open("rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            if not stat.S_ISREG(mode):
                raise SpecError("", f"task file {entrypoint} is not a regular file")
            data = f.read(MAX_TASK_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError("", f"cannot read task file {entrypoint}: {exc.strerror}") from None
    if len(data) > MAX_TASK_FILE_BYTES:
        raise SpecError(
            "",
            f"task file {entrypoint} is over {MAX_TASK_FILE_BYTES // (1024 * 1024)} MB; a task file is small",
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            "", f"{entrypoint} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def _check_expanded_size(root: yaml.Node, entrypoint: str) -> None:
    """Refuse a document whose values, aliases expanded, exceed the bounds; before anything is built.

    Each distinct node is measured once (an alias reuses its anchor's measure), so the walk is
    linear in the file even when the expansion is exponential. The walk is iterative: it must not
    itself hit the recursion limit it guards against.
    """
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        children = _children(node)
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            depths[key] = 1 + max((depths[id(c)] for c in children), default=0)
            if sizes[key] > MAX_YAML_VALUES:
                raise SpecError(
                    "",
                    f"{entrypoint}: more than {MAX_YAML_VALUES} values once its aliases are expanded "
                    "(anchors that multiply, like 'billion laughs', are refused)",
                )
            if depths[key] > MAX_YAML_DEPTH:
                raise SpecError("", f"{entrypoint}: nested too deeply (at most {MAX_YAML_DEPTH} levels)")
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise SpecError("", f"{entrypoint}: an alias refers to the collection that holds it")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
