"""rewardlab: verifiable rewards, reward models and reinforcement learning for language models.

The package is one namespace over the repository's top-level folders: ``rewardlab.verifiers``
(``verifiers/``), ``rewardlab.rewardmodels``, ``rewardlab.rl``, ``rewardlab.data`` and ``rewardlab.eval``.
"""

from rewardlab.types import Record, Result

__version__ = "0.1.0"

__all__ = ["Record", "Result", "__version__"]
