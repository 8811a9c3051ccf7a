"""The registry: a name is taken once, re-registering the same definition is harmless, traits stay lazy,
and each algorithm's traits say what its code does."""

from __future__ import annotations

import sys
import types

import pytest
import torch

from rewardlab import core_algos as ca
from rewardlab.core_algos.estimators import EstimatorTraits, advantage_estimator, estimator_traits
from rewardlab.registry import NameTakenError, Registry, UnknownNameError


def first(x):
    """A registered function."""
    return x


def second(x):
    """Another registered function."""
    return x


def test_a_taken_name_is_refused_with_both_entries_named():
    reg = Registry("widget")
    reg.register("w", first)
    with pytest.raises(NameTakenError) as err:
        reg.register("w", second)
    assert str(err.value) == (
        f"widget 'w' is taken by {first.__module__}:first; pass override=True to replace it with "
        f"{second.__module__}:second"
    )
    assert reg.get("w") is first


def test_override_replaces_the_entry_and_its_traits():
    reg = Registry("widget")
    reg.register("w", first, traits="old")
    reg.register("w", second, traits="new", override=True)
    assert reg.get("w") is second and reg.traits("w") == "new"


def test_the_decorator_refuses_a_taken_name_too():
    reg = Registry("widget")
    reg.register("w", first)
    with pytest.raises(NameTakenError):
        reg.register("w")(second)
    assert reg.register("w", override=True)(second) is second


def test_the_same_object_or_path_again_is_not_an_error():
    reg = Registry("widget")
    reg.register("w", first)
    reg.register("w", first)
    path = f"{first.__module__}:first"
    reg.register("lazy", path)
    reg.register("lazy", path)
    reg.register("lazy", first)  # the object the lazy path names
    assert reg.get("lazy") is first


def test_a_module_imported_again_registers_its_new_objects():
    reg = Registry("widget")
    code = "def fn():\n    '''doc'''\n"
    for _ in range(2):  # the same definition, executed twice (a reload): a new object at the same path
        module = types.ModuleType("_reloaded_mod")
        exec(code, module.__dict__)
        module.fn.__module__ = "_reloaded_mod"
        reg.register("fn", module.fn)
    assert reg.get("fn") is module.fn


def test_lambdas_are_only_the_same_when_identical():
    reg = Registry("widget")
    reg.register("f", lambda x: x)
    with pytest.raises(NameTakenError):
        reg.register("f", lambda x: x + 1)


def test_the_same_object_with_other_traits_needs_override():
    reg = Registry("widget")
    reg.register("w", first, traits=1)
    with pytest.raises(NameTakenError, match="traits"):
        reg.register("w", first, traits=2)


def test_traits_of_a_lazy_entry_do_not_import_it():
    reg = Registry("widget")
    reg.register("lazy", "_never_imported_module:thing", traits=EstimatorTraits(needs_critic=True))
    assert reg.traits("lazy").needs_critic
    assert "_never_imported_module" not in sys.modules
    with pytest.raises(UnknownNameError, match="known: lazy"):
        reg.traits("other")


def test_unregister_and_mapping_views():
    reg = Registry("widget")
    reg.register("b", first)
    reg.register("a", second)
    assert list(reg) == ["b", "a"] and reg.names() == ["a", "b"] and len(reg) == 2
    reg.unregister("b")
    assert "b" not in reg and list(reg) == ["a"]
    with pytest.raises(UnknownNameError):
        reg.unregister("b")


