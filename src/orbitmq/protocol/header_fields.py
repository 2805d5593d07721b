"""The machinery behind the typed headers of ``protocol.headers``: field rules, parsing, rendering.

A header is a frozen dataclass deriving from :class:`HeaderBase`; each field's type is a
scalar (``int``, ``bool``, ``str``) optionally wrapped in ``Annotated`` with a :class:`Rule`
(the aliases below: ``Int32``, ``Topic``, ``Group``, ...). :meth:`HeaderBase.from_ext` parses
every field from a command's ext fields and checks its rule; :meth:`HeaderBase.to_ext` renders
them back. See ``protocol.headers`` for the reading rules and the headers themselves.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Self

from orbitmq.errors import BadRequestError
from orbitmq.protocol.codes import ResponseCode
from orbitmq.protocol.names import group_name_problem, shorten, topic_name_problem

_LONG_MIN = -(1 << 63)
_LONG_MAX = (1 << 63) - 1
INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
_TRUE_TEXT = frozenset({"true", "1"})
_FALSE_TEXT = frozenset({"false", "0", ""})

TEXT_MAX_CHARS = 255
"""Longest free-text header value (ids, addresses, client ids) unless a field says otherwise."""
QUEUE_NUMS_MAX = 1024
"""Most read or write queues a topic may have."""
SUBSCRIPTION_MAX_CHARS = 65535
"""Longest subscription expression of a pull."""
QUERY_KEY_MAX_CHARS = 32767
"""Longest key of a QUERY_MESSAGE (a key is part of a property string, itself at most 32767 bytes)."""


@dataclass(frozen=True, slots=True)
class Rule:
    """What a header field's value must satisfy once parsed (attached with ``Annotated``).

    ``low``/``high`` bound an integer; ``max_chars``/``max_bytes`` bound a string (``max_bytes``
    counts UTF-8 bytes, as RocketMQ does for the property string); ``name`` applies the topic
    or group naming rule of ``protocol.names``; ``choices`` lists the only values allowed.
    ``code`` is the response code a breach answers with.
    """

    low: int | None = None
    high: int | None = None
    max_chars: int | None = None
    max_bytes: int | None = None
    name: str | None = None
    choices: tuple[object, ...] | None = None
    allow_empty: bool = False
    code: int = ResponseCode.SYSTEM_ERROR


# Field types: the scalar a field parses to, with the rule its value must meet.
Int32 = Annotated[int, Rule(low=INT32_MIN, high=INT32_MAX)]
NonNegativeInt32 = Annotated[int, Rule(low=0, high=INT32_MAX)]
NonNegativeInt64 = Annotated[int, Rule(low=0)]
QueueNums = Annotated[int, Rule(low=1, high=QUEUE_NUMS_MAX)]
Text = Annotated[str, Rule(max_chars=TEXT_MAX_CHARS)]
Topic = Annotated[str, Rule(name="topic")]
OptionalTopic = Annotated[str, Rule(name="topic", allow_empty=True)]
Group = Annotated[str, Rule(name="group")]
OptionalGroup = Annotated[str, Rule(name="group", allow_empty=True)]
# A message's own fields: RocketMQ answers MESSAGE_ILLEGAL when they are out of range.
MessageInt32 = Annotated[int, Rule(low=INT32_MIN, high=INT32_MAX, code=ResponseCode.MESSAGE_ILLEGAL)]
ReconsumeTimes = Annotated[int, Rule(low=0, high=INT32_MAX, code=ResponseCode.MESSAGE_ILLEGAL)]
PropertyString = Annotated[str, Rule(max_bytes=32767, code=ResponseCode.MESSAGE_ILLEGAL)]


def wire(name: str, default: Any = dataclasses.MISSING) -> Any:
    """Declare a header field whose wire name is not the camelCase of its Python name."""
    return dataclasses.field(default=default, metadata={"wire": name})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _parse_int(text: str) -> int:
    stripped = text.strip()
    # Python's int() also takes "1_000" and non-ASCII digits; Java's parseLong takes neither.
    # A long has at most 20 characters with its sign: refuse longer text before converting it.
    if not stripped.isascii() or "_" in stripped or len(stripped) > 20:
        raise ValueError("not a decimal integer")
    value = int(stripped, 10)
    if not _LONG_MIN <= value <= _LONG_MAX:
        raise ValueError("outside the signed 64-bit range")
    return value


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE_TEXT:
        return True
    if lowered in _FALSE_TEXT:
        return False
    raise ValueError("not a boolean")


def _parse_str(text: str) -> str:
    return text


_PARSERS: dict[type, Callable[[str], Any]] = {int: _parse_int, bool: _parse_bool, str: _parse_str}


def _render(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One header field as the wire sees it: its names, scalar type, rule and whether required."""

    attr: str
    wire_name: str
    base: type
    parse: Callable[[str], Any]
    is_numeric: bool
    required: bool
    rule: Rule | None
    # (low, high) of an integer rule without choices: the common check, done inline.
    bounds: tuple[int, int] | None = None
    # The check of a text or boolean field's rule, chosen once: ``check(value)`` is the
    # problem, None when the value is fine (None: no rule to check).
    check: Callable[[Any], str | None] | None = None


