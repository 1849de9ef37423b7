"""Quick frozen values behave as the frozen dataclasses they are."""

import dataclasses

import pytest

from ufo_agent import frozen


@frozen.value
class Quick:
    a: int
    b: float = 0.5
    c: str = None


@dataclasses.dataclass(frozen=True)
class Plain:
    a: int
    b: float = 0.5
    c: str = None


def test_a_quick_value_is_made_and_compared_as_a_frozen_dataclass():
    for args, kwargs in (((1,), {}), ((1, 2.0), {'c': 'x'}),
                         ((), {'a': 3, 'c': 'y'})):
        quick, plain = Quick(*args, **kwargs), Plain(*args, **kwargs)
        assert dataclasses.astuple(quick) == dataclasses.astuple(plain)
        assert repr(quick) == repr(plain).replace('Plain', 'Quick')
        assert quick == Quick(*args, **kwargs)
        assert hash(quick) == hash(Quick(*args, **kwargs))
    value = Quick(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        value.a = 2
    assert dataclasses.replace(value, b=1.5) == Quick(1, 1.5)
    assert [f.name for f in dataclasses.fields(value)] == ['a', 'b', 'c']
    with pytest.raises(TypeError):
        Quick()
    with pytest.raises(TypeError):
        Quick(1, d=2)
    assert Quick.__init__ is not Plain.__init__


def test_a_class_that_is_more_than_a_record_keeps_its_init():
    @frozen.value
    class Checked:
        a: int

        def __post_init__(self):
            if self.a < 0:
                raise ValueError(self.a)

    @frozen.value
    class Listed:
        a: list = dataclasses.field(default_factory=list)

    with pytest.raises(ValueError):
        Checked(-1)
    assert Listed().a == [] and Listed().a is not Listed().a
