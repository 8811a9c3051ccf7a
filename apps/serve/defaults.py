"""The server's defaults, in one place for :class:`~rewardlab.serve.app.RewardServer` and the
``rewardlab serve`` flags (importing this imports no web framework)."""

DEFAULT_WORKERS = 2
DEFAULT_SPARE_WORKERS = None
"""The Scorer's default (``SPARES_PER_WORKER`` per worker): spares keep clean requests fast under a flood of
hostile rows, and since timeouts count CPU time, they change no answer (docs/serve.md)."""
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_TOKEN_ENV = "REWARDLAB_SERVE_TOKEN"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_ROWS = 4096