def test_a_registry_imports_its_home_on_first_lookup(tmp_path, monkeypatch):
    """A lower layer reads a registry that a higher one fills: the home module is imported on the first
    lookup, and a user's entry cannot shadow a built-in that the home registers later."""
    reg = Registry("widget", home="_registry_home_mod")
    target = types.ModuleType("_registry_home_target")
    target.reg, target.first = reg, first
    monkeypatch.setitem(sys.modules, "_registry_home_target", target)
    (tmp_path / "_registry_home_mod.py").write_text(
        "from _registry_home_target import first, reg\nreg.register('builtin', first)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert "_registry_home_mod" not in sys.modules
        with pytest.raises(NameTakenError, match="builtin"):
            reg.register("builtin", second)
        assert reg.get("builtin") is first and reg.names() == ["builtin"]
    finally:
        sys.modules.pop("_registry_home_mod", None)


def test_every_library_registry_is_a_registry():
    from rewardlab.envs import ENVS
    from rewardlab.envs.tools import TOOLS
    from rewardlab.rewardmodels.shaping import SHAPINGS
    from rewardlab.verifiers import VERIFIERS

    for reg in (
        ca.ADVANTAGE_ESTIMATORS,
        ca.POLICY_LOSSES,
        ca.LOSS_AGG_MODES,
        ca.KL_ESTIMATORS,
        ca.KL_CONTROLLERS,
        ENVS,
        TOOLS,
        SHAPINGS,
        VERIFIERS,
    ):
        assert isinstance(reg, Registry)
    with pytest.raises(NameTakenError, match="grpo' is taken by rewardlab.core_algos.advantages:grpo"):
        ca.ADVANTAGE_ESTIMATORS.register("grpo", second)
    assert list(ca.KL_CONTROLLERS) == ["fixed", "adaptive"]


# ---- the traits are what the code does ------------------------------------------------------------------


GROUP_CENTRED = {
    "grpo",
    "dr_grpo",
    "rloo",
    "reinforce_pp_baseline",
    "step_return",
    "passk",
    "grpo_passk",
    "gdpo",
    "prime",
}
ZERO_ON_EQUAL = {"grpo", "dr_grpo", "rloo", "passk", "grpo_passk"}


def test_the_traits_of_the_built_in_estimators():
    for name in ca.ADVANTAGE_ESTIMATORS.names():
        traits = ca.estimator_traits(name)
        assert traits.centres_by_group == (name in GROUP_CENTRED), name
        assert traits.zero_on_equal_rewards == (name in ZERO_ON_EQUAL), name
        assert traits.needs_critic == (name == "gae"), name
        assert traits.needs_source_rewards == (name == "gdpo"), name
        assert traits.needs_process_rewards == (name == "prime"), name
    assert ca.policy_loss_traits("ppo").dual_clip and not ca.policy_loss_traits("gspo").dual_clip
    assert ca.aggregation_traits("seq-mean-token-sum-norm").counts_masked_samples
    assert not ca.aggregation_traits("token-mean").counts_masked_samples


def _outcome_inputs(scores: list[float]) -> ca.AdvantageInputs:
    """Two groups of three, the reward on each sample's last token; sample 4 is shorter."""
    mask = torch.ones(6, 4)
    mask[4, 2:] = 0
    rewards = torch.zeros(6, 4)
    rewards[torch.arange(6), mask.sum(-1).long() - 1] = torch.tensor(scores)
    s = torch.tensor(scores)
    return ca.AdvantageInputs(
        rewards,
        mask,
        group_size=3,
        values=torch.rand(6, 4, generator=torch.Generator().manual_seed(0)) * mask,
        process_rewards=torch.rand(6, 4, generator=torch.Generator().manual_seed(1)) * mask,
        source_rewards=torch.stack([s, torch.tensor([0.2, 0.5, 0.9, 0.1, 0.7, 0.3])], dim=1),
        source_weights=torch.ones(2),
    )


def _equal_group_inputs() -> ca.AdvantageInputs:
    """Group 0: each sample's rewards sum to 1 (what the trainer's zero-std check reads), arriving on other
    tokens (process rewards) and from other sources (GDPO's); group 1 varies."""
    inputs = _outcome_inputs([1.0, 1.0, 1.0, 0.0, 1.0, 0.5])
    inputs.token_level_rewards[1] = torch.tensor([0.0, 0.5, 0.0, 0.5])
    inputs.source_rewards = torch.tensor(
        [[1, 0, 0], [0, 1, 0], [0, 0.5, 0.5], [0, 0, 0], [1, 0, 0], [0.5, 0, 0]], dtype=torch.float32
    )
    inputs.source_weights = torch.ones(3)
    return inputs


@pytest.mark.parametrize("name", sorted(ca.ADVANTAGE_ESTIMATORS.names()))
def test_zero_on_equal_rewards_is_true_exactly_where_the_code_gives_zero(name):
    adv, _ = _equal_group_inputs().estimate(name)
    assert bool((adv[:3] == 0).all()) == estimator_traits(name).zero_on_equal_rewards, name


@pytest.mark.parametrize("name", sorted(set(ca.ADVANTAGE_ESTIMATORS.names()) - {"passk"}))
def test_centres_by_group_is_true_exactly_where_a_group_shift_changes_nothing(name):
    """A group baseline cancels a constant added to every reward of one group; the others see it."""
    base = [0.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    a, _ = _outcome_inputs(base).estimate(name)
    b, _ = _outcome_inputs([r + 3.0 if i < 3 else r for i, r in enumerate(base)]).estimate(name)
    assert torch.allclose(a, b, atol=1e-5) == estimator_traits(name).centres_by_group, name


def test_passk_centres_each_group():
    """passk reads rewards as right / wrong (a shift changes that), but its advantages sum to 0 per group."""
    inputs = _outcome_inputs([0.0, 1.0, 1.0, 0.0, 0.0, 1.0])
    inputs.k = 2
    adv, _ = inputs.estimate("passk")
    sums = adv[:, 0].view(2, 3).sum(dim=1)
    assert torch.allclose(sums, torch.zeros(2), atol=1e-5) and adv.abs().sum() > 0
    assert estimator_traits("passk").centres_by_group


def test_a_third_party_estimator_registers_with_its_traits():
    @advantage_estimator("_test_registry_est", centres_by_group=True)
    def est(token_level_rewards, response_mask, **_):
        """Test estimator."""
        return token_level_rewards, token_level_rewards

    try:
        assert ca.estimator_traits("_test_registry_est") == EstimatorTraits(centres_by_group=True)
        assert ca.ADVANTAGE_ESTIMATORS.get("_test_registry_est") is est
    finally:
        ca.ADVANTAGE_ESTIMATORS.unregister("_test_registry_est")
