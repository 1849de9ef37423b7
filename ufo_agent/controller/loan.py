"""A committed core lent to a denied probe on a full host, and its verdict.

On a full host a probe up takes only idle cores, so a VM whose probe was
denied never learns what one core more would give it, and the VMs that
hold the host keep cores their own SF says they need least. A loan runs
the probe on a core of another VM, the lender, whose SF one core smaller
is already known from data near its load. When the probe ends the two
drops are compared: the core stays with the VM whose SF falls more
without it (the paper's SF rule, applied between two VMs where it
applies within one); the other does not commit that core again while
both loads stay. This module holds the choice and the verdict;
:class:`~ufo_agent.controller.controller.Controller` applies them.
"""

import dataclasses

_EPS = 1e-9


@dataclasses.dataclass
class Loan:
    """One core lent by ``lender`` to ``borrower``'s probe."""

    borrower: str
    lender: str
    borrower_cores: int     # the borrower's cores before the loan
    lender_cores: int       # the lender's cores before the loan
    lender_ratio: float     # the lender's SF(c - 1) / SF(c), from data
    trial: object = None    # the borrower's Trial, once its probe runs


@dataclasses.dataclass(frozen=True)
class Ceded:
    """The VM that lost a loan's core commits at most ``cores`` meanwhile.

    Until ``winner`` holds fewer than ``winner_cores``, the loser's
    utilization moves from ``util`` past the SF tolerance, or
    ``sample_max_age`` has passed since ``time``.
    """

    cores: int
    util: float
    winner: str
    winner_cores: int
    time: float


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A VM that could lend: ``ratio`` is its SF(cores - 1) / SF(cores)."""

    uuid: str
    cores: int
    ratio: float


def lender_of(candidates):
    """The candidate whose SF falls least one core smaller, or None."""
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c.ratio, c.uuid))


def borrower_keeps(loan, borrower_ratio):
    """True if the core stays with the borrower.

    ``borrower_ratio`` is its SF(c) / SF(c + 1) measured by the probe, or
    None if either value is missing: then the lender has the evidence and
    gets its core back.
    """
    if borrower_ratio is None:
        return False
    return borrower_ratio < loan.lender_ratio - _EPS
