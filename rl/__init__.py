"""Verifier-driven RL: advantage estimators and losses as pure functions, a thin training loop, rollouts."""
