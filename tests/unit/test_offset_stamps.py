"""eos._kafka._offsets: every committed input offset carries this app's stamp; any other is refused, naming
the group, the partition and the offset, before anything of that partition is written or skipped."""

from __future__ import annotations

from functools import partial

import pytest

import eos
from eos._kafka._offsets import Committed, check_stamps, cli_stamp, is_own, operator_reset, stamp
from tests.support.configs import config as base_config

config = partial(base_config, app_id="orders")


def test_stamps_name_the_app_and_its_output_or_the_operator():
    assert stamp(config()) == "eos/1;app=orders;out=out"
    assert stamp(config(output_topic=None, output_topic_column="dest")) == "eos/1;app=orders;out=column:dest"
    assert cli_stamp("orders") == "eos/1;app=orders;by=cli"
    assert cli_stamp("orders", was=1500) == "eos/1;app=orders;by=cli;was=1500"


@pytest.mark.parametrize(
    ("metadata", "reset"),
    [
        ("eos/1;app=orders;by=cli;was=1500", (True, 1500)),
        ("eos/1;app=orders;by=cli", (True, None)),  # an older eos's reset: what it replaced is not known
        ("eos/1;app=orders;out=out", (False, None)),
        (None, (False, None)),
        ("eos/1;app=orders;by=cli;was=x", (True, None)),
    ],
)
def test_an_operators_reset_and_the_offset_it_replaced_are_read_from_the_stamp(metadata, reset):
    assert operator_reset(metadata) == reset


@pytest.mark.parametrize(
    ("metadata", "own"),
    [
        ("eos/1;app=orders;out=out", True),
        ("eos/1;app=orders;by=cli", True),  # `eos offsets reset` set it: the operator's decision
        ("eos/1;app=orders;by=cli;was=12", True),
        (None, False),  # a consumer that reuses the group id, kafka-consumer-groups --reset-offsets
        ("", False),
        ("eos/1;app=billing;out=out", False),  # another eos app with this group id
        ("eos/1;app=billing;by=cli", False),
        ("eos/1;app=orders;out=elsewhere", False),  # a second query with the same app_id
        ("eos/2;app=orders;out=out", False),  # a stamp this version cannot read
        ("something eos/1;app=orders;out=out", False),
    ],
)
def test_which_offsets_are_this_apps(metadata, own):
    assert is_own(config(), metadata) is own


def test_a_foreign_offset_is_refused_naming_group_partition_and_offset():
    committed = {
        ("in", 0): Committed(1_000, "eos/1;app=orders;out=out"),
        ("in", 1): Committed(3_000, ""),
        ("in", 2): None,
    }
    with pytest.raises(eos.ForeignOffsetError) as info:
        check_stamps(config(), committed)
    err = info.value
    assert (err.group, err.topic, err.partition, err.offset) == ("orders", "in", 1, 3_000)
    message = str(err)
    assert "group 'orders' has offset 3000 committed for input partition in/1" in message
    assert "without an eos stamp" in message
    assert "nothing of this partition was written or skipped" in message
    assert "eos offsets reset --app orders --topic in --shift 0 --execute" in message
    assert "accept_foreign_offsets" in message


def test_another_output_and_another_app_are_named_in_the_error():
    with pytest.raises(eos.ForeignOffsetError, match="another output"):
        check_stamps(config(), {("in", 0): Committed(5, "eos/1;app=orders;out=elsewhere")})
    with pytest.raises(eos.ForeignOffsetError, match="by eos app 'billing'"):
        check_stamps(config(), {("in", 0): Committed(5, "eos/1;app=billing;out=out")})


def test_own_offsets_pass_and_the_option_accepts_foreign_ones():
    committed = {("in", 0): Committed(7, "eos/1;app=orders;by=cli"), ("in", 1): None}
    assert check_stamps(config(), committed) == {("in", 0): 7, ("in", 1): None}
    foreign = {("in", 0): Committed(7, None)}
    assert check_stamps(config(accept_foreign_offsets=True), foreign) == {("in", 0): 7}


def test_accept_foreign_offsets_from_the_environment_and_properties():
    env = {"EOS_BOOTSTRAP_SERVERS": "b:1", "EOS_APP_ID": "a", "EOS_OUTPUT_TOPIC": "o"}
    assert eos.Config.from_env({**env, "EOS_ACCEPT_FOREIGN_OFFSETS": "true"}).accept_foreign_offsets is True
    assert eos.Config.from_env(env).accept_foreign_offsets is False
    props = {"bootstrap.servers": "b:1", "app.id": "a", "output.topic": "o", "accept.foreign.offsets": "no"}
    assert eos.Config.from_properties(props).accept_foreign_offsets is False
    with pytest.raises(eos.ConfigError, match="accept_foreign_offsets"):
        eos.Config.from_env({**env, "EOS_ACCEPT_FOREIGN_OFFSETS": "maybe"})
    with pytest.raises(eos.ConfigError, match="accept_foreign_offsets"):
        config(accept_foreign_offsets="yes")
