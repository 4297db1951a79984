"""The custom-header codec: one declaration per field, both directions, in Java's order.

Java turns a header object into ``extFields`` by ``toString()``-ing every
non-null field (``makeCustomHeaderToNet``) and back by parsing the strings,
refusing a missing ``@CFNotNull`` field. A header class (see :mod:`.headers`)
declares its fields once, with the exact wire name and kind, and gets both
directions from :class:`Header`:

* :meth:`Header.to_ext` writes every field that is not ``None`` as a string
  (booleans as ``true``/``false``), like Java;
* :meth:`Header.from_ext` is tolerant where peers differ: values may be
  numbers (the C++ client sends some as JSON numbers), unknown keys (ACL
  signatures, ``ReqT``) are ignored, a missing optional field keeps its
  default; a missing required field raises :class:`ProtocolError` naming it.

Kept apart from the typed headers so a processor that declares its own header
(the broker's admin requests) depends on the codec, not on every header class.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from functools import lru_cache
from typing import Any, ClassVar, Mapping, TypeVar

from rmqrun.protocol.java_order import java_hash_set_order
from rmqrun.remoting.errors import MissingFieldError, ProtocolError
from rmqrun.remoting.message_props import java_string_hash

T = TypeVar("T", bound="Header")

_STR, _INT, _BOOL = "str", "int", "bool"


def _field(wire: str, kind: str, default: Any = MISSING) -> Any:
    meta = {"wire": wire, "kind": kind}
    if default is MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


def str_field(wire: str, default: Any = MISSING) -> Any:
    """A string field; no default means required."""
    return _field(wire, _STR, default)


def int_field(wire: str, default: Any = MISSING) -> Any:
    """An integer field (Java Integer or Long); no default means required."""
    return _field(wire, _INT, default)


def bool_field(wire: str, default: Any = MISSING) -> Any:
    """A boolean field. Java primitive booleans default to False and are always sent."""
    return _field(wire, _BOOL, default)


@dataclass(frozen=True, slots=True)
class _Spec:
    attr: str
    wire: str
    kind: str
    required: bool


def format_value(value: Any, kind: str) -> str:
    if kind == _BOOL:
        return "true" if value else "false"
    if kind == _INT:
        return str(int(value))
    return str(value)


def parse_value(raw: Any, kind: str, where: str) -> Any:
    """One ext value to its Python type; numbers and strings are both accepted."""
    if kind == _STR:
        return raw if isinstance(raw, str) else format_value(raw, _BOOL if isinstance(raw, bool) else _STR)
    if kind == _INT:
        if isinstance(raw, bool):
            return int(raw)
        if isinstance(raw, int):
            return raw
        if isinstance(raw, float) and raw.is_integer():
            return int(raw)
        try:
            return int(str(raw).strip())
        except ValueError:
            raise ProtocolError(f"{where}: {raw!r} is not an integer") from None
    # Java's Boolean.parseBoolean: only "true" (any case) is true. "1" is
    # accepted too because the C++ client writes flags as 0/1.
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, (int, float)):
        return raw != 0
    text = str(raw).strip().lower()
    return text == "true" or text == "1"


_ORDER_CACHE: dict[tuple[str, ...], tuple[str, ...]] = {}


def java_map_order(ext: dict[str, str]) -> dict[str, str]:
    """``ext`` re-keyed in the iteration order of a Java ``HashMap`` filled in this order.

    Java keeps ``extFields`` in a HashMap and a JSON header lists them in its
    iteration order (by String.hashCode bucket), so emitting that order makes
    our JSON frames byte-identical to a Java peer's. (A binary frame of a
    "fast codes" header lists the declared order instead: :meth:`Header.to_ext_declared`.)
    """
    keys = tuple(ext)
    order = _ORDER_CACHE.get(keys)
    if order is None:
        order = tuple(java_hash_set_order(keys, java_string_hash))
        if len(_ORDER_CACHE) < 4096:
            _ORDER_CACHE[keys] = order
    return {k: ext[k] for k in order}


JAVA_HEADER_PACKAGE = "org.apache.rocketmq.common.protocol.header."
JAVA_RPC_REQUEST_HEADER = "org.apache.rocketmq.common.rpc.RpcRequestHeader"


@lru_cache(maxsize=None)
def java_field_order(java_class: str, names: tuple[tuple[str, bool], ...]) -> tuple[str, ...]:
    """The order Java's ``makeCustomHeaderToNet`` puts a header's fields into ``extFields``.

    It walks a ``HashSet<Field>`` of the class's and its superclasses' fields, and a
    Field hashes as ``declaringClass.getName().hashCode() ^ name.hashCode()``. That
    order only shows when two keys share a HashMap bucket, but then it decides
    which comes first. ``names`` are (field name, declared in RpcRequestHeader).
    """
    items = [(JAVA_RPC_REQUEST_HEADER if in_base else java_class, name) for name, in_base in names]
    ordered = java_hash_set_order(items, lambda it: java_string_hash(it[0]) ^ java_string_hash(it[1]))
    return tuple(name for _, name in ordered)


class Header:
    """Base of every custom header; subclasses are keyword-only dataclasses.

    ``JAVA_CLASS`` names the 4.9.8 class (for the ext-field order, see
    :meth:`to_ext`); ``JAVA_EXTRAS`` are keys a Java processor adds to the
    command before the header is written (e.g. the send answer's MSG_REGION).
    """

    __slots__ = ()
    _specs: ClassVar[tuple[_Spec, ...]]
    JAVA_CLASS: ClassVar[str | None] = None
    JAVA_EXTRAS: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def specs(cls) -> tuple[_Spec, ...]:
        specs = cls.__dict__.get("_specs")
        if not specs:
            specs = tuple(
                _Spec(f.name, f.metadata["wire"], f.metadata["kind"],
                      f.default is MISSING and f.default_factory is MISSING)  # type: ignore[misc]
                for f in fields(cls)  # type: ignore[arg-type]
                if "wire" in f.metadata
            )
            cls._specs = specs
        return specs

    def to_ext(self) -> dict[str, str]:
        """The ext fields, in Java HashMap order (what a Java JSON frame shows).

        The order depends only on the class and on which fields are present, so it is worked out once per
        such pair and kept (a pull sends the same header shape every time)."""
        declared = self.to_ext_declared()
        key = (type(self), tuple(declared))
        order = _TO_EXT_ORDER.get(key)
        if order is None:
            order = tuple(self._java_ordered(declared, self.JAVA_CLASS, None))
            if len(_TO_EXT_ORDER) < 4096:
                _TO_EXT_ORDER[key] = order
        return {k: declared[k] for k in order}

    @classmethod
    def _java_ordered(cls, declared: dict[str, str], java_class: str | None,
                      rename: dict[str, str] | None) -> dict[str, str]:
        if java_class is None:
            return declared
        names = [(rename.get(s.wire, s.wire) if rename else s.wire, s.wire == "bname" and not rename)
                 for s in cls.specs() if s.wire not in cls.JAVA_EXTRAS]
        if rename is not None and "bname" in rename:
            names.append(("bname", True))  # V2 inherits an (always null) bname besides its own "n"
        order = cls.JAVA_EXTRAS + java_field_order(JAVA_HEADER_PACKAGE + java_class, tuple(names))
        return java_map_order({k: declared[k] for k in order if k in declared})

    def to_ext_declared(self) -> dict[str, str]:
        """The ext fields in declaration order (a Java binary frame of a fast-codes header)."""
        cls = type(self)
        encode = cls.__dict__.get("_encode")
        if encode is None:
            encode = cls._encode = compile_encoder(cls.__name__, cls.specs())  # type: ignore[attr-defined]
        return encode(self)  # type: ignore[no-any-return]

    @classmethod
    def from_ext(cls: type[T], ext: Mapping[str, Any] | None) -> T:
        decode = cls.__dict__.get("_decode")
        if decode is None:
            decode = compile_decoder(cls.__name__, cls.specs())
            cls._decode = decode  # type: ignore[attr-defined]
        return cls(**decode(ext or {}))


#: (header class, the wire names present in declared order) -> the same names in Java HashMap order
_TO_EXT_ORDER: dict[tuple[type, tuple[str, ...]], tuple[str, ...]] = {}


def _encode_line(spec: _Spec, i: int) -> list[str]:
    """Source of one field's step in a compiled encoder: what :func:`format_value` does, inlined by kind."""
    if spec.kind == _BOOL:
        text = "'true' if v else 'false'"
    elif spec.kind == _INT:
        text = "str(v) if v.__class__ is int else str(int(v))"  # int() turns a bool into 1 / 0, as format_value
    else:
        text = "v if v.__class__ is str else str(v)"
    missing = (f"        raise ProtocolError(name + ': required field ' + repr(WIRE[{i}]) + ' is None')"
               if spec.required else "        pass")
    return [f"    v = self.{spec.attr}", "    if v is None:", missing, "    else:", f"        out[WIRE[{i}]] = {text}"]


def compile_encoder(name: str, specs: tuple[_Spec, ...]) -> Any:
    """A function writing a header's ext fields in declaration order, with one straight step per field.

    Exactly :meth:`Header.to_ext_declared`'s old loop (same strings, same order, same error), without a
    spec walk, a ``getattr`` and a :func:`format_value` call per field on every request."""
    lines = ["def encode(self):", "    out = {}"]
    for i, spec in enumerate(specs):
        lines += _encode_line(spec, i)
    lines.append("    return out")
    scope: dict[str, Any] = {"WIRE": tuple(s.wire for s in specs), "ProtocolError": ProtocolError, "name": name}
    exec("\n".join(lines), scope)  # noqa: S102 - source built here from the class's own field declarations
    return scope["encode"]


def compile_decoder(name: str, specs: tuple[_Spec, ...]) -> Any:
    """A function reading a header's ext fields into constructor keywords, one straight step per field.

    The same values and errors as calling :func:`parse_value` per field: a string field that is a string,
    and an integer field that is an ``int`` or a string ``int()`` reads, are taken inline; anything else,
    and a string ``int()`` refuses, goes through :func:`parse_value` (which raises its own error)."""
    lines = ["def decode(ext):", "    kw = {}", "    get = ext.get"]
    for i, spec in enumerate(specs):
        lines += [f"    raw = get(WIRE[{i}])", "    if raw is None:"]
        lines.append(f"        raise MissingFieldError(name, WIRE[{i}])" if spec.required else "        pass")
        if spec.kind == _STR:
            lines += ["    elif isinstance(raw, str):", f"        kw[ATTR[{i}]] = raw"]
        elif spec.kind == _INT:
            # int(text) reads what int(text.strip()) reads (it strips the same whitespace) or fails alike
            lines += ["    elif raw.__class__ is int:", f"        kw[ATTR[{i}]] = raw",
                      "    elif raw.__class__ is str:", "        try:", f"            kw[ATTR[{i}]] = int(raw)",
                      "        except ValueError:",
                      f"            kw[ATTR[{i}]] = parse_value(raw, KIND[{i}], WHERE[{i}])"]
        lines += ["    else:", f"        kw[ATTR[{i}]] = parse_value(raw, KIND[{i}], WHERE[{i}])"]
    lines.append("    return kw")
    scope: dict[str, Any] = {
        "WIRE": tuple(s.wire for s in specs), "ATTR": tuple(s.attr for s in specs),
        "KIND": tuple(s.kind for s in specs), "WHERE": tuple(f"{name}.{s.wire}" for s in specs),
        "MissingFieldError": MissingFieldError, "parse_value": parse_value, "name": name,
    }
    exec("\n".join(lines), scope)  # noqa: S102 - source built here from the class's own field declarations
    return scope["decode"]


__all__ = [
    "Header", "java_map_order", "java_field_order", "str_field", "int_field", "bool_field", "format_value",
    "parse_value", "JAVA_HEADER_PACKAGE", "JAVA_RPC_REQUEST_HEADER",
]
