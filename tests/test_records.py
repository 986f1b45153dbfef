"""planner/records.py: a record behaves as the frozen dataclass it replaced (construction, defaults,
immutability, ==, hash, repr) and `replace` copies one with fields changed."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from planner import records
from planner.records import field, record


@record
class Point:
    x: int
    y: int = 0
    tags: dict[str, int] = field(default_factory=dict)


@record
class Labelled(Point):
    label: str = "p"


@dataclasses.dataclass(frozen=True)
class DataPoint:
    x: int
    y: int = 0
    tags: dict[str, int] = dataclasses.field(default_factory=dict)


def test_construction_by_position_and_keyword_with_defaults() -> None:
    assert (Point(1).x, Point(1).y, Point(1, 2).y, Point(x=3, y=4).y) == (1, 0, 2, 4)
    assert Point(1).tags == {} and Point(1).tags is not Point(1).tags  # a fresh default each time


def test_same_equality_hash_and_repr_as_a_frozen_dataclass() -> None:
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert Point(1) != DataPoint(1)  # another class is never equal
    assert hash(Point(1, 2, ())) == hash(DataPoint(1, 2, ()))  # type: ignore[arg-type]
    assert repr(Point(1, 2)) == repr(DataPoint(1, 2)).removeprefix("Data") == "Point(x=1, y=2, tags={})"


def test_frozen() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del point.x  # type: ignore[misc]


def test_a_subclass_adds_fields_after_its_base() -> None:
    assert records.field_names(Labelled) == ("x", "y", "tags", "label")
    assert Labelled(1, 2, {}, "a").label == "a"


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "missing required argument: 'x'"),
        ((1, 2, {}, 4), {}, "takes 3 fields but 4 were given"),
        ((1,), {"x": 2}, "multiple values for argument 'x'"),
        ((1,), {"z": 2}, "unexpected keyword argument 'z'"),
    ],
)
def test_wrong_arguments_fail_as_a_dataclass_would(
    args: tuple[object, ...], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        Point(*args, **kwargs)  # type: ignore[arg-type]


def test_replace_changes_only_the_given_fields() -> None:
    point = Labelled(1, 2, {"a": 1}, "a")
    assert records.replace(point, y=5) == Labelled(1, 5, {"a": 1}, "a")
    with pytest.raises(TypeError, match="no field 'z'"):
        records.replace(point, z=1)


def test_pickles_by_its_field_values() -> None:
    point = Labelled(1, 2, {"a": 1}, "a")
    assert pickle.loads(pickle.dumps(point)) == point
    assert point.__reduce__() == (Labelled, (1, 2, {"a": 1}, "a"))
