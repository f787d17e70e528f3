"""Every ```python snippet in migration_guide/ runs: in order, one fresh process per page.

A fresh process per page, because snippets may install aliases or configure devices.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

GUIDE = pathlib.Path(__file__).resolve().parent.parent / "migration_guide"
SNIPPET = re.compile(r"```python\n(.*?)```", re.S)
PAGES = sorted(p for p in GUIDE.glob("*.md") if SNIPPET.search(p.read_text()))


def test_there_are_snippets():
    assert len(PAGES) >= 4


@pytest.mark.slow_cases('README.md', 'embeddings.md', 'hooks.md', 'launcher.md', 'multi_worker.md', 'porting_mnist.md', 'strategies.md', 'traps.md')
@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_snippets_run(page, tmp_path):
    code = "\n\n".join(SNIPPET.findall(page.read_text()))
    script = tmp_path / f"{page.stem}_snippets.py"
    script.write_text(code)
    # This checkout's package first: an installed one (e.g. editable from elsewhere) must not
    # stand in for the code under test.
    repo = str(GUIDE.parent)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_ENABLE_ONEDNN_OPTS="0",
               PYTHONPATH=os.pathsep.join([repo] + [p for p in os.environ.get(
                   "PYTHONPATH", "").split(os.pathsep) if p]))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=300, cwd=str(tmp_path))
    assert done.returncode == 0, f"{page.name} snippets failed:\n{done.stderr[-3000:]}"
