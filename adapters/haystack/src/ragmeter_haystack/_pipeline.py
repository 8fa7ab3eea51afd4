"""Finding components and sockets in a Haystack pipeline graph (recorder and retriever)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragmeter.errors import InvalidInputError

__all__ = [
    "check_component",
    "consumed_outputs",
    "find_component",
    "nest_input",
    "open_inputs",
]


def _nodes(pipeline: Any) -> Mapping[str, Any]:
    graph = getattr(pipeline, "graph", None)
    if graph is None:
        raise InvalidInputError(
            f"expected a haystack Pipeline (or AsyncPipeline), got {type(pipeline).__name__}"
        )
    return dict(graph.nodes(data=True))


def _outputs(node: Mapping[str, Any]) -> Mapping[str, Any]:
    sockets = node.get("output_sockets") or {}
    return sockets if isinstance(sockets, Mapping) else {}


def check_component(pipeline: Any, name: str, *, role: str, socket: str | None) -> str:
    """Return ``name`` if the pipeline has that component (with output ``socket``), else raise."""
    nodes = _nodes(pipeline)
    if name not in nodes:
        raise InvalidInputError(
            f"{role}={name!r}: the pipeline has no component named {name!r}; "
            f"its components are {sorted(nodes)}"
        )
    if socket is not None:
        outputs = _outputs(nodes[name])
        if socket not in outputs:
            raise InvalidInputError(
                f"{role}={name!r}: component {name!r} has no output {socket!r} "
                f"(its outputs: {sorted(outputs)}); name another component or set the output name"
            )
    return name


def find_component(pipeline: Any, *, role: str, socket: str, prefer: str) -> str | None:
    """The one component with output ``socket``, preferring class names containing ``prefer``.

    ``None`` when no component has that output; raises when the choice is ambiguous.
    """
    nodes = _nodes(pipeline)
    having = [n for n, node in nodes.items() if socket in _outputs(node)]
    preferred = [n for n in having if prefer in type(nodes[n].get("instance")).__name__]
    for group in (preferred, having):
        if len(group) == 1:
            return group[0]
        if len(group) > 1:
            raise InvalidInputError(
                f"several components output {socket!r} ({', '.join(sorted(group))}): "
                f"name the one to capture with {role}='<component name>'"
            )
    return None


def consumed_outputs(pipeline: Any, name: str) -> set[str]:
    """Output sockets of ``name`` that feed another component (left out of a normal result)."""
    node = _nodes(pipeline).get(name) or {}
    return {s for s, sock in _outputs(node).items() if getattr(sock, "receivers", None)}


def open_inputs(pipeline: Any, socket: str) -> list[str]:
    """Components with an input ``socket`` not fed by another component (Haystack's flat inputs)."""
    out = []
    for name, node in _nodes(pipeline).items():
        sock = (node.get("input_sockets") or {}).get(socket)
        if sock is not None and not getattr(sock, "senders", None):
            out.append(name)
    return out


def nest_input(pipeline: Any, target: str, value: Any, *, role: str) -> dict[str, dict[str, Any]]:
    """``{component: {socket: value}}`` for ``"component.socket"`` or a flat input name."""
    if "." in target:
        comp, socket = target.split(".", 1)
        nodes = _nodes(pipeline)
        if comp not in nodes:
            raise InvalidInputError(
                f"{role}={target!r}: the pipeline has no component named {comp!r}; "
                f"its components are {sorted(nodes)}"
            )
        return {comp: {socket: value}}
    names = open_inputs(pipeline, target)
    if not names:
        raise InvalidInputError(
            f"{role}={target!r}: no component of the pipeline has an open input named "
            f"{target!r}; give it as '<component>.<input>'"
        )
    return {name: {target: value} for name in names}
