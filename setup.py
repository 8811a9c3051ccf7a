"""Maps the repository's top-level folders, one folder a floor, onto one import namespace, ``rewardlab.*``.

``verifiers/`` becomes ``rewardlab.verifiers``, ``rl/`` becomes ``rewardlab.rl`` and so on; the four
packages of the apps floor (``apps/serve/``, ...) become ``rewardlab.serve`` and its siblings. The core is
``rewardlab/`` itself. The order of the floors is docs/DEVELOPING.md's picture and the import-linter
contract in pyproject.toml. Metadata lives in pyproject.toml; this file only computes the package list, which
setuptools' declarative config cannot do for several roots.
"""

from setuptools import find_namespace_packages, setup

ROOTS = {
    "rewardlab": "rewardlab",
    "rewardlab.data": "data",
    "rewardlab.verifiers": "verifiers",
    "rewardlab.scoring": "scoring",
    "rewardlab.training": "training",
    "rewardlab.generation": "generation",
    "rewardlab.core_algos": "core_algos",
    "rewardlab.rewardmodels": "rewardmodels",
    "rewardlab.envs": "envs",
    "rewardlab.rl": "rl",
    "rewardlab.eval": "eval",
    "rewardlab.demos": "apps/demos",
    "rewardlab.integrations": "apps/integrations",
    "rewardlab.serve": "apps/serve",
    "rewardlab.view": "apps/view",
    "rewardlab.cli": "cli",
}

packages: list[str] = []
package_dir: dict[str, str] = {}
for package, folder in ROOTS.items():
    package_dir[package] = folder
    packages.append(package)
    for sub in find_namespace_packages(folder, exclude=["*__pycache__*"]):
        packages.append(f"{package}.{sub}")
        package_dir[f"{package}.{sub}"] = f"{folder}/{sub.replace('.', '/')}"

setup(packages=packages, package_dir=package_dir)