def _base_and_rule(hint: Any) -> tuple[type, Rule | None]:
    """``(int, rule)`` for ``Int32`` and ``Int32 | None``: the scalar a field parses to, its rule."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    candidate = args[0] if args and typing.get_origin(hint) is not Annotated else hint
    rule = None
    if typing.get_origin(candidate) is Annotated:
        base, *extras = typing.get_args(candidate)
        rule = next((extra for extra in extras if isinstance(extra, Rule)), None)
    else:
        base = candidate
    if base not in _PARSERS:
        raise TypeError(f"header field type {hint!r} is not str, int or bool")
    return typing.cast(type, base), rule


def _checker(base: type, rule: Rule | None) -> Callable[[Any], str | None] | None:
    """The check of a non-integer field's rule, as :func:`_breach` makes it, chosen once per field."""
    if rule is None or base is int:
        return None
    if base is str and rule.name is not None:
        # A name rule is the whole check of a text field (see _breach); its verdicts are cached.
        name_problem = topic_name_problem if rule.name == "topic" else group_name_problem
        if rule.allow_empty:
            return lambda text: None if text == "" else name_problem(text)
        return name_problem
    return functools.partial(_breach, rule)


def _breach(rule: Rule, value: Any) -> str | None:
    """What is wrong with ``value`` under ``rule`` (None when nothing)."""
    if isinstance(value, bool):
        return None if rule.choices is None or value in rule.choices else "is not allowed"
    if isinstance(value, int):
        if rule.choices is not None and value not in rule.choices:
            return f"is {value}, not one of {', '.join(map(str, rule.choices))}"
        low = rule.low if rule.low is not None else _LONG_MIN
        high = rule.high if rule.high is not None else _LONG_MAX
        if not low <= value <= high:
            return f"is {value}, outside [{low}, {high}]"
        return None
    text = typing.cast(str, value)
    if rule.name is not None:
        if rule.allow_empty and text == "":
            return None
        return topic_name_problem(text) if rule.name == "topic" else group_name_problem(text)
    if rule.choices is not None and text not in rule.choices:
        return f"is {shorten(text)!r}, not one of {', '.join(map(str, rule.choices))}"
    if rule.max_chars is not None and len(text) > rule.max_chars:
        return f"has {len(text)} characters, more than {rule.max_chars}"
    if rule.max_bytes is not None and len(text) > rule.max_bytes // 4:
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > rule.max_bytes:
            return f"has {size} bytes, more than {rule.max_bytes}"
    return None


# One field as read_fields reads it: (read name, attribute, scalar type, the integer range that
# needs no further check, the check of a text or boolean rule, the field's spec).
_PlanStep = tuple[str, str, type, int, int, Callable[[Any], str | None] | None, FieldSpec]
# The spellings of a boolean nearly every client sends (others go through _parse_bool).
_PLAIN_BOOLS = {"true": True, "false": False, "1": True, "0": False}


def _plan_step(spec: FieldSpec, name: str) -> _PlanStep:
    if spec.bounds is not None:
        low, high = spec.bounds
    elif spec.rule is None:
        low, high = _LONG_MIN, _LONG_MAX  # _parse_int already keeps a value to a long
    else:
        low, high = 1, 0  # a rule with choices: always checked
    return (name, spec.attr, spec.base, low, high, spec.check, spec)


