"""What a :class:`~ragmeter.judge.protocol.FunctionJudge`'s identity hashes: a callable's
code and the values it reads (:func:`function_fingerprint`)."""

from __future__ import annotations

import asyncio
import enum
import functools
import hashlib
import inspect
import logging
import re
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["JudgeIdentityWarning", "function_fingerprint"]


_SECRET_NAMES = frozenset({"key", "token", "secret", "password", "authorization", "credentials"})


def _is_secret(name: str) -> bool:
    lowered = name.lower()
    parts = set(lowered.replace("-", "_").split("_"))
    return bool(parts & _SECRET_NAMES) or lowered.endswith(("key", "token", "secret"))


_IMMUTABLE = (type(None), bool, int, float, complex, str, bytes)


def _immutable_data(value: Any) -> bool:
    if isinstance(value, _IMMUTABLE):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(_immutable_data(v) for v in value)
    return False


def _data_repr(value: Any) -> str:
    """A process-independent text for immutable data (frozensets in a fixed order)."""
    if isinstance(value, frozenset):
        return "frozenset(" + ",".join(sorted(_data_repr(v) for v in value)) + ")"
    if isinstance(value, tuple):
        return "(" + ",".join(_data_repr(v) for v in value) + ",)"
    return f"{type(value).__name__}:{value!r}"


def _name_of(obj: Any) -> str:
    module = getattr(obj, "__module__", None) or "?"
    qualname = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    return f"{module}.{qualname or type(obj).__qualname__}"


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


_MISSING = object()


def _class_attribute(cls: type, name: str) -> Any:
    """``name`` as ``cls`` (or the first base class that has it) stores it, unbound."""
    for klass in cls.__mro__:
        if klass is object:
            break
        if name in vars(klass):
            return vars(klass)[name]
    return _MISSING


def _slot_names(cls: type) -> list[str]:
    names: list[str] = []
    for klass in cls.__mro__:
        slots = vars(klass).get("__slots__", ())
        for slot in [slots] if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and slot not in names:
                names.append(slot)
    return names


# Objects that never decide a verdict: counted by their type, without a warning.
_INERT: tuple[type, ...] = (
    type(threading.Lock()),
    type(threading.RLock()),
    threading.Condition,
    threading.Event,
    threading.Semaphore,
    asyncio.Lock,
    asyncio.Event,
    asyncio.Semaphore,
    asyncio.Condition,
    logging.Logger,
)


class JudgeIdentityWarning(UserWarning):
    """A :class:`FunctionJudge` without a ``model`` reads values its identity counts by type
    only (an HTTP client, a list, a dict), so changing them does not change the identity:
    the judge cache would serve verdicts given before the change. Name a ``model`` (and
    ``settings``) to key the cache on purpose."""


