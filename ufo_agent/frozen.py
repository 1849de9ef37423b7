"""Frozen dataclasses whose instances are quick to make.

``dataclasses.dataclass(frozen=True)`` writes each field in ``__init__``
through ``object.__setattr__`` (its own ``__setattr__`` refuses), which
costs more than the rest of making a value: a value of a dozen fields
took 5 us. The agent makes several per guest on every tick (the guest's
sample and report, its observation, its rates), so :func:`value` gives
such a class an ``__init__`` that fills the instance's dict at once.
Everything else (fields, defaults, eq, hash, repr, replace, refusing
assignment) is the dataclass's own.
"""

import dataclasses


def value(cls):
    """``dataclasses.dataclass(frozen=True)``, made quickly.

    Only a class that is a plain record: no ``__post_init__``, no
    default factory, no init-only or keyword-only field (else the
    dataclass is left as it is).
    """
    cls = dataclasses.dataclass(frozen=True)(cls)
    fields = dataclasses.fields(cls)
    if hasattr(cls, '__post_init__') or '__slots__' in vars(cls) or any(
            not f.init or f.kw_only or f.name == '_dict_' or
            f.default_factory is not dataclasses.MISSING for f in fields):
        return cls
    params, defaults = [], {}
    for f in fields:
        if f.default is dataclasses.MISSING:
            params.append(f.name)
        else:
            defaults['_default_' + f.name] = f.default
            params.append('%s=_default_%s' % (f.name, f.name))
    # One store a field into the instance's dict: about half the cost
    # of an update() with keywords, which builds a dict first.
    source = 'def __init__(self, %s):\n    _dict_ = self.__dict__\n%s' % (
        ', '.join(params), ''.join('    _dict_[%r] = %s\n' % (f.name, f.name)
                                   for f in fields))
    namespace = dict(defaults)
    exec(source, namespace)
    init = namespace['__init__']
    init.__qualname__ = '%s.__init__' % cls.__qualname__
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls
