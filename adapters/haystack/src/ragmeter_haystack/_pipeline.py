"""Finding components and sockets in a Haystack pipeline graph (recorder and retriever)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ragmeter.errors import InvalidInputError

__all__ = [
    "check_component",
    "components_with",
    "consumed_outputs",
    "find_component",
    "input_builder",
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


def components_with(pipeline: Any, socket: str) -> list[str]:
    """The components with an output called ``socket``, in the pipeline's order."""
    return [n for n, node in _nodes(pipeline).items() if socket in _outputs(node)]


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


def input_builder(
    pipeline: Any, inputs: str | Sequence[str] | Callable[[str], Any] | None
) -> Callable[[str], dict[str, Any]]:
    """``query -> pipeline data`` for ``run_dataset``.

    ``inputs`` is a function ``query -> data``; or where the query goes: a
    ``"component.input"`` or an input name (given to every component that has it open, as
    Haystack's flat inputs), or a list of these; ``None``: every open ``query`` and
    ``question`` input. Raises :class:`~ragmeter.errors.InvalidInputError` when the
    pipeline has none of them.
    """
    if callable(inputs):
        fn = inputs
        return lambda query: dict(fn(query))
    if inputs is None:
        targets = [name for name in ("query", "question") if open_inputs(pipeline, name)]
        if not targets:
            raise InvalidInputError(
                "the pipeline has no open 'query' or 'question' input: say where the query "
                "goes with inputs='<component>.<input>' (or a list, or a function query -> data)"
            )
    else:
        targets = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
    for target in targets:  # checked once, up front
        nest_input(pipeline, target, None, role="inputs")

    def build(query: str) -> dict[str, Any]:
        data: dict[str, dict[str, Any]] = {}
        for target in targets:
            for comp, values in nest_input(pipeline, target, query, role="inputs").items():
                data.setdefault(comp, {}).update(values)
        return data

    return build