class _Fingerprint:
    """Feeds what decides a callable's behaviour into a hash; see :func:`function_fingerprint`.

    Values are hashed in the order the code reads them; then, until nothing new turns up,
    every attribute a hashed code names (``co_names`` and identifier-like string constants,
    for ``getattr``) that a class in :attr:`classes` (or one of its bases) defines.
    """

    def __init__(self, root_module: str | None) -> None:
        self.hash = hashlib.sha256()
        self.root_module = root_module
        self.seen: set[int] = set()  # callables hashed
        self.objects: set[int] = set()  # instances hashed
        self.names: set[str] = set()  # attribute and global names read by the hashed code
        self.classes: list[type] = []  # classes whose attributes those names may be
        self.loose: list[str] = []  # values counted by their type only (for the warning)

    def text(self, *parts: str) -> None:
        for part in parts:
            self.hash.update(part.encode("utf-8", "surrogatepass") + b"\0")

    def code(self, code: types.CodeType) -> None:
        self.text("code", code.co_name, str(code.co_argcount), str(code.co_flags))
        self.hash.update(code.co_code)
        self.text(*code.co_names, "|", *code.co_varnames, "|", *code.co_freevars)
        self.names.update(code.co_names)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                self.code(const)
            else:
                if isinstance(const, str) and const.isidentifier():
                    self.names.add(const)  # getattr(self, "name")
                self.value(const)

    def value(self, value: Any, *, name: str = "", where: str = "") -> None:
        """A value the callable reads: immutable data (and enum members, compiled patterns)
        by value, a callable by its code, a class by its name and the attributes the code
        reads from it (when defined in the judge's module), an object of a class of the
        judge's module by its attributes; anything else (lists, dicts, clients) by its type
        only, noted in :attr:`loose`. ``where`` says where it was read, for the warning."""
        if name and _is_secret(name):
            self.text("secret", name)
        elif _immutable_data(value):
            self.text("data", name, _data_repr(value))
        elif isinstance(value, enum.Enum):
            self.text("enum", name, _name_of(type(value)), value.name)
            self.value(value.value, name=f"{name}.value", where=where)
        elif isinstance(value, re.Pattern):
            self.text("pattern", name, repr(value.pattern), str(value.flags))
        elif isinstance(value, types.ModuleType):
            self.text("module", name, value.__name__)
        elif isinstance(value, type):
            self.text("class", name, _name_of(value))
            if value.__module__ == self.root_module:
                self.scope(value)
        elif isinstance(value, (types.FunctionType, types.MethodType, functools.partial)):
            self.text("callable", name)
            self.callable(value)
        elif type(value).__module__ == "typing":
            self.text("typing", name, repr(value))
        elif type(value).__module__ == self.root_module and (
            isinstance(getattr(value, "__dict__", None), dict) or _slot_names(type(value))
        ):
            self.text("object", name)
            self.instance(value, where=where or name)
        else:
            self.text("object", name, _name_of(type(value)))
            if isinstance(value, _INERT):
                return
            self.loose.append(f"{where or name or 'a constant'} ({_name_of(type(value))})")

    def scope(self, cls: type) -> None:
        """Let the names the code reads look up attributes of ``cls`` too."""
        if cls not in self.classes:
            self.classes.append(cls)

    def callable(self, fn: Any) -> None:
        if id(fn) in self.seen:
            self.text("again", _name_of(fn))
            return
        self.seen.add(id(fn))
        if isinstance(fn, functools.partial):
            self.text("partial")
            self.callable(fn.func)
            for i, arg in enumerate(fn.args):
                self.value(arg, name=str(i), where=f"partial argument {i}")
            for key, arg in sorted(fn.keywords.items()):
                self.value(arg, name=key, where=f"partial argument {key}")
        elif isinstance(fn, types.MethodType):
            self.text("method")
            self.callable(fn.__func__)
            owner = fn.__self__
            if isinstance(owner, type):  # a classmethod: its class's attributes
                self.text("cls", _name_of(owner))
                self.scope(owner)
            else:
                self.instance(owner, where="self")
        elif isinstance(fn, types.FunctionType):
            self.function(fn)
        elif (
            callable(fn)
            and not isinstance(fn, type)
            and isinstance(type(fn).__call__, types.FunctionType)
        ):
            self.text("instance")  # a callable object: its class's __call__ and its state
            self.callable(type(fn).__call__)
            self.instance(fn, where="self")
        else:
            self.text("named", _name_of(fn))  # a class, a builtin or C function: its name

    def function(self, fn: types.FunctionType) -> None:
        self.text("function", _name_of(fn))
        self.code(fn.__code__)
        defaults = fn.__defaults__ or ()
        first = fn.__code__.co_argcount - len(defaults)
        for i, default in enumerate(defaults):
            var = fn.__code__.co_varnames[first + i]
            self.value(default, name=var, where=f"default {var}")
        for key, default in sorted((fn.__kwdefaults__ or {}).items()):
            self.value(default, name=key, where=f"default {key}")
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            try:
                contents = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            self.value(contents, name=var, where=f"closure variable {var}")
        # Module-level names the code reads: constants by value; functions of the same
        # module (the user's own helpers) by their code. Library functions by name only.
        for var in sorted(_code_names(fn.__code__)):
            if var in fn.__globals__:
                self.member(fn.__globals__[var], name=var, where=f"global {var}")

    def member(self, value: Any, *, name: str, where: str) -> None:
        """A global or class attribute: a function of another module by name only."""
        if isinstance(value, types.FunctionType) and value.__module__ != self.root_module:
            self.text("global", name, _name_of(value))
        else:
            self.value(value, name=name, where=where)

    def instance(self, obj: Any, *, where: str) -> None:
        self.text("self", _name_of(type(obj)))
        if id(obj) in self.objects:
            return
        self.objects.add(id(obj))
        self.scope(type(obj))
        state = getattr(obj, "__dict__", None)
        if isinstance(state, dict):
            for key, value in sorted(state.items(), key=lambda kv: str(kv[0])):
                self.value(value, name=str(key), where=f"{where}.{key}")
        for slot in _slot_names(type(obj)):
            value = getattr(obj, slot, _MISSING)
            if value is not _MISSING:
                self.value(value, name=slot, where=f"{where}.{slot}")

    def class_attributes(self) -> None:
        """Hash each attribute a hashed code names that a class in scope defines, until
        hashing them (their code may name more) turns up nothing new."""
        done: set[tuple[int, str]] = set()
        found = True
        while found:
            found = False
            for cls in list(self.classes):
                for name in sorted(self.names):
                    if (id(cls), name) in done or _is_dunder(name):
                        continue
                    done.add((id(cls), name))
                    raw = _class_attribute(cls, name)
                    if raw is _MISSING:
                        continue
                    found = True
                    self.text("attribute", _name_of(cls), name)
                    self.attribute(raw, name=name, where=f"{cls.__qualname__}.{name}")

    def attribute(self, raw: Any, *, name: str, where: str) -> None:
        if isinstance(raw, (staticmethod, classmethod)):
            self.member(raw.__func__, name=name, where=where)
        elif isinstance(raw, property):
            for part in (raw.fget, raw.fset, raw.fdel):
                if part is not None:
                    self.member(part, name=name, where=where)
        elif isinstance(raw, functools.cached_property):
            self.member(raw.func, name=name, where=where)
        elif isinstance(raw, (types.MemberDescriptorType, types.GetSetDescriptorType)):
            self.text("slot", name)  # the instance's value is hashed with the instance
        else:
            self.member(raw, name=name, where=where)


