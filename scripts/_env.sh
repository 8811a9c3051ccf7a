# Sourced by scripts/demo, scripts/test and .ci/run: creates or reuses .venv and installs what is needed.
# torch==2.13.0 goes first and explicitly: it is the CPU build on disk; an unpinned torch pulls a CUDA build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "[setup] creating .venv"
    "$PYTHON" -m venv .venv
fi
# shellcheck disable=SC1091
source .venv/bin/activate
# pip's output goes to .venv/pip.log and is shown only when an install fails: on success it is notes that
# need no action (this machine's unused package-index locations; setuptools' "be careful with folders
# named like your package", printed by every editable install of a multi-folder layout such as ours, where
# the folders are the package's own sources).
pip_logged() {
    if ! python -m pip install -q "$@" >> .venv/pip.log 2>&1; then
        tail -n 40 .venv/pip.log >&2
        echo "[setup] pip install $* failed (full log: .venv/pip.log)" >&2
        return 1
    fi
}
STAMP=.venv/.rewardlab-install-stamp
WANT="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "[setup] installing torch==2.13.0 (CPU), then rewardlab[all,dev] (a few minutes the first time)"
    pip_logged --upgrade pip || true
    pip_logged torch==2.13.0
    # every extra (all: rl, rm, data, ray, search, trackers; vllm has its own venv, scripts/test-vllm) and
    # the test tools: the suite runs every part, and fails where one is missing
    pip_logged -e ".[all,dev]"
    # Google's IFEval checks as lm-eval ships them: the reference the IFEval tests compare with. Its own
    # dependencies are ~30 packages the checks do not use, hence --no-deps.
    pip_logged --no-deps lm-eval==0.4.13
    # verl's reward managers and OpenRLHF's reward client: the integration tests drive them
    # (tests/test_integration_verl.py, tests/test_serve.py). Both declare GPU training stacks (flash-attn,
    # deepspeed, vllm) that these modules never import, hence --no-deps with the few packages they do.
    pip_logged --no-deps verl==0.9.1 openrlhf==0.11.2 tensordict==0.15.3 pyvers==0.2.3 pylatexenc==2.11 \
        codetiming==1.4.0 omegaconf==2.4.0
    # verl's wheel also installs a top-level package named `scripts` (its checkpoint converters), which
    # would shadow this repository's scripts/ (the layer contract's type, tests/test_layers.py): removed.
    rm -rf "$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/scripts"
    python -c "import torch, transformers, rewardlab" || { echo "[setup] install failed" >&2; exit 1; }
    echo "$WANT" > "$STAMP"
fi
# The code rewards' compilers and runtimes (C, C++, Java, JavaScript, TypeScript, Go, Rust) from Debian, and
# what their sandboxed programs need prebuilt; with REWARDLAB_CI=1 a failed install fails here, in one line.
# shellcheck source=scripts/_toolchains.sh
source "$ROOT/scripts/_toolchains.sh"
export TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
export HF_DATASETS_OFFLINE="${HF_DATASETS_OFFLINE:-1}"
