"""The one YAML reader: every file the project reads (a user's spec, stack or overlay, and the bundled
data) goes through `load_text`. It is PyYAML's SafeLoader with three changes:

- scalars resolve as YAML 1.2's core schema does (https://yaml.org/spec/1.2.2/#1032-tag-resolution):
  `010` is 10, not octal 8; `1:30` is text, not sexagesimal 90; `yes`/`on` are text; `1e3` is a number;
- aliases are counted on the node graph before anything is built: a document whose aliases would
  expand to more than MAX_EXPANDED_NODES nodes (a "billion laughs" bomb) or that refers to itself is
  refused, so no caller (validation, JSON dump, the Pulumi mocks) ever walks the expansion;
- a key given twice is refused (the last one would win silently), and so is a key that is not text
  in a user's file; an
  integer longer than MAX_INT_DIGITS is refused before Python's int() parses it.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# A workload or stack file expands to a few thousand nodes; an anchor shared by every workload of a
# 10,000-workload fleet stays well under this. A 2.3 KB nine-level bomb expands to 9^9 ≈ 3.9e8.
MAX_EXPANDED_NODES = 1_000_000
# No setting needs more: the largest bound in the spec is 1e15 (16 digits); Python refuses past 4,300.
MAX_INT_DIGITS = 100


class YamlRefused(yaml.YAMLError):
    """A document this reader will not build (aliases that explode, an absurd number)."""

    def __init__(self, problem: str, mark: yaml.Mark | None = None):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class _Resolver(yaml.resolver.BaseResolver):
    pass


_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
for tag, pattern, first in (
        ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), "tTfF"),
        ("tag:yaml.org,2002:int", _INT, "-+0123456789"),
        ("tag:yaml.org,2002:float", _FLOAT, "-+.0123456789"),
        ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])):
    _Resolver.add_implicit_resolver(tag, pattern, list(first))


class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
              yaml.constructor.SafeConstructor, _Resolver):
    def __init__(self, stream: str):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        yaml.constructor.SafeConstructor.__init__(self)
        _Resolver.__init__(self)
        self.text_keys = True


if yaml.__with_libyaml__:  # libyaml's parser and composer (7x faster) for the bundled data
    class _CLoader(yaml._yaml.CParser, yaml.constructor.SafeConstructor, _Resolver):
        def __init__(self, stream: str):
            yaml._yaml.CParser.__init__(self, stream)
            yaml.constructor.SafeConstructor.__init__(self)
            _Resolver.__init__(self)
            self.text_keys = True


def _int(loader: _Loader, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)
    digits = len(text.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise YamlRefused(f"an integer of {digits} digits (at most {MAX_INT_DIGITS} are read)", node.start_mark)
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if body.startswith("0o"):
        return sign * int(body[2:], 8)
    if body.startswith("0x"):
        return sign * int(body[2:], 16)
    return sign * int(body)


def _float(loader: _Loader, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).lower()
    if text.endswith(".inf"):
        return float("-inf") if text.startswith("-") else float("inf")
    return float("nan") if text == ".nan" else float(text)


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    mapping: dict = {}
    lines: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if loader.text_keys and not isinstance(key, str):
            raise YamlRefused(f"key {str(key)[:40]!r} is not text", key_node.start_mark)
        if key in mapping:
            raise YamlRefused(f"key {key[:60]!r} appears twice (first on line {lines[key]})", key_node.start_mark)
        try:
            mapping[key] = loader.construct_object(value_node, deep=deep)
        except YamlRefused as exc:
            if isinstance(value_node, yaml.ScalarNode):
                exc.problem = f"{key[:60]}: {exc.problem}"
            raise
        lines[key] = key_node.start_mark.line + 1
    return mapping


LOADERS = (_Loader, _CLoader) if yaml.__with_libyaml__ else (_Loader,)
for _loader in LOADERS:
    _loader.add_constructor("tag:yaml.org,2002:int", _int)
    _loader.add_constructor("tag:yaml.org,2002:float", _float)
    _loader.add_constructor("tag:yaml.org,2002:map", _mapping)


def expanded_nodes(root: yaml.Node) -> int:
    """How many nodes the document has once every alias is expanded, counted on the shared graph in
    linear time (each node once, memoised); raises YamlRefused for a node that contains itself."""
    sizes: dict[int, int] = {}
    for node in _post_order(root):
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else []
        sizes[id(node)] = min(1 + sum(sizes[id(child)] for child in children), MAX_EXPANDED_NODES + 1)
    return sizes[id(root)]


def _post_order(root: yaml.Node) -> list[yaml.Node]:
    """Every distinct node, children before parents (iterative: deep nesting is not a recursion limit)."""
    order: list[yaml.Node] = []
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            state[id(node)] = 2
            order.append(node)
            continue
        if state.get(id(node)) == 2:
            continue
        if state.get(id(node)) == 1:
            raise YamlRefused("an alias refers to itself (a recursive structure)", node.start_mark)
        state[id(node)] = 1
        stack.append((node, True))
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode) else []
        for child in children:
            if state.get(id(child)) == 1:
                raise YamlRefused("an alias refers to itself (a recursive structure)", child.start_mark)
            stack.append((child, False))
    return order


# libyaml's composer recurses on the C stack, one frame per level: a user's document is composed by it only
# when an event scan (libyaml's parser, iterative) finds it no deeper than this; deeper ones go through the
# Python composer, whose recursion limit turns an absurd depth into a refusal. A spec is ~6 levels deep.
C_COMPOSE_MAX_DEPTH = 200
_OPENS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSES = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


def _scan(text: str) -> tuple[int, int, bool] | None:
    """(deepest nesting, nodes, any alias) from libyaml's event stream; None without libyaml or where it
    finds an error (the Python parser then reads the document, and words the error as it always has)."""
    if not yaml.__with_libyaml__:
        return None
    parser = yaml._yaml.CParser(text)
    depth = deepest = nodes = 0
    aliases = False
    try:
        while (event := parser.get_event()) is not None and not isinstance(event, yaml.StreamEndEvent):
            if isinstance(event, _OPENS):
                depth, nodes = depth + 1, nodes + 1
                deepest = max(deepest, depth)
            elif isinstance(event, _CLOSES):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
            elif isinstance(event, yaml.AliasEvent):
                aliases = True
    except yaml.YAMLError:
        return None
    finally:
        parser.dispose()
    return deepest, nodes, aliases


def load_text(text: str, bundled: bool = False) -> Any:
    """One YAML document, built only after its aliases were counted. Raises yaml.YAMLError.
    `bundled`: the package's own data, which may key tables by number. libyaml parses the bundled data, and a
    user's file that its event scan finds well formed and no deeper than C_COMPOSE_MAX_DEPTH (a 5,000-workload
    file: ~1.4 s instead of ~4.3 s); any other user's file goes through the Python parser."""
    scanned = None if bundled else _scan(text)
    fast = bundled or (scanned is not None and scanned[0] <= C_COMPOSE_MAX_DEPTH)
    loader = LOADERS[-1](text) if fast else _Loader(text)
    loader.text_keys = not bundled
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        # without an alias every node is built once: the scan counted them (the expansion walk is for aliases)
        expanded = scanned[1] if scanned is not None and not scanned[2] else expanded_nodes(root)
        if expanded > MAX_EXPANDED_NODES:
            raise YamlRefused(f"aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (an alias bomb?)",
                              root.start_mark)
        return loader.construct_document(root)
    finally:
        loader.dispose()
