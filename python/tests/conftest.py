"""Fixtures: the plugins the tests load, deployed by eagle's `deploy_plugins` example.

Set EAGLE_TEST_PLUGINS to a directory that `cargo run --release --example deploy_plugins --
DIR` wrote; without it the fixture runs that command itself (from the repository root).
"""

import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def plugins(tmp_path_factory):
    d = os.environ.get("EAGLE_TEST_PLUGINS")
    if d:
        return pathlib.Path(d)
    out = tmp_path_factory.mktemp("plugins")
    subprocess.run(
        ["cargo", "run", "--release", "--quiet", "--example", "deploy_plugins", "--", str(out)],
        cwd=ROOT,
        check=True,
    )
    return out
