"""argparse ``type=`` functions shared by ``ufo-sim`` and its calibration.

Each wraps a validator of the model and turns its ValueError into
``argparse.ArgumentTypeError``, so the usage error keeps the message.
"""

import argparse

from ufo_sim import profiles


def profile_option(text):
    """``PROFILE.FIELD=VALUE`` (:func:`ufo_sim.profiles.parse_option`)."""
    try:
        return profiles.parse_option(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))