class HeaderBase:
    """Shared ``from_ext``/``to_ext`` driven by each subclass's dataclass fields."""

    __slots__ = ()
    _specs_cache: ClassVar[dict[type, tuple[FieldSpec, ...]]] = {}
    _names_cache: ClassVar[dict[type, tuple[str, ...]]] = {}
    _plans: ClassVar[dict[tuple[type, tuple[str, ...]], tuple[_PlanStep, ...]]] = {}

    @classmethod
    def field_specs(cls) -> tuple[FieldSpec, ...]:
        """Every field of this header with its wire name, type and rule (in declaration order)."""
        specs = HeaderBase._specs_cache.get(cls)
        if specs is None:
            hints = typing.get_type_hints(cls, include_extras=True)
            built = []
            for item in dataclasses.fields(cls):  # type: ignore[arg-type]
                base, rule = _base_and_rule(hints[item.name])
                required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
                bounds = None
                if rule is not None and base is int and rule.choices is None:
                    low = rule.low if rule.low is not None else _LONG_MIN
                    bounds = (low, rule.high if rule.high is not None else _LONG_MAX)
                built.append(
                    FieldSpec(
                        attr=item.name,
                        wire_name=item.metadata.get("wire", _camel(item.name)),
                        base=base,
                        parse=_PARSERS[base],
                        is_numeric=base is int,
                        required=required,
                        rule=rule,
                        bounds=bounds,
                        check=_checker(base, rule),
                    )
                )
            specs = tuple(built)
            HeaderBase._specs_cache[cls] = specs
        return specs

    @classmethod
    def wire_names(cls) -> tuple[str, ...]:
        """Each field's wire name, in the order of :meth:`field_specs`."""
        names = HeaderBase._names_cache.get(cls)
        if names is None:
            names = HeaderBase._names_cache[cls] = tuple(spec.wire_name for spec in cls.field_specs())
        return names

    @classmethod
    def from_ext(cls, ext: dict[str, str]) -> Self:
        """Build the header from a command's ext fields, checking every field's rule.

        Raises:
            BadRequestError: a required field is missing, a value does not parse or breaks
                its rule; the remark names the header and the wire field, the code is the
                rule's (SYSTEM_ERROR unless it says MESSAGE_ILLEGAL).
        """
        return cls.read_fields(ext, cls.wire_names())

    @classmethod
    def read_fields(cls, ext: dict[str, str], names: tuple[str, ...]) -> Self:
        """:meth:`from_ext` reading each field under ``names`` (parallel to :meth:`field_specs`).

        Remarks name a field by its wire name whatever it was read under, so a header sent
        under other names (SEND_MESSAGE_V2's letters) is refused in the same words.
        """
        plan = HeaderBase._plans.get((cls, names))
        if plan is None:
            plan = HeaderBase._plans[(cls, names)] = tuple(
                _plan_step(spec, name) for spec, name in zip(cls.field_specs(), names, strict=True)
            )
        values: dict[str, Any] = {}
        for name, attr, kind, low, high, check, spec in plan:
            text = ext.get(name)
            if text is None:
                if spec.required:
                    raise _missing(cls, spec)
                continue
            if kind is int:
                # Plain digits (nearly every value): int() takes them as Java's parseLong does,
                # and 18 of them always fit a long. Anything else goes through the full rules.
                if text.isdigit() and len(text) < 19 and text.isascii():
                    value: Any = int(text)
                elif text.strip() == "":
                    if spec.required:
                        raise _missing(cls, spec)
                    continue
                else:
                    value = _parse_or_refuse(cls, spec, text)
                if not low <= value <= high and spec.rule is not None:
                    problem = _breach(spec.rule, value)
                    if problem is not None:
                        raise _breached(cls, spec, problem)
            else:
                if kind is str:
                    value = text
                else:
                    value = _PLAIN_BOOLS.get(text)
                    if value is None:
                        value = _parse_or_refuse(cls, spec, text)
                if check is not None:
                    problem = check(value)
                    if problem is not None:
                        raise _breached(cls, spec, problem)
            values[attr] = value
        return cls(**values)

    def to_ext(self) -> dict[str, str]:
        """The ext fields of this header, every value a string, ``None`` fields omitted."""
        ext: dict[str, str] = {}
        for spec in self.field_specs():
            value = getattr(self, spec.attr)
            if value is not None:
                ext[spec.wire_name] = _render(value)
        return ext


def _missing(header: type, spec: FieldSpec) -> BadRequestError:
    return BadRequestError(
        f"{header.__name__}: required field {spec.wire_name!r} is missing", field=spec.wire_name
    )


def _parse_or_refuse(header: type, spec: FieldSpec, text: str) -> Any:
    try:
        return spec.parse(text)
    except (ValueError, TypeError):
        code = spec.rule.code if spec.rule is not None else ResponseCode.SYSTEM_ERROR
        raise BadRequestError(
            f"{header.__name__}: field {spec.wire_name!r} has unparsable value {shorten(text)!r}",
            int(code),
            spec.wire_name,
        ) from None


def _breached(header: type, spec: FieldSpec, problem: str) -> BadRequestError:
    rule = spec.rule
    assert rule is not None
    return BadRequestError(
        f"{header.__name__}: field {spec.wire_name!r} {problem}"
        if rule.name is None
        else f"{header.__name__}: field {spec.wire_name!r}: {problem}",
        int(rule.code),
        spec.wire_name,
    )
