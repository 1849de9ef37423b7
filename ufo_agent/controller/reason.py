"""Why the controller decided what it did: a named rule and its values.

Every decision, prediction and VM note carries a :class:`Reason`: the
rule that decided (a short name, the same in code, tests, logs and
``doc/source/controller.rst``) and the numbers it decided on. Its text,
for the decision log and ``/status``, is rendered from the rule's text
only when read. Tests assert on ``rule`` and ``values``, so a reworded
text breaks no test and no reader has to parse prose.

A reason may carry context: ``before`` (what led to it, such as the
traffic a demand was read from) and ``after`` (what was added to it,
such as a grow's drain cores); the text joins them with ``'; '``.

Each module that decides defines its rules with :func:`rule` next to the
code that applies them.
"""

from ufo_agent import frozen

# rule name -> its text: a %-template over the values, or a function of
# the values for a text with optional parts.
_TEXTS = {}


def rule(name, text):
    """Define the rule ``name`` with the text its reasons render to.

    ``text`` is a %-format string over the reason's values (``%(cores)d``)
    or a function of the values that returns the text.
    """
    if name in _TEXTS:
        raise ValueError('rule %s is defined twice' % name)
    _TEXTS[name] = text
    return name


def rules():
    """Every defined rule's name, sorted."""
    return sorted(_TEXTS)


@frozen.value
class Reason:
    """A rule, the values it decided on, and any context around it."""

    rule: str
    values: dict = None     # name -> value; None for a rule without any
    before: tuple = ()      # reasons rendered first
    after: tuple = ()       # reasons rendered last

    def __str__(self):
        text = self.__dict__.get('_text')
        if text is None:
            text = _TEXTS[self.rule]
            own = text(self.values) if callable(text) else \
                text % self.values if self.values else text
            if self.before or self.after:
                own = '; '.join([str(r) for r in self.before] + [own] +
                                [str(r) for r in self.after])
            # Rendered once: a plan's note is read on every tick.
            self.__dict__['_text'] = text = own
        return text

    def after_all(self, *more):
        """This reason with ``more`` rendered after it."""
        return Reason(self.rule, self.values, self.before,
                      self.after + more)

    def before_all(self, *context):
        """This reason with ``context`` rendered before it."""
        return Reason(self.rule, self.values, context + self.before,
                      self.after)

    def parts(self):
        """This reason and every reason inside it, in the text's order."""
        out = []
        for r in self.before:
            out += r.parts()
        out.append(self)
        for value in (self.values or {}).values():
            if isinstance(value, Reason):
                out += value.parts()
            elif isinstance(value, tuple):
                for item in value:
                    if isinstance(item, Reason):
                        out += item.parts()
        for r in self.after:
            out += r.parts()
        return out

    def rules(self):
        """The rules of :meth:`parts`: what a test asserts on."""
        return [r.rule for r in self.parts()]

    def find(self, name):
        """The first of :meth:`parts` with rule ``name``, or None."""
        for r in self.parts():
            if r.rule == name:
                return r
        return None


def of(name, **values):
    """The reason of rule ``name`` with these values."""
    return Reason(name, values) if values else Reason(name)