def function_fingerprint(fn: Callable[..., Any], *, owner: str = "FunctionJudge") -> dict[str, str]:
    """Name and content hash of a callable: what :class:`FunctionJudge` (or ``owner``, e.g.
    ``"FunctionEmbedder"``, which the warning names) puts in its identity when no ``model``
    is named.

    ``function`` is ``module.qualname`` (``<lambda>`` for a lambda). ``code`` is the first
    16 hex digits of a SHA-256 over the bytecode and constants of the function (and of the
    functions defined in it) and over the values it reads:

    * its default arguments and the variables it captures (closure cells);
    * the globals its code names;
    * for a bound method or callable object, the instance's attributes; for a bound method,
      classmethod or callable object, the attributes its code names (``self.x``,
      ``cls.X``, ``getattr(self, "x")``) that its class or a base class defines; likewise
      for a class of the function's own module that it reads (``Judge.THRESHOLD`` in a
      staticmethod). Methods and properties reached so are hashed by their code, and the
      names *their* code reads are looked up the same way.

    Each value counts by value when it is immutable data (numbers, strings, bytes, ``None``,
    tuples and frozensets of them, enum members, compiled regular expressions); a function
    of the same module by its code (library functions by name); a class by its name; an
    object of a class defined in the function's module by its attributes, as above.
    Anything else (a list, a dict, an HTTP client) counts by its type only, so changing it
    does not change the hash: :func:`function_fingerprint` then warns
    (:class:`JudgeIdentityWarning`) naming each such value. Values under a secret-like name
    (``api_key``, ...) count by name only, without a warning.

    The hash is the same in every process for the same code and values, and changes with
    the Python version (the bytecode does). Values are read when the fingerprint is taken
    (once per judge run), so a function that changes what it reads (a call counter on
    ``self``) gets a new fingerprint every run.

    >>> a = function_fingerprint(lambda m: '{"score": 1}')
    >>> b = function_fingerprint(lambda m: '{"score": 0}')
    >>> a["function"].endswith("<lambda>"), a["code"] != b["code"], len(a["code"])
    (True, True, 16)
    """
    root = getattr(fn, "__module__", None)
    if isinstance(fn, functools.partial):
        root = getattr(fn.func, "__module__", None)
    printer = _Fingerprint(root if isinstance(root, str) else None)
    printer.callable(fn)
    printer.class_attributes()
    target = fn.func if isinstance(fn, functools.partial) else fn
    name = _name_of(target if inspect.isroutine(target) else type(target))
    if printer.loose:
        shown = ", ".join(printer.loose[:6])
        more = f" and {len(printer.loose) - 6} more" if len(printer.loose) > 6 else ""
        judge = owner == "FunctionJudge"
        cache, served, it = (
            ("judge cache", "verdicts", "the judge")
            if judge
            else ("embedding cache", "vectors", "the embedder")
        )
        warnings.warn(
            JudgeIdentityWarning(
                f"the identity of {owner}({name}) counts these values it reads by "
                f"their type only: {shown}{more}. Changing them does not change the "
                f"identity, so the {cache} would serve the {served} given before the "
                f"change. Give {it} a model= name (and settings=) that you change when "
                "they change, or make them immutable (a tuple, a frozenset, a number, a string)."
            ),
            stacklevel=2,
        )
    return {"function": name, "code": printer.hash.hexdigest()[:16]}


# Named where they are documented and always were (a fingerprint names a function by its
# module, so a judge function that reads one of these hashes as it did before the split).
JudgeIdentityWarning.__module__ = "ragmeter.judge.protocol"
function_fingerprint.__module__ = "ragmeter.judge.protocol"
