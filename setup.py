"""Maps the top-level folders onto one import namespace, ``rewardkit.*``.

``verifiers/`` becomes ``rewardkit.verifiers``, ``rl/`` becomes ``rewardkit.rl`` and so on, so the project
never collides with other PyPI packages (a ``verifiers`` package exists there). Metadata lives in
pyproject.toml; this file only computes the package list, which setuptools' declarative config cannot do
for several roots.
"""

from setuptools import find_namespace_packages, setup

ROOTS = {
    "rewardkit": "rewardkit",
    "rewardkit.verifiers": "verifiers",
    "rewardkit.rewardmodels": "rewardmodels",
    "rewardkit.rl": "rl",
    "rewardkit.data": "data",
    "rewardkit.eval": "eval",
    "rewardkit.envs": "envs",
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
