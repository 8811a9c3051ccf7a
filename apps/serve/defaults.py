"""The server's defaults, in one place for :class:`~rewardlab.serve.app.RewardServer` and the
``rewardlab serve`` flags (importing this imports no web framework)."""

DEFAULT_WORKERS = 2
DEFAULT_SPARE_WORKERS = 0
"""Off: the plain pool, whose answers equal ``rewardlab score``'s. Spares keep clean requests fast under a
flood of hostile rows, at the price of a few slow legitimate rows timing out (docs/serve.md)."""
DEFAULT_TIMEOUT_S = 10.0
DEFAULT_TOKEN_ENV = "REWARDLAB_SERVE_TOKEN"
DEFAULT_MAX_BODY_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_ROWS = 4096
