"""rewardlab's rewards inside other trainers: :mod:`.trl` (a ``GRPOTrainer`` reward function) and :mod:`.verl`
(``compute_score`` for ``custom_reward_function``). See ``docs/integrations.md``.

Importing a submodule imports no torch: the trainer's own library is imported by the caller, and a source
that needs torch (a reward model) loads it when built."""
