"""Reward models (outcome, process, generative judges) and reward-shaping transforms."""
