"""rewardkit: verifiable rewards, reward models and reinforcement learning for language models.

The package is one namespace over the repository's top-level folders: ``rewardkit.verifiers``
(``verifiers/``), ``rewardkit.rewardmodels``, ``rewardkit.rl``, ``rewardkit.data`` and ``rewardkit.eval``.
"""

from rewardkit.types import Record, Result

__version__ = "0.1.0"

__all__ = ["Record", "Result", "__version__"]
