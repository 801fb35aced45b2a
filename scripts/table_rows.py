"""Write docs/architecture.md's table rows block (each dispatch table row, its handler and what it
emitted) from a run of the whole scenario suite: ``python scripts/table_rows.py``."""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/scenario"],
                         cwd=ROOT, env={**os.environ, "KFOLD_WRITE_TABLE_ROWS": "1"}))
