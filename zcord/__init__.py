"""zcord: the zcor memory daemon and everything a bot needs to talk to it."""

__version__ = "0.1.0"
