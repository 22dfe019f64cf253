"""The worked example in docs/fork_search_kernel.md runs as written."""

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "fork_search_kernel.md"


def test_fork_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)
    assert len(blocks) >= 3
    namespace: dict = {}
    exec(compile("\n".join(blocks), str(DOC), "exec"), namespace)  # asserts inside
    assert "ucb1_policy" in namespace and "ema_backup" in namespace
