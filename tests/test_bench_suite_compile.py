"""``python -m bench.suite_compile``: the compile records tests/conftest.py writes under
``DDMS_COMPILE_PROFILE``, summed per kind, program and test file, beside a pytest log's durations."""

from __future__ import annotations

import json

import pytest

from bench import suite_compile


def test_summary_of_two_workers_records_and_a_log(tmp_path, capsys) -> None:
    rows0 = [["ddms_prog_abc", "run_batch", 9.0, 7.5, "tests/test_a.py::test_x"],
             ["ddms.storage.btree", "_update", 3.0, 2.0, "tests/test_a.py::test_x"]]
    rows1 = [["ddms_prog_def", "on_insert_BIDS_c0", 4.0, 4.0, "tests/test_b.py::test_y"]]
    (tmp_path / "gw0.1.json").write_text(json.dumps(rows0))
    (tmp_path / "gw1.2.json").write_text(json.dumps(rows1))
    log = tmp_path / "pytest.log"
    log.write_text("12.00s call     tests/test_a.py::test_x\n1.50s setup    tests/test_a.py::test_x\n"
                   "5.00s call     tests/test_b.py::test_y\n")
    suite_compile.main([str(tmp_path), "--log", str(log)])
    out = capsys.readouterr().out
    assert "nested compiles: 14 s" in out and "over 3 compiles, 2 test programs" in out   # 7.5 + 2.0 + 4.0
    assert "program: run_batch" in out and "program: on_insert" in out and "ddms.storage.btree" in out
    line_a = next(x for x in out.splitlines() if "tests/test_a.py" in x and "│" in x and "test_x" not in x)
    assert [c.strip() for c in line_a.split("│")[1:4]] == ["9.5", "13.5", "4.0"]   # compile, test, rest


def test_a_folder_without_records_is_an_error(tmp_path) -> None:
    with pytest.raises(SystemExit, match="no compile records"):
        suite_compile.main([str(tmp_path)])
