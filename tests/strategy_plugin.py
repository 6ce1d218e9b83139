"""A throwaway strategy plugin for the tests: a package folder holding the README's example
strategy (examples/strategies/imbalance.py) as ``imbplug.Imbalance``, and a dist-info folder
whose entry_points.txt registers it as ``imb`` in the ``ddms.strategies`` group -- what
``pip install`` of a plugin leaves in site-packages, without installing anything."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "strategies" / "imbalance.py"


def make_plugin(root: Path, name: str = "imb") -> Path:
    """Write the plugin under ``root`` (to be put on sys.path) and return ``root``."""
    pkg = root / "imbplug"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(EXAMPLE.read_text())
    dist = root / "imbplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: imbplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[ddms.strategies]\n{name} = imbplug:Imbalance\n")
    return root
