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
STAMP=.venv/.rewardkit-install-stamp
WANT="$(cat pyproject.toml setup.py | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
    echo "[setup] installing torch==2.13.0 (CPU), then rewardkit[dev] (a few minutes the first time)"
    python -m pip install -q --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
    python -m pip install -q torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
    python -m pip install -q -e ".[dev]" 2>&1 | grep -v -e '^WARNING: Location' -e 'BuildBackendWarning' || true
    # Google's IFEval checks as lm-eval ships them: the reference the IFEval tests compare with. Its own
    # dependencies are ~30 packages the checks do not use, hence --no-deps.
    python -m pip install -q --no-deps lm-eval==0.4.13 2>&1 | grep -v '^WARNING: Location' || true
    python -c "import torch, transformers, rewardkit" || { echo "[setup] install failed" >&2; exit 1; }
    echo "$WANT" > "$STAMP"
fi
export TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
export HF_DATASETS_OFFLINE="${HF_DATASETS_OFFLINE:-1}"
