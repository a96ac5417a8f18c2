"""Every optional extra refuses in one line naming its install command when its package is missing."""
import sys

import pytest

from stabkit.errors import ConfigError
from stabkit.extras import EXTRAS, require_extra


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_a_missing_extra_is_one_line_naming_its_install_command(extra, monkeypatch):
    module = EXTRAS[extra][0]
    monkeypatch.setitem(sys.modules, module, None)  # import of a None entry raises ImportError
    with pytest.raises(ConfigError) as e:
        require_extra(extra)
    message = str(e.value)
    assert "\n" not in message
    assert f'pip install -e ".[{extra}]" (in the stabkit checkout)' in message and repr(module) in message


@pytest.mark.parametrize("extra", sorted(EXTRAS))
def test_an_installed_extra_gives_its_module(extra):
    assert require_extra(extra).__name__ == EXTRAS[extra][0]


def test_a_parquet_report_without_pyarrow_is_refused_first(tmp_path, capsys, monkeypatch):
    """pyarrow is an extra like the others: its refusal is the table's line, before the sweep is read."""
    from tests.helpers import cli

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    code, out, err = cli(["report", str(tmp_path / "sweep"), "--table-format", "parquet"], capsys)
    assert (code, out) == (2, "")
    assert err.strip() == ("error: parquet tables (stabkit report --table-format parquet) need the optional package "
                           "'pyarrow', which is not installed: pip install -e \".[parquet]\" (in the stabkit checkout)")
    assert list(tmp_path.iterdir()) == []
