"""The full YAML reading of a note's frontmatter (PyYAML), for what the hook's subset declines.

Apart from ``geode.kernel.frontmatter`` (which it does not import: no cycle) because the hook
may import only the standard library: this module is imported only off the hook (``frontmatter.FULL_PARSER``), when the
subset declines a note (an anchor, a tag, an explicit key ...). It reads with PyYAML's pure
``SafeLoader`` under the mapping the subset keeps (see ``geode.kernel.frontmatter``):
timestamps stay text, mapping keys are their text, an empty document is ``{}``. Key lines come
from the composed nodes, so the editor and the agents can still name a key's line.
"""

from __future__ import annotations

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from geode.kernel.errors import StoreError


class NotYaml(StoreError, ValueError):
    """The full parser cannot read the frontmatter either; ``line`` is 1-based in the file."""

    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


class YamlTooLarge(NotYaml):
    """The frontmatter's aliases expand past ``ALIAS_BUDGET`` nodes, or refer to themselves: a
    "billion laughs" document (430 bytes, 9 levels of 9 aliases, is 387 million nodes to every
    walk of its keys). Refused, never read leniently: the note is skipped and named."""


#: how many nodes a document's aliases may add to it once each is expanded: enough for any
#: frontmatter that reuses a block, far below what would take a walk of the keys seconds
ALIAS_BUDGET = 10_000


def _expanded_size(root: Node) -> tuple[int, int]:
    """``(distinct nodes, nodes once every alias is expanded)`` of a composed document, by a
    loop (no recursion, so any depth) that stops as soon as the expansion passes the budget;
    ``YamlTooLarge`` on a node that contains itself."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids: list[Node]
        if isinstance(node, MappingNode):
            kids = [n for pair in node.value for n in pair]
        elif isinstance(node, SequenceNode):
            kids = list(node.value)
        else:
            kids = []
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > len(size) + ALIAS_BUDGET:
                raise YamlTooLarge(
                    node.start_mark.line + 1,
                    f"its aliases expand past {ALIAS_BUDGET:,} nodes (an alias bomb); not read",
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise YamlTooLarge(node.start_mark.line + 1, "an alias refers to the node that holds it; not read")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((k, False) for k in kids if id(k) not in size)
    return len(size), size[id(root)]


class GeodeLoader(yaml.SafeLoader):
    """PyYAML's safe loader, with the two differences geode states: no timestamp resolver (a
    date stays its ISO text) and keys that are their text (``on:`` is ``"on"``, not ``True``)."""

    yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def construct_mapping(self, node: Node, deep: bool = False) -> dict:
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, f"expected a mapping node, but found {node.id}", node.start_mark)
        self.flatten_mapping(node)
        mapping: dict = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise ConstructorError(
                    "while constructing a mapping", node.start_mark, "a key must be text", key_node.start_mark
                )
            mapping[key_node.value] = self.construct_object(value_node, deep=deep)
        return mapping


def load(text: str):
    """``text`` as geode's mapping of YAML reads it (``yaml.YAMLError`` or ``ValueError`` when
    it is not YAML): the reference the subset is tested against."""
    doc = text if text.endswith("\n") else text + "\n"
    loader = GeodeLoader(doc)
    try:
        node = loader.get_single_node()
        if node is not None:
            _expanded_size(node)  # before anything walks the aliases
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return ({} if data is None else data), node


def _key_lines(node: Node | None, prefix: str, first_line: int, out: dict[str, int]) -> None:
    if isinstance(node, MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode):
                path = prefix + key_node.value
                out[path] = first_line + key_node.start_mark.line
                _key_lines(value_node, path + ".", first_line, out)
    elif isinstance(node, SequenceNode):
        for n, item in enumerate(node.value):
            _key_lines(item, f"{prefix[:-1]}[{n}].", first_line, out)


def parse_full(text: str, first_line: int, fallback_line: int) -> tuple[dict, dict[str, int]]:
    """``(data, key path -> file line)`` as the full parser reads ``text``; ``NotYaml`` with the
    file line (``fallback_line`` when PyYAML gives none) when it is not YAML either."""
    try:
        data, node = load(text)
    except YamlTooLarge as exc:
        raise YamlTooLarge(first_line + exc.line - 1, exc.message) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = first_line + mark.line if mark is not None else fallback_line
        raise NotYaml(line, str(exc.problem or exc.context or "not YAML")) from None
    except (yaml.YAMLError, ValueError) as exc:
        raise NotYaml(fallback_line, f"not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise NotYaml(first_line, "frontmatter must be a mapping of keys")
    lines: dict[str, int] = {}
    _key_lines(node, "", first_line, lines)
    return data, lines
